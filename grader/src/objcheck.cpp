#include "objcheck.h"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fnmatch.h>
#include <memory>
#include <regex>

#include "labkit/launches.h"
#include "labpool.h"
#include "util.h"

namespace labgrade {

namespace {

// ---- the table ----------------------------------------------------------------------------------------------
// One entry per thing a student object may define, or must not use, with the reason shown to the student.
struct SymbolRule {
  enum Kind {
    allow_use,         // an undefined reference to this C name that a forbid_use prefix would otherwise catch
    forbid_use,        // an undefined reference to this C name (exact, or a prefix ending in '*')
    forbid_use_mangled,  // an undefined reference to a C++ name whose mangled form starts so (members of a
                         // template's instance, which the scope reader does not follow past template arguments)
    forbid_use_scope,  // an undefined reference to anything in this C++ scope ("labkit::report"), or a weak
                       // definition there (a header-only class instantiated into the object is still its use)
    allow_generated,   // a definition the compilers generate (a prefix of the symbol or of its global-scope name)
    allow_weak_scope,  // a weak definition in this C++ scope: template instantiations and inline functions of
                       // headers the submission includes (a name the shared libraries export is still refused)
    allow_weak_global_template,  // a weak instantiation of a global-scope template whose name starts so (the
                                 // CUDA runtime's typed wrappers: cudaMalloc<float>); being a template it cannot
                                 // take the place of the C function of the same name
  };
  Kind kind;
  const char* pattern;
  const char* reason;
};

const SymbolRule kSymbolRules[] = {
    // Reaching the gates' code or memory.
    {SymbolRule::forbid_use, "dlopen", "loads code the grader did not link and finds the gates' functions"},
    {SymbolRule::forbid_use, "dlmopen", "loads code the grader did not link"},
    {SymbolRule::forbid_use, "dlsym", "finds the gates' (or the libraries') functions by name, to call or patch"},
    {SymbolRule::forbid_use, "dlvsym", "finds the gates' (or the libraries') functions by name, to call or patch"},
    {SymbolRule::forbid_use, "dladdr", "maps addresses to the gates' symbols"},
    {SymbolRule::forbid_use, "dl_iterate_phdr", "walks the program's loaded objects to find the gates' code"},
    {SymbolRule::forbid_use, "__libc_dlopen_mode", "glibc's internal dlopen"},
    {SymbolRule::forbid_use, "__libc_dlsym", "glibc's internal dlsym"},
    // The loader's own lists lead to every loaded library's symbol table: dlsym without dlsym.
    {SymbolRule::forbid_use, "_r_debug", "the loader's list of loaded objects, to find functions by name"},
    {SymbolRule::forbid_use, "_dl_*", "the loader's internals, to find functions by name"},
    {SymbolRule::forbid_use, "getauxval", "the loader's view of the process (where the libraries and the vDSO are)"},
    {SymbolRule::forbid_use, "mprotect", "makes the gates' code or read-only data writable (to patch the verdict)"},
    {SymbolRule::forbid_use, "pkey_mprotect", "makes the gates' code or read-only data writable"},
    {SymbolRule::forbid_use, "ptrace", "inspects or changes a process from outside"},
    {SymbolRule::forbid_use, "process_vm_writev", "writes another process's memory"},
    {SymbolRule::forbid_use, "process_vm_readv", "reads another process's memory"},
    {SymbolRule::forbid_use, "syscall", "a system call by number, which no symbol check can follow"},
    // Writable code by other means: a mapping placed over the gates' code (MAP_FIXED), moved or remapped, shared
    // memory that another mapping of the same pages can write. (Writes through /proc/self/mem are stopped at run
    // time: labkit's start-up forbids writes below /proc, see gates_main.cpp.)
    {SymbolRule::forbid_use, "mmap*", "maps memory over the gates' code or data (MAP_FIXED) to change it"},
    {SymbolRule::forbid_use, "__mmap*", "glibc's mmap: maps memory over the gates' code or data"},
    {SymbolRule::forbid_use, "mremap", "moves or grows a mapping over the gates' code or data"},
    {SymbolRule::forbid_use, "munmap", "removes the gates' code or data from the address space"},
    {SymbolRule::forbid_use, "madvise", "changes how the gates' pages behave (MADV_DONTNEED discards their data)"},
    {SymbolRule::forbid_use, "remap_file_pages", "rearranges mapped pages"},
    {SymbolRule::forbid_use, "shmat", "attaches shared memory (a second, writable view of pages)"},
    {SymbolRule::forbid_use, "memfd_create", "creates memory that can be mapped twice, once writable"},
    {SymbolRule::forbid_use, "pkey_*", "changes memory protection keys of the gates' pages"},
    // Code that runs when the step is not running: a thread, a timer's signal or a host callback left behind can
    // launch a library's kernels after the recorder has stopped, do the step's work after its timer has stopped, or
    // keep the GPU or a CPU busy while the gate times its baseline (a slowed baseline raises the step's ratio). No
    // step of any lab needs a host thread of its own: the GPU does the parallel work.
    {SymbolRule::forbid_use, "pthread_create", "starts a thread, which runs on while the gates time their baselines"},
    {SymbolRule::forbid_use_scope, "std::thread::_M_start_thread",
     "starts a thread (std::thread, std::jthread, std::async), which runs on while the gates time their baselines"},
    {SymbolRule::forbid_use, "thrd_create", "starts a thread, which runs on while the gates time their baselines"},
    {SymbolRule::forbid_use, "__clone*", "glibc's clone: starts a thread or process"},
    {SymbolRule::forbid_use, "aio_*", "asynchronous I/O: glibc runs it on threads of its own"},
    {SymbolRule::forbid_use, "mq_notify", "a message-queue notification can start a thread"},
    {SymbolRule::forbid_use, "getaddrinfo_a", "asynchronous name lookup: glibc runs it on threads of its own"},
    {SymbolRule::forbid_use, "timer_create", "a timer that runs code later (a signal or a thread)"},
    {SymbolRule::forbid_use, "setitimer", "a timer that interrupts the gates later with a signal"},
    {SymbolRule::forbid_use, "alarm", "a timer that interrupts the gates later with a signal"},
    {SymbolRule::forbid_use, "ualarm", "a timer that interrupts the gates later with a signal"},
    {SymbolRule::forbid_use, "sigaction", "a signal handler: code that interrupts the gates"},
    {SymbolRule::forbid_use, "__sigaction", "glibc's sigaction: a signal handler"},
    {SymbolRule::forbid_use, "signal", "a signal handler: code that interrupts the gates"},
    {SymbolRule::forbid_use, "bsd_signal", "a signal handler: code that interrupts the gates"},
    {SymbolRule::forbid_use, "__sysv_signal", "a signal handler: code that interrupts the gates"},
    {SymbolRule::forbid_use, "sysv_signal", "a signal handler: code that interrupts the gates"},
    {SymbolRule::forbid_use, "sigset", "a signal handler: code that interrupts the gates"},
    {SymbolRule::forbid_use, "ssignal", "glibc's other signal(): a signal handler"},
    {SymbolRule::forbid_use, "sigvec", "a signal handler: code that interrupts the gates"},
    // A lowered CPU-time limit is a timer too (SIGXCPU once a CPU second), and the gates' limits are the grader's.
    {SymbolRule::forbid_use, "setrlimit*", "changes a resource limit (a low CPU-time limit signals the gates later)"},
    {SymbolRule::forbid_use, "prlimit*", "changes a resource limit (a low CPU-time limit signals the gates later)"},
    // The runtime's per-thread-stream twins (_ptsz, _ptds) are the same functions under other names.
    {SymbolRule::forbid_use, "cudaLaunchHostFunc*", "a host callback that runs when the stream reaches it, "
                                                    "after the step has returned"},
    {SymbolRule::forbid_use, "cudaStreamAddCallback*", "a host callback that runs after the step has returned"},
    {SymbolRule::forbid_use, "cudaGraphAddHostNode*", "a graph node that runs host code when the graph reaches it"},
    {SymbolRule::forbid_use, "cudaGraphHostNodeSetParams*", "a graph node that runs host code"},
    {SymbolRule::forbid_use, "cudaGraphExecHostNodeSetParams*", "a graph node that runs host code"},
    {SymbolRule::forbid_use, "cudaGraphAddNode*", "adds a graph node of any kind, a host node too"},
    {SymbolRule::forbid_use, "cudaGraphNodeSetParams*", "sets a graph node's parameters, a host node's too"},
    {SymbolRule::forbid_use, "cudaGraphExecNodeSetParams*", "sets a graph node's parameters, a host node's too"},
    {SymbolRule::forbid_use, "cudaUserObjectCreate*", "host code that runs when a graph releases the object"},
    {SymbolRule::forbid_use, "cuLaunchHostFunc", "a host callback that runs after the step has returned"},
    {SymbolRule::forbid_use, "cuStreamAddCallback", "a host callback that runs after the step has returned"},
    // The libraries' loggers call a function of the step, or write a line, on every library call of the whole
    // process, the gates' baselines included: a callback that spins on the host inside a baseline's timing
    // (cuBLAS calls it in the caller's thread, between the gate's timing events) slows the baseline at will.
    {SymbolRule::forbid_use, "cublasSetLoggerCallback", "code that cuBLAS runs inside every call, the baselines' too"},
    {SymbolRule::forbid_use, "cublasLoggerConfigure", "logging of every cuBLAS call, the baselines' too"},
    {SymbolRule::forbid_use, "cublasLtLogger*", "cuBLASLt's logging of every call, the baselines' too"},
    {SymbolRule::forbid_use, "cusparseLogger*", "cuSPARSE's logging of every call, the baselines' too"},
    // cuBLASLt's process-wide settings: every GEMM's kernel choice goes through its heuristics, the baselines' too
    // (a cache of capacity 0 makes each cuBLAS call choose again on the host, inside the baseline's timing).
    {SymbolRule::forbid_use, "cublasLtHeuristicsCacheSetCapacity", "a process-wide cuBLASLt setting the baselines' "
                                                                   "GEMMs run with"},
    {SymbolRule::forbid_use, "cublasLtDisableCpuInstructionsSetMask", "a process-wide cuBLASLt setting the "
                                                                      "baselines' GEMMs run with"},
    {SymbolRule::forbid_use, "cudaLogs*", "code the CUDA runtime runs on its log messages"},
    {SymbolRule::forbid_use, "cuLogs*", "code the CUDA driver runs on its log messages"},
    // The CPU time and placement the gates' own thread gets: a step that lowers its priority or pins it to a busy
    // CPU slows every baseline that launches many kernels or waits on the host.
    {SymbolRule::forbid_use, "sched_set*", "changes the scheduling of the gates' thread (priority, policy, CPUs)"},
    {SymbolRule::forbid_use, "pthread_setaffinity_np", "pins the gates' thread to chosen CPUs"},
    {SymbolRule::forbid_use, "pthread_setschedparam", "changes the scheduling of the gates' thread"},
    {SymbolRule::forbid_use, "pthread_setschedprio", "changes the priority of the gates' thread"},
    {SymbolRule::forbid_use, "setpriority", "changes the priority of the gates' process"},
    {SymbolRule::forbid_use, "nice", "changes the priority of the gates' process"},
    // Device-wide settings that the gates' baselines share with the step. Per-kernel settings
    // (cudaFuncSetAttribute, cudaFuncSetCacheConfig) stay allowed: they change only the step's own kernels.
    {SymbolRule::forbid_use, "cudaSetDeviceFlags",
     "changes how every later CUDA call waits (blocking synchronisation slows the gates' baselines)"},
    {SymbolRule::forbid_use, "cudaDeviceSetLimit",
     "changes a device-wide limit (the persisting L2 set-aside, the stack) that the gates' baselines share"},
    {SymbolRule::forbid_use, "cudaDeviceSetCacheConfig",
     "changes the L1/shared split of every kernel, the baselines' too (use cudaFuncSetCacheConfig for yours)"},
    {SymbolRule::forbid_use, "cudaDeviceSetSharedMemConfig", "changes a device-wide setting the baselines share"},
    {SymbolRule::forbid_use, "cudaStreamSetAttribute*",
     "sets an L2 access-policy window or priority on a stream (the default stream is the baselines' too)"},
    {SymbolRule::forbid_use, "cudaStreamCopyAttributes*",
     "copies a stream's attributes (an L2 window, a priority) onto another, the default stream too"},
    {SymbolRule::forbid_use, "cudaInitDevice", "sets the device flags that every later CUDA call waits by"},
    {SymbolRule::forbid_use, "cudaDeviceSetMemPool", "changes the device's memory pool, which the gates share"},
    {SymbolRule::forbid_use, "cudaMemPoolSetAttribute", "changes a memory pool that the gates may share"},
    {SymbolRule::forbid_use, "cudaMemPoolTrimTo", "changes a memory pool that the gates may share"},
    {SymbolRule::forbid_use, "cudaDeviceSetGraphMemAttribute", "changes the device's graph memory, which is shared"},
    {SymbolRule::forbid_use, "cudaDeviceGraphMemTrim", "changes the device's graph memory, which is shared"},
    {SymbolRule::forbid_use, "cudaCtxResetPersistingL2Cache", "changes what the whole device keeps in L2"},
    {SymbolRule::forbid_use, "cudaDeviceReset", "destroys the gates' device memory and handles"},
    // Another process's device memory. No lab needs it (lab 08 is one process; lab 09's ranks exchange their panels
    // through MPI, as the lab is about): a lab 09 step that read its neighbour's A over NVLink instead of receiving
    // the broadcasts would time a transport the gate's communication baseline does not use, as "hidden" work.
    {SymbolRule::forbid_use, "cudaIpc*", "opens another process's device memory (lab 09 moves data through MPI)"},
    {SymbolRule::forbid_use, "cuIpc*", "opens another process's device memory (lab 09 moves data through MPI)"},
    {SymbolRule::forbid_use, "cuMemExportToShareableHandle", "shares device memory with another process"},
    {SymbolRule::forbid_use, "cuMemImportFromShareableHandle", "maps another process's device memory"},
    {SymbolRule::forbid_use, "cudaMemPoolExport*", "shares a memory pool's memory with another process"},
    {SymbolRule::forbid_use, "cudaMemPoolImport*", "maps another process's memory pool"},
    {SymbolRule::forbid_use, "cuMemPoolExport*", "shares a memory pool's memory with another process"},
    {SymbolRule::forbid_use, "cuMemPoolImport*", "maps another process's memory pool"},
    // Device code loaded or compiled at run time: a kernel the launch recorder takes for one compiled into the
    // binary (by its name) whose code is not the binary's, which the machine-code checks (grader/src/sass.h) read
    // from the binary. No lab needs it.
    {SymbolRule::forbid_use, "cudaLibraryLoad*", "loads device code at run time (no lab needs it)"},
    {SymbolRule::forbid_use, "cuLibraryLoad*", "loads device code at run time (no lab needs it)"},
    {SymbolRule::forbid_use, "cuModuleLoad*", "loads device code at run time (no lab needs it)"},
    {SymbolRule::forbid_use, "cuLink*", "links device code at run time (no lab needs it)"},
    {SymbolRule::forbid_use, "nvrtc*", "compiles device code at run time (no lab needs it)"},
    {SymbolRule::forbid_use, "nvJitLink*", "links device code at run time (no lab needs it)"},
    // What the gates read from the environment (LABKIT_SANITIZER, the seed, the result channel).
    {SymbolRule::forbid_use, "setenv", "changes an environment variable that the gates read"},
    {SymbolRule::forbid_use, "putenv", "changes an environment variable that the gates read"},
    {SymbolRule::forbid_use, "unsetenv", "changes an environment variable that the gates read"},
    {SymbolRule::forbid_use, "clearenv", "changes the environment that the gates read"},
    {SymbolRule::forbid_use, "environ", "writes the environment that the gates read"},
    {SymbolRule::forbid_use, "__environ", "writes the environment that the gates read"},
    // Writing on a descriptor the student did not open: descriptor 3 is the result channel, and a well-formed
    // line written there (a gate's end, a metric, the run's end before an _exit) would be taken as the gates'.
    // The channel is a socket, so it cannot be opened again by path (fopen("/dev/fd/3") fails); these are the
    // ways left to reach it. A step prints with printf or std::cout, which write to the console log.
    {SymbolRule::forbid_use, "write", "writes on a raw descriptor (descriptor 3 is the result channel)"},
    {SymbolRule::forbid_use, "__write*", "glibc's write: writes on a raw descriptor"},
    {SymbolRule::forbid_use, "writev", "writes on a raw descriptor (descriptor 3 is the result channel)"},
    {SymbolRule::forbid_use, "pwrite*", "writes on a raw descriptor"},
    {SymbolRule::forbid_use, "__pwrite64", "writes on a raw descriptor"},
    {SymbolRule::forbid_use, "__libc_pwrite", "writes on a raw descriptor"},
    {SymbolRule::forbid_use, "send", "sends on a raw descriptor (descriptor 3 is the result channel, a socket)"},
    {SymbolRule::forbid_use, "__send", "sends on a raw descriptor"},
    {SymbolRule::forbid_use, "sendto", "sends on a raw descriptor"},
    {SymbolRule::forbid_use, "sendmsg", "sends on a raw descriptor"},
    {SymbolRule::forbid_use, "sendmmsg", "sends on a raw descriptor"},
    {SymbolRule::forbid_use, "__sendmmsg", "sends on a raw descriptor"},
    {SymbolRule::forbid_use, "sendfile*", "copies data onto a raw descriptor"},
    {SymbolRule::forbid_use, "splice", "moves data onto a raw descriptor"},
    {SymbolRule::forbid_use, "vmsplice", "moves data onto a raw descriptor"},
    {SymbolRule::forbid_use, "tee", "copies data between raw descriptors"},
    {SymbolRule::forbid_use, "copy_file_range", "copies data onto a raw descriptor"},
    {SymbolRule::forbid_use, "aio_write*", "writes on a raw descriptor (asynchronous I/O)"},
    {SymbolRule::forbid_use, "lio_listio*", "writes on raw descriptors (asynchronous I/O)"},
    {SymbolRule::forbid_use, "dprintf", "prints on a raw descriptor"},
    {SymbolRule::forbid_use, "vdprintf", "prints on a raw descriptor"},
    {SymbolRule::forbid_use, "__dprintf_chk", "prints on a raw descriptor"},
    {SymbolRule::forbid_use, "__vdprintf_chk", "prints on a raw descriptor"},
    {SymbolRule::forbid_use, "fdopen", "wraps a raw descriptor in a FILE (descriptor 3 is the result channel)"},
    {SymbolRule::forbid_use, "_IO_fdopen", "glibc's fdopen: wraps a raw descriptor in a FILE"},
    {SymbolRule::forbid_use, "_IO_file_write", "glibc's FILE internals: writes on the FILE's descriptor"},
    {SymbolRule::forbid_use, "_IO_do_write", "glibc's FILE internals: writes on the FILE's descriptor"},
    {SymbolRule::forbid_use, "dup", "copies a raw descriptor (descriptor 3 is the result channel)"},
    {SymbolRule::forbid_use, "dup2", "copies a raw descriptor onto another (onto stdout, say)"},
    {SymbolRule::forbid_use, "__dup2", "glibc's dup2: copies a raw descriptor onto another"},
    {SymbolRule::forbid_use, "dup3", "copies a raw descriptor onto another"},
    {SymbolRule::forbid_use, "fcntl*", "changes or copies a raw descriptor (F_DUPFD)"},
    {SymbolRule::forbid_use, "__fcntl", "glibc's fcntl: changes or copies a raw descriptor"},
    {SymbolRule::forbid_use, "__libc_fcntl64", "glibc's fcntl: changes or copies a raw descriptor"},
    {SymbolRule::forbid_use, "pidfd_getfd", "copies another process's descriptor"},
    {SymbolRule::forbid_use_scope, "__gnu_cxx::stdio_filebuf", "a C++ stream on a raw descriptor"},
    {SymbolRule::forbid_use_scope, "__gnu_cxx::stdio_sync_filebuf", "a C++ stream on a C FILE's descriptor"},
    {SymbolRule::forbid_use_mangled, "_ZNSt12__basic_fileIcE8sys_open",
     "libstdc++'s file on a raw descriptor or a C FILE (what stdio_filebuf opens)"},
    {SymbolRule::forbid_use_mangled, "_ZNSt12__basic_fileIwE8sys_open",
     "libstdc++'s file on a raw descriptor or a C FILE (what stdio_filebuf opens)"},
    // The run's key waits in the channel until labkit reads it (labkit/channel_auth.h). read() takes it away,
    // which leaves every line of the run unsigned; recv() with MSG_PEEK would copy it and leave it there.
    {SymbolRule::forbid_use, "recv*", "receives from a socket (MSG_PEEK would copy the result channel's key)"},
    {SymbolRule::forbid_use, "__recv*", "glibc's recv: receives from a socket"},
    // Other processes: a second process escapes the gate's time limits and could outlive it.
    {SymbolRule::forbid_use, "fork", "starts another process"},
    {SymbolRule::forbid_use, "vfork", "starts another process"},
    {SymbolRule::forbid_use, "clone*", "starts another process or thread outside the C++ library"},
    {SymbolRule::forbid_use, "exec*", "replaces the gate binary by another program"},
    {SymbolRule::forbid_use, "fexecve", "replaces the gate binary by another program"},
    {SymbolRule::forbid_use, "posix_spawn*", "starts another program"},
    {SymbolRule::forbid_use, "system", "starts another program"},
    {SymbolRule::forbid_use, "popen", "starts another program"},
    // glibc's private names of what this table refuses under the public ones (__libc_fork, __libc_system,
    // __libc_sigaction...). The references use one: __libc_single_threaded, a flag libstdc++'s inline code reads.
    {SymbolRule::allow_use, "__libc_single_threaded", "read by libstdc++'s inline reference counting"},
    {SymbolRule::forbid_use, "__libc_*", "glibc's internal twin of a function this check refuses"},
    // The CUDA layers below the runtime: a way around the gates' checks of what ran and how long it took.
    {SymbolRule::forbid_use, "cupti*", "CUPTI: the gates' own view of the kernels that ran and their times"},
    {SymbolRule::forbid_use, "cuGetProcAddress*", "looks up CUDA driver functions by name (to replace them)"},
    {SymbolRule::forbid_use, "cudaGetDriverEntryPoint*", "looks up CUDA driver functions by name (to replace them)"},
    // The gates' own machinery.
    {SymbolRule::forbid_use_scope, "labkit::report", "the result channel to the grader"},
    {SymbolRule::forbid_use_scope, "labkit::detail", "the gates' internals"},
    {SymbolRule::forbid_use_scope, "labkit::gate", "the gates' verdicts, thresholds and seeds"},
    {SymbolRule::forbid_use_scope, "labkit::launches",
     "the gates' record of which kernels a step ran (a step that can ask whether it is watched can do other "
     "work when it is not)"},
    {SymbolRule::forbid_use_scope, "Catch", "the test framework that runs the gates"},
    // The gates' own answers: the CPU and GPU references a gate checks a step against, and the baselines a speed
    // gate times it against (a hand-written kernel in lab 03, 04 and 06: compiled into the gate binary, so the
    // launch recorder counts its kernels as the binary's own). A step that called one would pass its correctness
    // gate with a token kernel of its own beside it, and tie its speed gate.
    {SymbolRule::forbid_use_scope, "lab*::baseline", "the gates' baseline for the speed gates, not the student's code"},
    {SymbolRule::forbid_use_scope, "lab*_baseline", "the gates' baseline for the speed gates, not the student's code"},
    {SymbolRule::forbid_use_scope, "lab*_gates", "the gates' own code"},
    {SymbolRule::forbid_use_scope, "labkit::*_ref", "the gates' reference answer"},
    {SymbolRule::forbid_use_scope, "labkit::*_ref_at", "the gates' reference answer"},
    {SymbolRule::forbid_use_scope, "labkit::matmul_cpu_blocked", "the gates' reference answer (lab 01's CPU matmul)"},
    {SymbolRule::forbid_use_scope, "labkit::sorted_order_keys", "the gates' reference answer (a sort on the CPU)"},
    {SymbolRule::forbid_use_scope, "labkit::radix_sort_u32", "the gates' reference answer (a sort on the CPU)"},
    {SymbolRule::forbid_use_scope, "labkit::spmv_double", "the gates' reference answer (lab 07's CPU SpMV)"},
    {SymbolRule::forbid_use_scope, "labkit::norm2_device", "the gates' reference answer on the GPU (lab 05)"},
    {SymbolRule::forbid_use_scope, "labkit::saxpy_scan_device", "the gates' reference answer on the GPU (lab 05)"},
    // Its kernel, compiled into the binary, uses shared memory: called from a step, it would count as the step's own
    // kernel with shared memory (the rubric's needs_shared_memory).
    {SymbolRule::forbid_use_scope, "labkit::poison_shared_memory",
     "the gates' fill of shared memory before a call, not the student's kernel"},

    // Definitions the compilers make for every CUDA file.
    {SymbolRule::allow_generated, "__device_stub__", "nvcc: the host side of a kernel launch"},
    {SymbolRule::allow_generated, "__cudaRegister", "nvcc: registers the file's kernels with the runtime"},
    {SymbolRule::allow_generated, "__fatbinwrap", "nvcc: the file's device code"},
    {SymbolRule::allow_generated, "__nv_", "nvcc: module ids and helpers"},
    {SymbolRule::allow_generated, "_GLOBAL__sub_I_", "the C++ compiler: the file's static initialisers"},
    {SymbolRule::allow_generated, "__sti__", "nvcc: the file's static initialisers"},
    {SymbolRule::allow_generated, "DW.ref.", "the C++ compiler: references for exception handling"},
    {SymbolRule::allow_generated, "_GLOBAL__N_",
     "an anonymous namespace: nvcc gives it a name unique to the file, with external linkage"},
    // Template instantiations and inline functions of the headers a submission includes.
    {SymbolRule::allow_weak_scope, "std", "the C++ library's templates and inline functions"},
    {SymbolRule::allow_weak_scope, "__gnu_cxx", "the C++ library's templates"},
    {SymbolRule::allow_weak_scope, "__cxxabiv1", "the C++ library's type information"},
    {SymbolRule::allow_weak_scope, "thrust", "Thrust's templates"},
    {SymbolRule::allow_weak_scope, "cub", "CUB's templates"},
    {SymbolRule::allow_weak_scope, "cuda", "libcu++ (cuda::std) templates"},
    {SymbolRule::allow_weak_scope, "cooperative_groups", "CUDA's cooperative groups (inline)"},
    {SymbolRule::allow_weak_scope, "nvcuda", "CUDA's WMMA templates"},
    {SymbolRule::allow_weak_scope, "__nv_*", "nvcc: the wrappers of extended (__device__) lambdas"},
    {SymbolRule::allow_weak_scope, "labkit::NotImplemented", "labkit/check.h: the exception an unfinished step throws"},
    {SymbolRule::allow_weak_global_template, "cuda", "cuda_runtime.h's typed wrappers (cudaMalloc<T>...)"},
};

// Symbols nvcc or the C++ compiler define at global scope that carry no user name.
bool generated(const std::string& name) {
  for (const auto& r : kSymbolRules)
    if (r.kind == SymbolRule::allow_generated && starts_with(name, r.pattern)) return true;
  return false;
}

std::string unversioned(const std::string& name) {
  auto at = name.find('@');
  return at == std::string::npos ? name : name.substr(0, at);
}

// ---- reading mangled names (Itanium C++ ABI) ----------------------------------------------------------------
// Only as far as the leading scope names: that is all the rules need.
struct Reader {
  const std::string& s;
  std::size_t i;
  bool templated = false;  // the name has template arguments (an instantiation, or a member of one)
  bool more() const { return i < s.size(); }
  char peek(std::size_t k = 0) const { return i + k < s.size() ? s[i + k] : '\0'; }
  bool number(std::size_t* n) {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) return false;
    std::size_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) v = v * 10 + static_cast<std::size_t>(s[i++] - '0');
    *n = v;
    return true;
  }
  bool source_name(std::string* out) {
    std::size_t n = 0;
    if (!number(&n) || i + n > s.size()) return false;
    *out = s.substr(i, n);
    i += n;
    while (peek() == 'B') {  // ABI tags: B <length> <tag>
      ++i;
      std::size_t t = 0;
      if (!number(&t)) return false;
      i += t;
    }
    return true;
  }
  void skip_call_offset() {  // h <number> _  |  v <number> _ <number> _
    char k = s[i++];
    auto skip_num = [&] {
      if (peek() == 'n') ++i;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i;
      if (peek() == '_') ++i;
    };
    skip_num();
    if (k == 'v') skip_num();
  }
  // An operator's two-letter code (pl: operator+, eq: operator==...).
  void skip_operator() {
    if (std::islower(static_cast<unsigned char>(peek())) && std::islower(static_cast<unsigned char>(peek(1)))) i += 2;
  }
  // <name>: nested (N...E), std-abbreviated, unscoped, or local (Z...E).
  std::vector<std::string> name(bool* global_scope) {
    std::vector<std::string> parts;
    *global_scope = false;
    if (peek() == 'Z') {  // a local entity: the scope of its enclosing function
      ++i;
      return name(global_scope);
    }
    if (peek() == 'L') ++i;  // internal linkage
    if (peek() == 'N') {
      ++i;
      while (peek() == 'r' || peek() == 'V' || peek() == 'K') ++i;
      if (peek() == 'R' || peek() == 'O') ++i;
      while (more()) {
        if (peek() == 'S' && peek(1) == 't') {
          parts.push_back("std");
          i += 2;
        } else if (peek() == 'S' && std::string("abdios").find(peek(1)) != std::string::npos) {
          parts.push_back("std");
          return parts;
        } else if (std::isdigit(static_cast<unsigned char>(peek()))) {
          std::string n;
          if (!source_name(&n)) return {};
          parts.push_back(n);
        } else {
          skip_operator();
          templated = peek() == 'I';
          break;  // template arguments, constructors, operators, substitutions: the scope is known by now
        }
      }
      return parts;
    }
    if (peek() == 'S' && peek(1) == 't') {
      i += 2;
      std::string n;
      if (!source_name(&n)) skip_operator();
      templated = peek() == 'I';
      return {"std"};
    }
    if (peek() == 'S' && std::string("abdios").find(peek(1)) != std::string::npos) return {"std"};
    std::string n;
    if (!source_name(&n)) return {};
    *global_scope = true;
    templated = peek() == 'I';
    return {n};
  }
};

// The leading scope names of a mangled symbol (see top_level_name).
std::vector<std::string> scope_of(const std::string& mangled, bool* global_scope, bool* templated = nullptr) {
  *global_scope = false;
  if (templated) *templated = false;
  if (!starts_with(mangled, "_Z")) return {};
  Reader r{mangled, 2};
  struct Report {  // whatever way the parse ends
    Reader& r;
    bool* out;
    ~Report() {
      if (out) *out = r.templated;
    }
  } report{r, templated};
  if (r.peek() == 'T') {
    char k = r.peek(1);
    if (k == 'V' || k == 'I' || k == 'S' || k == 'T' || k == 'W' || k == 'H' || k == 'C') {
      r.i += 2;  // vtable, typeinfo, typeinfo name, VTT, TLS wrapper/init, construction vtable: of a type
    } else if (k == 'h' || k == 'v') {
      r.i += 1;
      r.skip_call_offset();  // thunks: the function they lead to
    } else if (k == 'c') {
      r.i += 2;
      r.skip_call_offset();
      r.skip_call_offset();
    } else {
      return {};
    }
  } else if (r.peek() == 'G' && (r.peek(1) == 'V' || r.peek(1) == 'R')) {
    r.i += 2;  // guard variable, reference temporary: of a variable
  } else if (r.peek() == 'G' && r.peek(1) == 'T') {
    r.i += 3;  // transaction clones
  }
  return r.name(global_scope);
}

// _Z <source-name> I ...: an unscoped template instantiation.
bool is_template_instance(const std::string& mangled) {
  Reader r{mangled, 2};
  std::string n;
  return r.source_name(&n) && r.peek() == 'I';
}

// Each name of `scope` a shell pattern for the name at its place ("lab*::baseline", "labkit::*_ref", "__nv_*").
bool in_scope(const std::vector<std::string>& parts, const std::string& scope) {
  auto want = split(scope, ':');
  want.erase(std::remove(want.begin(), want.end(), std::string()), want.end());
  if (want.empty() || want.size() > parts.size()) return false;
  return std::equal(want.begin(), want.end(), parts.begin(), [](const std::string& pattern, const std::string& name) {
    return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
  });
}

bool matches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*') return starts_with(name, pattern.substr(0, pattern.size() - 1));
  return name == pattern;
}

}  // namespace

bool ObjSymbol::defined() const { return type != 'U' && type != 'w' && type != 'v'; }
bool ObjSymbol::global() const {
  // Upper case: global; u: unique global; i: indirect function (GNU ifunc, global in an object).
  return std::isupper(static_cast<unsigned char>(type)) || type == 'u' || type == 'i' || type == 'w' || type == 'v';
}
bool ObjSymbol::weak() const { return type == 'W' || type == 'V' || type == 'w' || type == 'v' || type == 'u'; }

std::vector<ObjSymbol> parse_nm_posix(const std::string& text) {
  std::vector<ObjSymbol> out;
  for (const auto& line : split_lines(text)) {
    auto fields = split(trim(line), ' ');
    if (fields.size() < 2 || fields[1].size() != 1) continue;
    if (ends_with(fields[0], ":")) continue;  // "file.o:" headers of archives
    out.push_back({fields[0], fields[1][0]});
  }
  return out;
}

std::string top_level_name(const std::string& mangled, bool* is_global_scope) {
  bool global = false;
  auto parts = scope_of(mangled, &global);
  if (is_global_scope) *is_global_scope = global;
  return parts.empty() ? "" : parts.front();
}

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : name;
}

std::vector<ObjFinding> check_symbols(const std::vector<ObjSymbol>& symbols, const ObjPolicy& policy) {
  std::vector<ObjFinding> out;
  std::set<std::string> names;
  for (const auto& s : symbols) names.insert(s.name);
  // A kernel declared at global scope has a host stub of its own name next to its __device_stub__.
  auto kernel_stub = [&](const std::string& mangled) {
    for (const auto& n : names)
      if (contains(n, "__device_stub__" + mangled.substr(1))) return true;
    return false;
  };
  const std::string lab = policy.lab_namespace;
  for (const auto& s : symbols) {
    if (s.type == 'i') {  // before the global test: an ifunc is refused whatever its name and scope
      out.push_back({demangle(unversioned(s.name)),
                     "an indirect function (ifunc): its resolver runs while the program is loaded, before the gates' "
                     "start-up"});
      continue;
    }
    if (!s.global()) continue;
    const std::string name = unversioned(s.name);
    bool global_scope = false, templated = false;
    const auto scope = scope_of(name, &global_scope, &templated);
    const std::string shown = demangle(name);
    if (!s.defined()) {
      bool allowed_use = false;
      for (const auto& r : kSymbolRules)
        allowed_use = allowed_use || (r.kind == SymbolRule::allow_use && r.pattern == name);
      if (allowed_use) continue;
      for (const auto& r : kSymbolRules) {
        bool hit = (r.kind == SymbolRule::forbid_use && scope.empty() && matches(r.pattern, name)) ||
                   (r.kind == SymbolRule::forbid_use_mangled && starts_with(name, r.pattern)) ||
                   (r.kind == SymbolRule::forbid_use_scope && in_scope(scope, r.pattern));
        if (hit) {
          out.push_back({shown, std::string("uses `") + r.pattern + "`: " + r.reason});
          break;
        }
      }
      continue;
    }
    if (generated(name) || (!scope.empty() && generated(scope.front()))) continue;
    if (!scope.empty() && scope.front() == lab && !global_scope) continue;
    if (global_scope && kernel_stub(name)) continue;
    if (global_scope && s.weak() && is_template_instance(name) && !policy.shared_exports.count(name)) {
      bool ok = false;
      for (const auto& r : kSymbolRules)
        ok = ok || (r.kind == SymbolRule::allow_weak_global_template && starts_with(scope.front(), r.pattern));
      if (ok) continue;
    }
    // A header-only class that the table refuses to use (a stream on a raw descriptor) is instantiated into the
    // object itself: its weak definitions are its use.
    const SymbolRule* forbidden_scope = nullptr;
    for (const auto& r : kSymbolRules)
      if (r.kind == SymbolRule::forbid_use_scope && s.weak() && !global_scope && in_scope(scope, r.pattern))
        forbidden_scope = &r;
    if (forbidden_scope) {
      out.push_back({shown, std::string("uses `") + forbidden_scope->pattern + "`: " + forbidden_scope->reason});
      continue;
    }
    if (s.weak() && !scope.empty() && !global_scope) {
      const SymbolRule* allowed = nullptr;
      for (const auto& r : kSymbolRules)
        if (r.kind == SymbolRule::allow_weak_scope && in_scope(scope, r.pattern)) allowed = &r;
      // A library function that is also instantiated from the headers (std::string's operator+) is accepted when
      // it is a template: its body comes from the same headers. A non-template function of the library is
      // defined in the library, so an object that defines it does so on purpose.
      // A template instance that a shared library also exports (libstdc++'s explicit instantiations) is accepted
      // only where the gates' own objects and static libraries define it too: they are linked first, so their copy
      // is the process's. Otherwise the object's copy would be the one the gates and the library call, and an
      // explicit specialisation (a body of the student's own under the library's name) would replace it.
      if (allowed && templated && policy.shared_exports.count(name) && policy.gate_defines_known &&
          !policy.gate_defines.count(name)) {
        out.push_back({shown, "defines a C++ library function that a shared library of the gate binary exports and "
                              "the gates' code does not define itself: the gates would call this copy (an explicit "
                              "specialisation replaces the library's code; symbol interposition)"});
        continue;
      }
      if (allowed && (!policy.shared_exports.count(name) || templated)) continue;
      if (allowed) {
        out.push_back({shown, "defines a function that a shared library of the gate binary exports: it would "
                              "replace the library's for the gates too (symbol interposition)"});
        continue;
      }
    }
    std::string why;
    if (scope.empty())
      why = "defines the C symbol `" + name + "`" +
            (policy.shared_exports.count(name) ? ", which a library of the gate binary (C library, CUDA runtime, "
                                                 "cuBLAS...) also defines: it would replace it for the gates too"
                                               : ": a C name outside namespace " + lab +
                                                     " can replace a library's function for the gates too") +
            " (symbol interposition)";
    else if (global_scope)
      why = "defines a global-scope name: put helpers in namespace " + lab +
            ", in an anonymous namespace or make them static (a global name can replace one the gates use)";
    else if (scope.front() == "labkit" || scope.front() == "Catch")
      why = "defines a symbol of the gates' own code (" + scope.front() + "::): it would replace theirs";
    else if (scope.front() == "std" || scope.front() == "__gnu_cxx")
      why = "defines (not weakly instantiates) a C++ library symbol: it would replace libstdc++'s";
    else
      why = "defines a symbol outside namespace " + lab + " (" + scope.front() +
            "::): only the lab's interface and code generated for it may be defined";
    out.push_back({shown, why});
  }
  return out;
}

std::vector<ObjFinding> find_raw_syscalls(const std::string& objdump_text) {
  // objdump -d lines: "0000000000000000 <name>:" starts a function; instructions follow as
  // "   4:\t0f 05                \tsyscall".
  static const std::regex function(R"(^[0-9a-f]+ <(.+)>:$)");
  static const std::regex raw(R"(\t(syscall|sysenter|int\s+\$0x80)\b)");
  std::vector<ObjFinding> out;
  std::string current;
  for (const auto& line : split_lines(objdump_text)) {
    std::smatch m;
    // Cheap tests first: a Thrust object disassembles to hundreds of thousands of lines.
    if (ends_with(line, ">:") && std::regex_match(line, m, function)) {
      current = m[1].str();
      continue;
    }
    if ((contains(line, "sys") || contains(line, "int")) && std::regex_search(line, m, raw)) {
      std::string instr = m[1].str();
      const std::string where = demangle(current);
      bool seen = std::any_of(out.begin(), out.end(), [&](const ObjFinding& f) { return f.symbol == where; });
      if (!seen)
        out.push_back({where, "contains a raw `" + instr +
                                  "` instruction: a system call that no symbol shows (inline assembly)"});
    }
  }
  return out;
}

std::vector<ObjFinding> find_hidden_syscalls(const std::string& objdump_text) {
  // objdump -d: "   4:\t0f 05                \tsyscall"; an instruction longer than 7 bytes goes on with a line of
  // bytes and no mnemonic ("   b:\t00 00 "). The bytes of each function in order, and where its instructions start.
  static const std::regex function(R"(^[0-9a-f]+ <(.+)>:$)");
  std::vector<ObjFinding> out;
  std::string current;
  std::vector<unsigned char> bytes;
  std::vector<bool> starts;
  auto scan = [&] {
    for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
      const unsigned a = bytes[i], b = bytes[i + 1];
      const bool pair = (a == 0x0f && (b == 0x05 || b == 0x34)) || (a == 0xcd && b == 0x80);
      if (!pair || starts[i]) continue;  // a decoded syscall is find_raw_syscalls' (refused)
      const char* kind = a == 0x0f ? (b == 0x05 ? "syscall" : "sysenter") : "int $0x80";
      out.push_back({demangle(current), "holds the bytes of a system-call instruction (" + std::string(kind) +
                                            ") inside another instruction, " + std::to_string(i) +
                                            " bytes in: a jump into them runs a system call that the disassembly "
                                            "does not show, or it is a constant that happens to hold them"});
      break;  // one note per function
    }
    bytes.clear();
    starts.clear();
  };
  for (const auto& line : split_lines(objdump_text)) {
    std::smatch m;
    if (ends_with(line, ">:") && std::regex_match(line, m, function)) {
      scan();
      current = m[1].str();
      continue;
    }
    // By hand, not by regex: a Thrust object disassembles to hundreds of thousands of lines.
    const std::size_t colon = line.find(":\t");
    if (current.empty() || colon == std::string::npos) continue;
    const auto nibble = [](char c) {  // objdump writes lower-case hex; -1 for anything else
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    std::size_t k = colon + 2, first = bytes.size();
    while (k + 1 < line.size() && nibble(line[k]) >= 0 && nibble(line[k + 1]) >= 0 &&
           (k + 2 == line.size() || line[k + 2] == ' ' || line[k + 2] == '\t')) {
      bytes.push_back(static_cast<unsigned char>(nibble(line[k]) * 16 + nibble(line[k + 1])));
      starts.push_back(false);
      k += 3;
    }
    // The instruction's mnemonic follows its bytes after a tab; a line of bytes alone continues the one before.
    const std::size_t tab = line.find('\t', colon + 2);
    if (bytes.size() > first && tab != std::string::npos &&
        line.find_first_not_of(" \t", tab) != std::string::npos)
      starts[first] = true;
  }
  scan();
  return out;
}

std::vector<ObjFinding> find_early_code(const std::string& objdump_headers) {
  // objdump -h: "  5 .init_array.00101 00000008  0000000000000000 ..." (index, name, size, ...).
  static const std::regex section(R"(^\s*\d+\s+(\S+)\s)");
  // .init and .fini are spliced into the program's _init/_fini (before every constructor); .fini_array and
  // .dtors run after the gates' end. Only a plain .init_array (static initialisers) is allowed.
  static const std::regex early(
      R"(^(\.preinit_array.*|\.init_array\..+|\.ctors.*|\.dtors.*|\.init|\.fini|\.fini_array.*)$)");
  std::vector<ObjFinding> out;
  for (const auto& line : split_lines(objdump_headers)) {
    std::smatch m;
    if (!std::regex_search(line, m, section)) continue;
    const std::string name = m[1].str();
    if (std::regex_match(name, early))
      out.push_back({name, "code that runs before the gates' start-up or after their end (a pre-initialiser, a "
                           "constructor with a priority, .init/.fini code, a destructor function): a plain static "
                           "initialiser runs after the start-up and is allowed"});
  }
  return out;
}

std::vector<ObjFinding> find_library_headers(const std::string& depfile_text, const std::set<std::string>& allowed) {
  std::vector<ObjFinding> out;
  // Thrust's algorithms run CUB's kernels: a gate that allows Thrust allows CUB.
  struct Library {
    const char* name;
    bool allowed;
    bool seen = false;
  } libraries[] = {{"thrust", allowed.count("thrust") > 0},
                   {"cub", allowed.count("thrust") > 0 || allowed.count("cub") > 0}};
  // Make's syntax: "obj.o : src.cu \" then one path per line (paths with spaces escaped). A header of the library
  // lies below an include directory: .../include/cccl/thrust/sort.h (CUDA 13), .../include/cub/cub.cuh; the
  // student's own paths (a submission folder named "thrust") do not count.
  std::string text = replace_all(depfile_text, "\\\n", " ");
  for (const auto& word : split(replace_all(text, "\n", " "), ' ')) {
    if (word.empty() || ends_with(word, ":")) continue;
    for (auto& lib : libraries) {
      const std::string dir = std::string(lib.name) + "/";
      if (lib.allowed || lib.seen || !(contains(word, "/include/" + dir) || contains(word, "/include/cccl/" + dir)))
        continue;
      lib.seen = true;
      out.push_back({word, "includes " + labkit::launches::library_title(lib.name) +
                               ", whose kernels would do this step's work: the step's gates allow no such library "
                               "(their kernels compile into your object under any name, so the grader goes by the "
                               "headers)"});
    }
  }
  return out;
}

std::string describe_refusal(const std::string& source, const std::vector<ObjFinding>& findings,
                             std::size_t max_items) {
  std::string msg = "refused: student/" + source +
                    " defines or uses symbols that a submission may not (the gates share its process, so these "
                    "could change their verdict):";
  for (std::size_t k = 0; k < findings.size() && k < max_items; ++k)
    msg += "\n  " + findings[k].symbol + ": " + findings[k].reason;
  if (findings.size() > max_items) msg += "\n  ... and " + std::to_string(findings.size() - max_items) + " more";
  return msg;
}

namespace {
// `nm <flags> -P` of each file once, up to `jobs` at a time: the names `keep` accepts, versions stripped. A file
// whose symbols cannot be read would let a student object redefine or outlive what it holds unseen: the batch stops
// instead.
std::map<std::string, std::set<std::string>> nm_each(const std::vector<std::string>& files, const std::string& nm,
                                                     int jobs, const std::vector<std::string>& flags,
                                                     const std::string& verb, bool (*keep)(const ObjSymbol&)) {
  const std::set<std::string> unique(files.begin(), files.end());
  const std::vector<std::string> list(unique.begin(), unique.end());
  std::vector<std::set<std::string>> names(list.size());
  for_each_concurrently(list.size(), jobs, [&](std::size_t i) {
    std::vector<std::string> argv = {nm};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-P", list[i]});
    auto r = run_command(argv, 120);
    if (r.exit_code != 0)
      throw UserError("cannot read the symbols " + list[i] + " " + verb +
                      ", which the check of student objects needs (" +
                      (r.timed_out ? "nm took longer than 120 s" : "nm: " + trim_message(r.output, 3, 400)) + ")");
    for (const auto& s : parse_nm_posix(r.output))
      if (keep(s)) names[i].insert(unversioned(s.name));
  });
  std::map<std::string, std::set<std::string>> out;
  for (std::size_t i = 0; i < list.size(); ++i) out[list[i]] = std::move(names[i]);
  return out;
}
}  // namespace

std::map<std::string, std::set<std::string>> exported_symbols_each(const std::vector<std::string>& shared_libraries,
                                                                   const std::string& nm, int jobs) {
  return nm_each(shared_libraries, nm, jobs, {"-D", "--defined-only"}, "exports",
                 [](const ObjSymbol&) { return true; });
}

std::map<std::string, std::set<std::string>> defined_symbols_each(const std::vector<std::string>& files,
                                                                  const std::string& nm, int jobs) {
  return nm_each(files, nm, jobs, {"--defined-only"}, "defines",
                 [](const ObjSymbol& s) { return s.defined() && s.global(); });
}

}  // namespace labgrade
