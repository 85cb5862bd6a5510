// The classification of launched kernels (labkit/launches.h) and the rubric's allow_libraries, on the CPU. The
// names below are real: device-side names as CUPTI reports them, taken from nvcc 13 output (CCCL 3.0) and from
// cuBLAS kernels seen in profiles.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <stdexcept>

#include "labkit/launches.h"
#include "labkit/rubric.h"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::Equals;
using labkit::launches::Kernel;
using labkit::launches::Symbols;

namespace {
const std::string kOnesweep =
    "_ZN3cub17CUB_300001_SM_9006detail10radix_sort29DeviceRadixSortOnesweepKernelINS1_5radix10policy_hubIfNS0_"
    "8NullTypeEyE10Policy1000ELNS0_9SortOrderE0EfS6_yiiNS1_21identity_decomposer_tEEEvPT5_SC_PT3_PKSD_PT1_PKSH_PT2_"
    "PKSL_T4_iiT6_";
const std::string kThrustAgent = "_ZN6thrust23THRUST_300001_SM_900_NS8cuda_cub4core13_kernel_agentIiEEvT_";
// A student's template kernel instantiated with a Thrust functor: its own name is not in thrust::.
const std::string kStudentWithThrustArg = "_Z9my_kernelIN6thrust23THRUST_300001_SM_900_NS4plusIfEEEvPfT_";
const std::string kCublasGemm =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__"
    "5x_cublas";
const std::string kTuned = "_Z19matmul_tuned_kernelILi32ELi1ELi8ELb1EEviiiPKfS1_Pf";
}  // namespace

extern "C" void labkit_test_launches_marker() {}

TEST_CASE("kernels of CUB and Thrust are told apart by their own namespace", "[cpu][launches]") {
  using labkit::launches::header_library;
  CHECK(header_library(kOnesweep) == "cub");
  CHECK(header_library(kThrustAgent) == "thrust");
  CHECK(header_library(kStudentWithThrustArg).empty());
  CHECK(header_library(kCublasGemm).empty());
  CHECK(header_library(kTuned).empty());
  // A kernel in an anonymous namespace: "(anonymous namespace)" is not a parameter list.
  CHECK(header_library("_ZN36_GLOBAL__N__7042aeff_4_s_cu_a51554e49anon_tmplILi4EEEvPf").empty());
  CHECK(header_library("_ZN3cub12_GLOBAL__N_16KernelEv") == "cub");
  // CCCL's THRUST_CUB_WRAPPED_NAMESPACE puts both libraries inside another namespace (the lab's, say).
  CHECK(header_library("_ZN5lab043cub6detail6KernelEv") == "cub");
  CHECK(header_library("_ZN5lab046thrust4impl6KernelEv") == "thrust");
  // A namespace whose name only ends in "cub" is not CUB.
  CHECK(header_library("_ZN6my_cub6kernelEv").empty());
}

TEST_CASE("demangle leaves extern \"C\" names alone", "[cpu][launches]") {
  using labkit::launches::demangle;
  CHECK(demangle("f") == "f");  // __cxa_demangle alone would say "float"
  CHECK(demangle(kCublasGemm) == kCublasGemm);
  CHECK(demangle("_Z12plain_kernelPf") == "plain_kernel(float*)");
}

TEST_CASE("the library that made a launch is named by its file", "[cpu][launches]") {
  using labkit::launches::library_of_file;
  CHECK(library_of_file("/usr/local/cuda/lib64/libcublasLt.so.13") == "cublas");
  CHECK(library_of_file("/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13.0.2.14") == "cublas");
  CHECK(library_of_file("libcusparse.so.12") == "cusparse");
  CHECK(library_of_file("/usr/lib/x86_64-linux-gnu/libnccl.so.2") == "nccl");
  CHECK(library_of_file("/usr/local/cuda/lib64/libcudart.so.13").empty());
  CHECK(library_of_file("/home/s/build/lab01_gates_student").empty());
  CHECK(library_of_file("/home/libcublas.so.d/lab01_gates_student").empty());  // only the file name counts
}

TEST_CASE("own symbols match the device names of static and anonymous-namespace kernels", "[cpu][launches]") {
  // Host stubs as nm shows them; device names as CUPTI reports them (no `L` for internal linkage).
  const Symbols own({"_ZL13static_kernelPf", "_ZN36_GLOBAL__N__7042aeff_4_s_cu_a51554e4L9anon_tmplILi4EEEvPf",
                     "c_kernel", kTuned});
  CHECK(own.contains("_Z13static_kernelPf"));
  CHECK(own.contains("_ZN36_GLOBAL__N__7042aeff_4_s_cu_a51554e49anon_tmplILi4EEEvPf"));
  CHECK(own.contains("c_kernel"));
  CHECK(own.contains(kTuned));
  CHECK_FALSE(own.contains(kCublasGemm));
  CHECK_FALSE(own.contains("_Z13static_kernelPd"));  // another overload is another kernel
}

TEST_CASE("the running binary's own function symbols are read from its ELF file", "[cpu][launches]") {
  const Symbols& own = labkit::launches::own_symbols();
  CHECK(own.size() > 100);
  CHECK(own.contains("labkit_test_launches_marker"));
  CHECK(own.contains("_ZN6labkit8launches8demangleERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"));
  CHECK_FALSE(own.contains(kCublasGemm));
  CHECK_FALSE(own.contains("cublasSgemm_v2"));  // called by labkit (a reference), defined in libcublas: not own
  CHECK_THROWS_WITH(labkit::launches::read_function_symbols("/nonexistent/gates"), ContainsSubstring("cannot open"));
  CHECK_THROWS_WITH(labkit::launches::read_function_symbols("/proc/self/status"), ContainsSubstring("ELF"));
}

TEST_CASE("each kernel is classified: own, cub, thrust, the library that launched it, or unknown", "[cpu][launches]") {
  using labkit::launches::classify;
  const Symbols own({kTuned, kStudentWithThrustArg, kOnesweep});
  CHECK(classify({kTuned, ""}, own).own());
  CHECK(classify({kStudentWithThrustArg, ""}, own).own());
  // A CUB kernel is compiled into the student's object, so its host stub is in the binary: the name decides.
  CHECK(classify({kOnesweep, ""}, own).library == "cub");
  CHECK(classify({kThrustAgent, ""}, own).library == "thrust");
  CHECK(classify({kCublasGemm, "cublas"}, own).library == "cublas");
  // Launched from cuBLAS even if the binary defines a function of the same name (a student trying to pass it off).
  CHECK(classify({kCublasGemm, "cublas"}, Symbols({kCublasGemm})).library == "cublas");
  // Not compiled into the binary and no launch seen from a library (a kernel node of a captured graph).
  CHECK(classify({kCublasGemm, ""}, own).library == "library");
}

TEST_CASE("with a code check, a name is not enough: a function of that name must be the code that ran",
          "[cpu][launches]") {
  using labkit::launches::classify;
  using labkit::launches::Kernel;
  // Two functions demangle to static_kernel(float*) (internal linkage in two files): the second is the kernel that
  // ran, with 32 registers and 1024 bytes of static shared memory.
  int a = 0, b = 0;
  std::vector<const void*> asked;
  const Symbols own({{"_ZL13static_kernelPf", &a}, {"_Z13static_kernelPf", &b}, {"host_named_like_a_kernel", &a}},
                    [&](const void* address, const Kernel& ran) {
                      asked.push_back(address);
                      return address == &b && ran.registers == 32 && ran.static_shared == 1024;
                    });
  const Kernel ran{"_Z13static_kernelPf", "", 1024, 32, 1024};
  CHECK(own.compiled_here(ran));
  CHECK(classify(ran, own).own());
  CHECK(asked.size() >= 2);  // both functions of the name were candidates
  Kernel other = ran;
  other.registers = 40;  // compiled elsewhere under the same name
  CHECK_FALSE(own.compiled_here(other));
  CHECK(classify(other, own).library == "library");
  // A host function that carries a kernel's name is in the symbol table, but the check says it is no kernel.
  const Kernel named{"host_named_like_a_kernel", "", 0, 64, 0};
  CHECK(own.contains(named.name));
  CHECK(classify(named, own).library == "library");
  CHECK_THAT(labkit::launches::refusal("step 5", {named}, {}, own),
             ContainsSubstring("a function of that name is compiled into the binary, but it is not a kernel with the "
                               "code that ran: 64 registers"));
  // A record without the code's figures (registers -1): the name decides, as without a check.
  CHECK(own.compiled_here({"host_named_like_a_kernel", ""}));
  CHECK_FALSE(own.compiled_here({"_Z5otherv", ""}));
  // Without a check (names only), the name decides.
  CHECK(Symbols({"host_named_like_a_kernel"}).compiled_here(named));
}

TEST_CASE("a step is refused for a library kernel its rubric entry does not allow", "[cpu][launches]") {
  using labkit::launches::refusal;
  const Symbols own({kTuned});
  const std::vector<std::string> none;
  CHECK(refusal("step 5 (tuned)", {{kTuned, ""}}, none, own).empty());
  CHECK(refusal("step 5 (tuned)", {}, none, own).empty());
  CHECK_THAT(refusal("step 5 (tuned)", {{kTuned, ""}, {kCublasGemm, "cublas"}}, none, own),
             Equals("step 5 (tuned) ran a kernel of cuBLAS (" + kCublasGemm + "): this step must be your own kernel"));
  CHECK(refusal("step 0 (cuBLAS)", {{kCublasGemm, "cublas"}}, {"cublas"}, own).empty());
  CHECK_THAT(refusal("step 5 (fused)", {{kOnesweep, ""}}, none, own),
             ContainsSubstring("ran a kernel of CUB (void cub::CUB_300001_SM_900::detail::radix_sort::"
                               "DeviceRadixSortOnesweepKernel<"));
  // Thrust runs CUB's kernels: allowing thrust allows them; allowing cub does not allow Thrust's own agents.
  CHECK(refusal("step 2 (functor)", {{kOnesweep, ""}, {kThrustAgent, ""}}, {"thrust"}, own).empty());
  CHECK_THAT(refusal("step 2", {{kThrustAgent, ""}}, {"cub"}, own),
             ContainsSubstring("ran a kernel of Thrust") && ContainsSubstring("(it may use CUB)"));
  // cuBLAS is not Thrust, and cuSPARSE is not cuBLAS.
  CHECK_THAT(refusal("step 2", {{kCublasGemm, "cublas"}}, {"thrust"}, own), ContainsSubstring("cuBLAS"));
  CHECK_THAT(refusal("step 4", {{kCublasGemm, "cublas"}}, {"cusparse"}, own), ContainsSubstring("cuBLAS"));
  // A foreign kernel of unknown origin: refused in a hand-written step, accepted in a library step.
  CHECK_THAT(refusal("step 5 (tuned)", {{kCublasGemm, ""}}, none, own),
             ContainsSubstring("a library (not compiled from your source)"));
  CHECK(refusal("step 0 (cuBLAS)", {{kCublasGemm, ""}}, {"cublas"}, own).empty());
  CHECK_FALSE(refusal("step 2", {{kCublasGemm, ""}}, {"thrust"}, own).empty());
  // NCCL's kernels (launched from libnccl): only where the gate allows nccl, and nccl is no licence for foreign
  // kernels of unknown origin or for cuBLAS.
  const std::string kAllReduce = "_Z36ncclDevKernel_AllReduce_Sum_f64_RING_LL24ncclDevKernelArgsStorageILm4096EE";
  CHECK(refusal("step 2 (all-gather)", {{kTuned, ""}, {kAllReduce, "nccl"}}, {"nccl"}, own).empty());
  CHECK_THAT(refusal("step 2 (all-gather)", {{kAllReduce, "nccl"}}, none, own), ContainsSubstring("a kernel of NCCL"));
  CHECK_FALSE(refusal("step 2 (all-gather)", {{kAllReduce, ""}}, {"nccl"}, own).empty());
  CHECK_THAT(refusal("step 2 (all-gather)", {{kCublasGemm, "cublas"}}, {"nccl"}, own), ContainsSubstring("cuBLAS"));
}

TEST_CASE("allow_libraries: parsed per gate, misspelt names refused", "[cpu][launches][rubric]") {
  const auto r = labkit::parse_rubric(R"(
lab = "01"
[[gate]]
id = "step0.correct"
allow_libraries = ["cublas"]
[[gate]]
id = "step5.correct"
)",
                                      "t.toml");
  REQUIRE(r.find("step0.correct"));
  CHECK(r.find("step0.correct")->allow_libraries == std::vector<std::string>{"cublas"});
  CHECK(r.find("step5.correct")->allow_libraries.empty());
  CHECK_THROWS_WITH(labkit::parse_rubric("lab = \"01\"\n[[gate]]\nid = \"a\"\nallow_libraries = [\"cuBLAS\"]\n", "t"),
                    ContainsSubstring("unknown library `cuBLAS`"));
  CHECK_THROWS_WITH(labkit::parse_rubric("lab = \"01\"\n[[gate]]\nid = \"a\"\nallow_libraries = [3]\n", "t"),
                    ContainsSubstring("takes strings"));
}

// The labs' rubrics say which steps may call which library; a hand-written step allows none.
TEST_CASE("the labs' rubrics allow libraries only in the library steps", "[cpu][launches][rubric]") {
  const auto allowed = [](const char* rubric, const char* gate) {
    const auto r = labkit::load_rubric(std::string("../../labs/") + rubric + "/rubric.toml");
    const auto* g = r.find(gate);
    if (!g) throw std::runtime_error(std::string(rubric) + " has no gate " + gate);
    return g->allow_libraries;
  };
  using V = std::vector<std::string>;
  CHECK(allowed("01_matmul", "step0.correct") == V{"cublas"});
  for (const char* g : {"step1.correct", "step5f.correct", "step5f.speed"}) CHECK(allowed("01_matmul", g).empty());
  CHECK(allowed("05_thrust_saxpy", "step1.correct").empty());
  CHECK(allowed("05_thrust_saxpy", "step1.speed").empty());
  for (const char* g : {"step2.correct", "step2.speed", "step3.correct", "step3.speed", "step5a.correct",
                        "step5b.correct", "step5b.speed", "step6.correct", "step7.correct"})
    CHECK(allowed("05_thrust_saxpy", g) == V{"thrust"});
  CHECK(allowed("05_thrust_saxpy", "step4.correct") == V{"cublas"});
  CHECK(allowed("05_thrust_saxpy", "step4.speed") == V{"cublas"});
  CHECK(allowed("06_ata", "step1.correct") == V{"cublas"});
  CHECK(allowed("06_ata", "step1.syrk_correct") == V{"cublas"});
  for (const char* g : {"step2.correct", "step7a.correct", "step7b.speed"}) CHECK(allowed("06_ata", g).empty());
  for (const char* lab : {"02_transpose", "03_access_patterns", "04_bitonic_sort", "07_cg"})
    for (const auto& g : labkit::load_rubric(std::string("../../labs/") + lab + "/rubric.toml").gates)
      CHECK(g.allow_libraries.empty());  // no step of these labs is about a library
}
