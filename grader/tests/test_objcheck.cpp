// The static check of student objects (objcheck.h): reading mangled names, the rule table on synthetic `nm -P`
// output, raw system calls in `objdump -d` output, and one object compiled here by the host C++ compiler.
#include <catch2/catch_test_macros.hpp>
#include <fstream>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "objcheck.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

// The findings for one symbol of nm type `type` (a policy for lab 42, with `exports` as the shared libraries').
std::vector<ObjFinding> check_one(const std::string& name, char type, std::set<std::string> exports = {}) {
  ObjPolicy p;
  p.lab_namespace = "lab42";
  p.shared_exports = std::move(exports);
  return check_symbols({{name, type}}, p);
}
bool refused(const std::string& name, char type, std::set<std::string> exports = {}) {
  return !check_one(name, type, std::move(exports)).empty();
}

}  // namespace

TEST_CASE("the leading scope of mangled names", "[objcheck]") {
  bool global = false;
  CHECK(top_level_name("_ZN5lab424stepEPfi", &global) == "lab42");
  CHECK_FALSE(global);
  CHECK(top_level_name("_ZN6labkit6report6metricESt17basic_string_viewIcSt11char_traitsIcEEdS3_") == "labkit");
  CHECK(top_level_name("_ZTVN6labkit14NotImplementedE") == "labkit");  // vtable for
  CHECK(top_level_name("_ZTIN5Catch9ITestCaseE") == "Catch");         // typeinfo for
  CHECK(top_level_name("_ZGVZN5lab421fEvE1x") == "lab42");            // guard variable of a local static
  CHECK(top_level_name("_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_") ==
        "std");
  CHECK(top_level_name("_ZNKSt5ctypeIcE8do_widenEc") == "std");
  CHECK(top_level_name("_ZStplIcSt11char_traitsIcESaIcEENSt7__cxx1112basic_stringIT_T0_T1_EEPKS5_RKS8_") == "std");
  CHECK(top_level_name("_ZThn8_N5lab421B1fEv") == "lab42");  // a thunk
  CHECK(top_level_name("_Z6helperi", &global) == "helper");
  CHECK(global);
  CHECK(top_level_name("malloc") == "");
}

TEST_CASE("what a student object may define", "[objcheck]") {
  // The lab's own namespace, strong or weak.
  CHECK_FALSE(refused("_ZN5lab424stepEPfi", 'T'));
  CHECK_FALSE(refused("_ZN5lab426kTableE", 'R'));
  CHECK_FALSE(refused("_ZN5lab424stepIfEEvPT_", 'W'));
  // Code the compilers generate.
  CHECK_FALSE(refused("_GLOBAL__sub_I_fake.cu", 'T'));
  CHECK_FALSE(refused("__cudaRegisterLinkedBinary_abc", 'T'));
  CHECK_FALSE(refused("__fatbinwrap_abc", 'D'));
  CHECK_FALSE(refused("DW.ref.__gxx_personality_v0", 'V'));
  // Weak instantiations of library templates and of labkit's exception.
  CHECK_FALSE(
      refused("_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_", 'W'));
  CHECK_FALSE(refused("_ZN6thrust6detail8functionIiEEvv", 'W'));
  CHECK_FALSE(refused("_ZN6labkit14NotImplementedD2Ev", 'W'));
  CHECK_FALSE(refused("_ZTVN6labkit14NotImplementedE", 'V'));
  CHECK_FALSE(refused("_Z10cudaMallocIfE9cudaErrorPPT_m", 'W'));  // cudaMalloc<float>: cuda_runtime.h
  // A library template that the C++ library also exports: instantiated from the same headers.
  const std::string plus = "_ZStplIcSt11char_traitsIcESaIcEENSt7__cxx1112basic_stringIT_T0_T1_EEPKS5_RKS8_";
  CHECK_FALSE(refused(plus, 'W', {plus}));
  // nvcc gives anonymous namespaces a unique name with external linkage.
  CHECK_FALSE(refused("_ZN46_GLOBAL__N__097a5f96a_7_fake_cu_d63f9751_6helperEv", 'T'));
  // Locals are nobody else's business.
  CHECK_FALSE(refused("_ZN12_GLOBAL__N_16helperEv", 't'));
  CHECK_FALSE(refused("helper_table", 'd'));
}

TEST_CASE("what a student object may not define", "[objcheck]") {
  // C symbols: libc, the CUDA runtime, cuBLAS (symbol interposition).
  CHECK(refused("malloc", 'T'));
  CHECK(refused("clock_gettime", 'T'));
  CHECK(refused("cudaEventElapsedTime", 'T'));
  auto cublas = check_one("cublasSgemm_v2", 'T', {"cublasSgemm_v2"});
  REQUIRE(cublas.size() == 1);
  CHECK_THAT(cublas[0].reason, ContainsSubstring("symbol interposition"));
  CHECK(refused("cublasSgemm_v2", 'W'));  // weak is no better: it still takes the library's place
  // The gates' own code, strong or weak.
  CHECK(refused("_ZN6labkit6report6metricESt17basic_string_viewIcSt11char_traitsIcEEdS3_", 'T'));
  CHECK(refused("_ZN6labkit6report6metricESt17basic_string_viewIcSt11char_traitsIcEEdS3_", 'W'));
  CHECK(refused("_ZN6labkit4gate9thresholdERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", 'W'));
  CHECK(refused("_ZN5Catch11ResultBuilder5reactEv", 'T'));
  // A non-template function of the C++ library (steady_clock::now), strong or weak.
  const std::string now = "_ZNSt6chrono3_V212steady_clock3nowEv";
  CHECK(refused(now, 'T'));
  CHECK(refused(now, 'W', {now}));
  // A global-scope helper, and another lab's namespace.
  auto helper = check_one("_Z6helperi", 'T');
  REQUIRE(helper.size() == 1);
  CHECK_THAT(helper[0].reason, ContainsSubstring("anonymous namespace"));
  CHECK(refused("_ZN5lab014stepEv", 'T'));
}

TEST_CASE("a library's template instance only where the gates define it too", "[objcheck]") {
  // std::vector<double>'s growth: libstdc++ does not export it, the gates' code and a student's may both define it
  // (linked after the gates' objects and libraries, the student's copy is never the one the gates call).
  const std::string grow = "_ZNSt6vectorIdSaIdEE17_M_realloc_insertIJdEEEvN9__gnu_cxx17__normal_iteratorIPdS1_EEDpOT_";
  ObjPolicy p;
  p.lab_namespace = "lab42";
  p.gate_defines_known = true;
  CHECK(check_symbols({{grow, 'W'}}, p).empty());
  // A template instance that libstdc++ exports (string's operator+): accepted where the gates define it too, refused
  // where they do not (the gates would call the object's copy: an explicit specialisation under the library's name).
  const std::string plus = "_ZStplIcSt11char_traitsIcESaIcEENSt7__cxx1112basic_stringIT_T0_T1_EEPKS5_RKS8_";
  p.shared_exports = {plus};
  auto f = check_symbols({{plus, 'W'}}, p);
  REQUIRE(f.size() == 1);
  CHECK_THAT(f[0].reason, ContainsSubstring("the gates would call this copy"));
  p.gate_defines = {plus};
  CHECK(check_symbols({{plus, 'W'}}, p).empty());
  // Without the gates' symbols (a check outside a batch) the rule cannot apply.
  p.gate_defines.clear();
  p.gate_defines_known = false;
  CHECK(check_symbols({{plus, 'W'}}, p).empty());
  // A header-only class the table refuses to use, instantiated into the object: its definitions are its use.
  auto filebuf = check_one("_ZN9__gnu_cxx13stdio_filebufIcSt11char_traitsIcEEC1EiSt13_Ios_Openmodem", 'W');
  REQUIRE(filebuf.size() == 1);
  CHECK_THAT(filebuf[0].reason, ContainsSubstring("raw descriptor"));
}

TEST_CASE("a kernel at global scope is the student's own", "[objcheck]") {
  ObjPolicy p;
  p.lab_namespace = "lab42";
  // nvcc: the host stub `_Z6kernelPf` calls `__device_stub__Z6kernelPf`.
  std::vector<ObjSymbol> syms = {{"_Z6kernelPf", 'T'}, {"_Z25__device_stub__Z6kernelPfPf", 'T'}};
  CHECK(check_symbols(syms, p).empty());
}

TEST_CASE("what a student object may not use", "[objcheck]") {
  for (const char* name : {"dlopen", "dlsym", "dlvsym", "mprotect", "pkey_mprotect", "ptrace", "process_vm_writev",
                           "syscall", "setenv", "putenv", "unsetenv", "clearenv", "environ", "__environ", "fork",
                           "vfork", "execve", "execvp", "posix_spawn", "posix_spawnp", "system", "popen",
                           "cuptiActivityEnable", "cuGetProcAddress_v2", "cudaGetDriverEntryPointByVersion",
                           "dlsym@GLIBC_2.2.5",
                           // Writing on descriptor 3 (the result channel) without opening it.
                           "write", "__write", "writev", "pwrite64", "send", "sendmsg", "sendfile64", "splice",
                           "dprintf", "__dprintf_chk", "fdopen", "_IO_fdopen", "dup", "dup2", "dup3", "fcntl",
                           "fcntl64", "aio_write", "write@GLIBC_2.2.5",
                           // Copying the channel's key without taking it.
                           "recv", "recvmsg", "recvfrom", "recvmmsg", "__recv_chk",
                           // Writable pages over the gates' code without mprotect.
                           "mmap", "mmap64", "mremap", "munmap", "madvise", "shmat", "memfd_create", "pkey_alloc",
                           // Code that runs while the step does not: threads, timers, signal handlers, callbacks.
                           "pthread_create", "thrd_create", "timer_create", "setitimer", "alarm", "sigaction",
                           "signal", "__sysv_signal", "cudaLaunchHostFunc", "cudaStreamAddCallback",
                           // The gates' thread's share of the CPUs, and device-wide settings the baselines share.
                           "sched_setscheduler", "sched_setaffinity", "pthread_setaffinity_np", "setpriority",
                           "nice", "cudaSetDeviceFlags", "cudaDeviceSetLimit", "cudaDeviceSetCacheConfig",
                           "cudaStreamSetAttribute", "cudaCtxResetPersistingL2Cache",
                           // Their twins and siblings (found by a review of the table, 2026-11-28): a thread without
                           // pthread_create, glibc's private names, the loader's lists, per-thread-stream variants,
                           // host code in graphs, a CPU-time limit as a timer, device-wide pool and stream settings.
                           "__clone", "__clone3", "clone3", "__libc_fork", "__libc_system", "__libc_sigaction",
                           "_r_debug", "_dl_find_object", "getauxval", "ssignal", "sigvec", "setrlimit",
                           "setrlimit64", "prlimit64", "cudaLaunchHostFunc_ptsz", "cudaStreamAddCallback_ptsz",
                           "cudaStreamSetAttribute_ptsz", "cudaGraphAddHostNode", "cudaGraphExecHostNodeSetParams",
                           "cudaGraphAddNode_v2", "cudaUserObjectCreate", "cudaStreamCopyAttributes_ptsz",
                           "cudaInitDevice", "cudaDeviceSetMemPool", "cudaMemPoolSetAttribute",
                           "cudaDeviceSetGraphMemAttribute",
                           // Library loggers: code or output inside every library call, the baselines' too.
                           "cublasSetLoggerCallback", "cublasLoggerConfigure", "cublasLtLoggerSetCallback",
                           "cublasLtLoggerSetFile", "cusparseLoggerSetCallback", "cusparseLoggerSetLevel",
                           "cudaLogsRegisterCallback",
                           // Another process's device memory (lab 09's ranks must use MPI).
                           "cudaIpcGetMemHandle", "cudaIpcOpenMemHandle", "cuIpcOpenMemHandle_v2",
                           "cuMemImportFromShareableHandle", "cudaMemPoolExportToShareableHandle",
                           "cudaMemPoolImportPointer", "cuMemPoolExportPointer",
                           // Device code loaded or compiled at run time.
                           "cudaLibraryLoadData", "cuLibraryLoadFromFile", "cuModuleLoadData", "cuModuleLoadDataEx",
                           "cuLinkCreate_v2", "nvrtcCompileProgram", "nvJitLinkCreate"}) {
    INFO(name);
    auto f = check_one(name, 'U');
    REQUIRE(f.size() == 1);
    CHECK_THAT(f[0].reason, ContainsSubstring("uses `"));
  }
  CHECK(refused("_ZN6labkit6report6metricESt17basic_string_viewIcSt11char_traitsIcEEdS3_", 'U'));
  CHECK(refused("_ZN6labkit6detail9gate_infoEv", 'U'));
  CHECK(refused("_ZN6labkit4gate4seedESt17basic_string_viewIcSt11char_traitsIcEE", 'U'));
  CHECK(refused("_ZN5Catch7Session3runEv", 'U'));
  // Asking the launch recorder whether it watches (a step that knows does other work when it does not).
  CHECK(refused("_ZN6labkit8launches8Recorder6activeEv", 'U'));
  CHECK(refused("_ZN6labkit8launches8RecorderC1Ev", 'U'));
  // The gates' own answers: references on the CPU and the GPU, the hand-written baselines compiled into the gate
  // binary (their kernels would count as the binary's own), the gates' helpers.
  for (const char* name : {"_ZN6labkit10matmul_refEiiiRKSt6vectorIfSaIfEES4_S4_",
                           "_ZN6labkit13matmul_ref_atEiiiRKSt6vectorIfSaIfEES4_S4_ii",
                           "_ZN6labkit18matmul_cpu_blockedEiiiPKfS1_Pf", "_ZN6labkit8sort_refESt6vectorIfSaIfEEb",
                           "_ZN6labkit7ata_refEiiRKSt6vectorIdSaIdEE", "_ZN6labkit9saxpy_refEfRKSt6vectorIfSaIfEES4_",
                           "_ZN6labkit6cg_refERKNS_3CsrERKSt6vectorIdSaIdEEdi",
                           "_ZN6labkit8spmv_refERKNS_3CsrERKSt6vectorIdSaIdEE", "_ZN6labkit12norm2_deviceEPKfm",
                           "_ZN5lab038baseline18transpose_rowmajorEiiPKfPf", "_ZN5lab068baseline9naive_ataEiiPKdPd",
                           "_ZN14lab08_baseline8OneGpuCgC1ERKN6labkit3CsrE", "_ZN11lab04_gates9on_device4copyEPvPKvm",
                           // The gates' fill of shared memory (its kernel would count as the step's own).
                           "_ZN6labkit20poison_shared_memoryEv",
                           // A kernel of a baseline's anonymous namespace (nvcc names it, with external linkage).
                           "_ZN5lab038baseline53_GLOBAL__N__7b6a59ab_20_rowmajor_baseline_cu_178001e625transpose_"
                           "rowmajor_kernelEiiPKfPf"}) {
    INFO(name);
    auto f = check_one(name, 'U');
    REQUIRE(f.size() == 1);
    CHECK_THAT(f[0].reason, ContainsSubstring("the gates'"));
  }
  // What the labs' steps may call of labkit (the error checks, lab 07 step 5's timing and fills).
  for (const char* name : {"_ZN6labkit16throw_cuda_errorE9cudaErrorPKcS2_i", "_ZN6labkit18fill_random_deviceEPfmmff",
                           "_ZN6labkit8time_gpuERKSt8functionIFviEERKNS_13TimingOptionsE",
                           "_ZN6labkit9to_stringENS_8CgStatusE", "_ZNK6labkit3Csr8validateEv"}) {
    INFO(name);
    CHECK(check_one(name, 'U').empty());
  }
  // Threads: std::thread, std::jthread and std::async all start through _M_start_thread.
  CHECK(refused("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE", 'U'));
  // std::thread's other members (hardware_concurrency) start nothing.
  CHECK_FALSE(refused("_ZNSt6thread20hardware_concurrencyEv", 'U'));
  CHECK(refused("_ZN9__gnu_cxx13stdio_filebufIcSt11char_traitsIcEEC1EiSt13_Ios_Openmodem", 'U'));
  CHECK(refused("_ZNSt12__basic_fileIcE8sys_openEiSt13_Ios_Openmode", 'U'));  // what stdio_filebuf(int fd) calls
  // std::ofstream's is_open() reaches __basic_file too, and a file opened by name stays allowed.
  CHECK_FALSE(refused("_ZNKSt12__basic_fileIcE7is_openEv", 'U'));
  CHECK_FALSE(refused("__libc_single_threaded", 'U'));  // libstdc++'s inline reference counting reads it
  // What every step uses.
  for (const char* name : {"memcpy", "malloc", "cudaMalloc", "cudaLaunchKernel", "cublasSgemm_v2", "getenv",
                           // Per-kernel settings change only the step's own kernels; a step may pick its device.
                           "cudaFuncSetAttribute", "cudaFuncSetCacheConfig", "cudaSetDevice", "cudaStreamCreate",
                           "cudaStreamCreateWithFlags", "cudaStreamBeginCapture", "cudaGraphInstantiate",
                           "cudaGraphLaunch", "cudaGraphAddKernelNode",
                           // Printing to the console log, and the files a step may open by name.
                           "printf", "puts", "fprintf", "fwrite", "fflush", "__printf_chk", "fopen", "fclose",
                           "_ZNSolsEi", "_ZStlsISt11char_traitsIcEERSt13basic_ostreamIcT_ES5_PKc",
                           "_ZN6labkit14NotImplementedC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"}) {
    INFO(name);
    CHECK(check_one(name, 'U').empty());
  }
}

TEST_CASE("raw system calls in the disassembly", "[objcheck]") {
  const std::string dis =
      "0000000000000000 <_ZN5lab423addEii>:\n"
      "   0:\t48 c7 c0 27 00 00 00 \tmov    $0x27,%rax\n"
      "   7:\t0f 05                \tsyscall\n"
      "   9:\tc3                   \tret\n"
      "0000000000000010 <_ZN5lab423subEii>:\n"
      "  10:\tcd 80                \tint    $0x80\n"
      "0000000000000020 <_ZN5lab423mulEii>:\n"
      "  20:\te8 00 00 00 00       \tcall   25 <syscall_wrapper>\n"
      "  25:\tc3                   \tret\n";
  auto f = find_raw_syscalls(dis);
  REQUIRE(f.size() == 2);
  CHECK(f[0].symbol == "lab42::add(int, int)");
  CHECK_THAT(f[0].reason, ContainsSubstring("syscall"));
  CHECK(f[1].symbol == "lab42::sub(int, int)");
  CHECK_THAT(describe_refusal("x.cu", f), ContainsSubstring("refused: student/x.cu"));
}

TEST_CASE("system-call bytes inside other instructions are noted, not refused", "[objcheck]") {
  const std::string dis =
      "0000000000000000 <_ZN5lab426hiddenEl>:\n"
      "   0:\t48 89 f8             \tmov    %rdi,%rax\n"
      "   3:\teb 01                \tjmp    6 <_ZN5lab426hiddenEl+0x6>\n"
      "   5:\tb8 0f 05 90 90       \tmov    $0x9090050f,%eax\n"
      "   a:\tc3                   \tret\n"
      // A decoded syscall at an instruction's start is find_raw_syscalls' (a refusal), not this note.
      "0000000000000010 <_ZN5lab423rawEv>:\n"
      "  10:\t0f 05                \tsyscall\n"
      "  12:\tc3                   \tret\n"
      // An instruction longer than objdump's 7 bytes a line goes on without a mnemonic: its bytes are inside it.
      "0000000000000020 <_ZN5lab424longEv>:\n"
      "  20:\t48 b8 11 22 33 44 55 \tmovabs $0x80cd665544332211,%rax\n"
      "  27:\t66 cd 80 \n"
      "  2a:\tc3                   \tret\n"
      // Different functions never join: the last byte of one and the first of the next are not a pair.
      "0000000000000030 <_ZN5lab421aEv>:\n"
      "  30:\t0f                   \t.byte 0xf\n"
      "0000000000000031 <_ZN5lab421bEv>:\n"
      "  31:\t05 00 00 00 00       \tadd    $0x0,%eax\n";
  auto f = find_hidden_syscalls(dis);
  REQUIRE(f.size() == 2);
  CHECK(f[0].symbol == "lab42::hidden(long)");
  CHECK_THAT(f[0].reason, ContainsSubstring("(syscall) inside another instruction, 6 bytes in"));
  CHECK(f[1].symbol == "lab42::long()");
  CHECK_THAT(f[1].reason, ContainsSubstring("(int $0x80)"));
  CHECK(find_raw_syscalls(dis).size() == 1);  // raw(): the plain one
}

TEST_CASE("code that runs before the gates' start-up", "[objcheck]") {
  // objdump -h of an object with a prioritised constructor and a pre-initialiser; plain .init_array is allowed.
  const std::string headers =
      "x.o:     file format elf64-x86-64\n\nSections:\nIdx Name          Size      VMA               LMA\n"
      "  0 .text         00000010  0000000000000000  0000000000000000  00000040  2**4\n"
      "  5 .init_array   00000008  0000000000000000  0000000000000000  00000060  2**3\n"
      "  6 .init_array.00101 00000008  0000000000000000  0000000000000000  00000068  2**3\n"
      "  7 .preinit_array 00000008  0000000000000000  0000000000000000  00000070  2**3\n"
      // Spliced into the program's _init (before every constructor) and _fini; a destructor function.
      "  8 .init         00000005  0000000000000000  0000000000000000  00000078  2**0\n"
      "  9 .fini         00000005  0000000000000000  0000000000000000  00000080  2**0\n"
      " 10 .fini_array   00000008  0000000000000000  0000000000000000  00000088  2**3\n"
      // A function's own section whose name merely contains "init" is code like any other.
      " 11 .text.nvtxInitialize_impl_init_v3 00000010  0000000000000000  0000000000000000  00000090  2**4\n";
  auto f = find_early_code(headers);
  REQUIRE(f.size() == 5);
  CHECK(f[0].symbol == ".init_array.00101");
  CHECK(f[1].symbol == ".preinit_array");
  CHECK(f[2].symbol == ".init");
  CHECK(f[3].symbol == ".fini");
  CHECK(f[4].symbol == ".fini_array");
  CHECK_THAT(f[0].reason, ContainsSubstring("before the gates' start-up"));
  // An indirect function's resolver runs while the program loads, whatever namespace it is in.
  ObjPolicy p;
  p.lab_namespace = "lab42";
  auto ifunc = check_symbols({{"_ZN5lab424fastEv", 'i'}}, p);
  REQUIRE(ifunc.size() == 1);
  CHECK_THAT(ifunc[0].reason, ContainsSubstring("ifunc"));
}

TEST_CASE("the headers a file included: Thrust and CUB only where a gate allows them", "[objcheck]") {
  const std::string deps =
      "obj.o : /scratch/3-thrust/src/labs/04_bitonic_sort/student/step1.cu \\\n"
      "  /usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h \\\n"
      "  /usr/local/cuda-13.0/include/cccl/cuda/std/limits \\\n"
      "  /usr/local/cuda-13.0/include/cccl/thrust/sort.h \\\n"
      "  /usr/local/cuda-13.0/include/cccl/cub/device/device_radix_sort.cuh\n";
  auto none = find_library_headers(deps, {});
  REQUIRE(none.size() == 2);
  CHECK_THAT(none[0].reason, ContainsSubstring("includes Thrust"));
  CHECK(none[0].symbol == "/usr/local/cuda-13.0/include/cccl/thrust/sort.h");
  CHECK_THAT(none[1].reason, ContainsSubstring("includes CUB"));
  CHECK(find_library_headers(deps, {"thrust"}).empty());  // Thrust's algorithms run CUB's kernels
  auto cub_only = find_library_headers(deps, {"cub"});
  REQUIRE(cub_only.size() == 1);
  CHECK_THAT(cub_only[0].reason, ContainsSubstring("includes Thrust"));
  CHECK(find_library_headers(deps, {"cublas"}).size() == 2);
  // libcu++ (cuda/std), and a submission folder that happens to be called "thrust", are no library.
  CHECK(find_library_headers("o.o : /w/thrust/a.cu /usr/local/cuda/include/cccl/cuda/std/limits\n", {}).empty());
}

TEST_CASE("an object compiled here: nm and objdump as the grader runs them", "[objcheck]") {
  auto cxx = find_program("c++"), nm = find_program("nm"), objdump = find_program("objdump");
  if (!cxx || !nm || !objdump) SKIP("needs c++, nm and objdump");
  test::TempDir dir("objcheck");
  auto compile = [&](const std::string& name, const std::string& code) {
    write_file_atomic(dir.path / (name + ".cpp"), code);
    fs::path obj = dir.path / (name + ".o");
    auto r = run_command({cxx->string(), "-std=c++17", "-O1", "-c", (dir.path / (name + ".cpp")).string(), "-o",
                          obj.string()},
                         120);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    ObjPolicy p;
    p.lab_namespace = "lab42";
    auto f = check_symbols(parse_nm_posix(run_command({nm->string(), "-P", obj.string()}).output), p);
    const std::string dis = run_command({objdump->string(), "-d", obj.string()}).output;
    auto raw = find_raw_syscalls(dis);
    f.insert(f.end(), raw.begin(), raw.end());
    auto hidden = find_hidden_syscalls(dis);  // a note for the instructor, not a refusal
    f.insert(f.end(), hidden.begin(), hidden.end());
    return f;
  };
  auto clean = compile("clean", R"(
    #include <string>
    #include <vector>
    namespace { int helper(int x) { return 2 * x; } }
    namespace lab42 {
    std::vector<std::string> names(int n) {
      std::vector<std::string> v;
      for (int i = 0; i < n; ++i) v.push_back("x" + std::to_string(helper(i)));
      return v;
    }
    }  // namespace lab42
  )");
  for (const auto& f : clean) UNSCOPED_INFO(f.symbol << ": " << f.reason);
  CHECK(clean.empty());

  auto bad = compile("bad", R"(
    #include <cstdlib>
    #include <ctime>
    #include <unistd.h>
    extern "C" int clock_gettime(clockid_t, struct timespec* ts) { ts->tv_sec = 0; ts->tv_nsec = 0; return 0; }
    namespace { const int force = setenv("LABKIT_SANITIZER", "1", 1); }
    namespace lab42 {
    long pid() { long r = 39; asm volatile("syscall" : "+a"(r) : : "rcx", "r11", "memory"); return r + force; }
    long forge() { return write(3, "{}\n", 3); }
    // A system call hidden from linear disassembly: the jump lands inside what objdump decodes as one `mov`.
    long hidden(long nr) {
      long r;
      asm volatile("jmp 1f+1\n\t1: .byte 0xb8,0x0f,0x05,0x90,0x90" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
      return r;
    }
    }  // namespace lab42
  )");
  std::string all;
  for (const auto& f : bad) all += f.symbol + ": " + f.reason + "\n";
  INFO(all);
  CHECK_THAT(all, ContainsSubstring("clock_gettime: defines the C symbol"));
  CHECK_THAT(all, ContainsSubstring("setenv: uses `setenv`"));
  CHECK_THAT(all, ContainsSubstring("lab42::pid(): contains a raw `syscall`"));
  CHECK_THAT(all, ContainsSubstring("write: uses `write`"));
  CHECK_THAT(all, ContainsSubstring("lab42::hidden(long): holds the bytes of a system-call instruction (syscall) "
                                    "inside another instruction"));
}

TEST_CASE("a library whose exports cannot be read stops the batch instead of weakening the check", "[objcheck]") {
  // Without a library's exports a student object could redefine one of them unseen (a weak definition replaces the
  // library's in the gate binary).
  test::TempDir dir("exports");
  const fs::path not_a_library = dir.path / "libnot.so";
  std::ofstream(not_a_library) << "not an ELF file\n";
  CHECK_THROWS_WITH(exported_symbols_each({not_a_library.string()}, "nm", 1),
                    ContainsSubstring("cannot read the symbols " + not_a_library.string() + " exports"));
  // A real one still reads.
  const auto libc = run_command({"g++", "-print-file-name=libc.so.6"});
  REQUIRE(libc.exit_code == 0);
  const auto names = exported_symbols_each({trim(libc.output)}, "nm", 1);
  CHECK(names.at(trim(libc.output)).count("malloc") == 1);
}
