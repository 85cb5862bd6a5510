// Which kernels a student's step actually ran, and whether each was compiled from the student's source.
//
// A step that the lab says is a kernel of the student's own must not earn points for work done by cuBLAS,
// cuSPARSE, Thrust or CUB. The gates wrap each call of a step in a scope (labkit::gate::own_kernels below) that
// records every kernel that ran during the call and refuses the step when one of them came from a library the
// gate's rubric entry does not list in `allow_libraries`.
//
// How a kernel is classified (classify()):
//   - its demangled name lies in the cub:: or thrust:: namespace -> library "cub" / "thrust". CUB and Thrust are
//     header-only: their kernels are compiled into the student's own object, so only the name tells them apart.
//   - it was launched while a frame of libcublas / libcublasLt / libcusparse / libnccl was on the launching
//     thread's stack -> library "cublas" / "cusparse" / "nccl" (the library called the launch API).
//   - its mangled name is not a function symbol of the gate binary (every __global__ function compiled into the
//     binary has a host stub of the same mangled name) -> a library kernel of unknown origin ("library"), e.g. a
//     cuBLAS kernel replayed from a CUDA graph the student captured. Never allowed.
//   - a name is not enough: no function of that name in the binary is a kernel the CUDA runtime registered with the
//     registers and static shared memory the device ran -> "library" too. A host function can carry
//     any symbol name (an assembler label, internal linkage: nothing the grader's object check sees), and one named
//     after the cuBLAS kernel a graph replays made that kernel pass as the student's (planted fixture
//     `library_in_graph`: 150/150 on an H100 before this check).
//   - otherwise -> the binary's own. That includes kernels of the gate itself (labkit's poison fills, a baseline
//     kernel compiled into a gate): the gates launch those outside the scope, and a student step that managed to
//     call one would gain nothing the gate does not already check (fills do no work a step could claim; library
//     baselines are caught by the rules above).
//
// Why the activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) decides which kernels ran: a record is written for
// every kernel the device executes, whatever launched it (<<<>>>, cudaLaunchKernelEx, cuLaunchKernel(Ex), a
// cooperative launch, a kernel node of a CUDA graph, a library's internal launch). Launch-API callbacks alone
// miss the kernels inside a graph launched as a whole. The callbacks on the launch APIs are used only to learn
// which library made a launch (the records carry no caller); they are matched to records by correlation id.
//
// Cost: recording is on only inside a scope. The gates open scopes around the correctness calls and, in the speed
// gates, around every timed call or two of them (labkit::TimedCase::record), where the recorder runs without its
// launch callbacks: those cost the launching thread host time (a backtrace per launch, 6-24 us more per launch on an
// H100 against 0.3-0.7 us without them), which a step could measure to tell the checked calls from the others.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "labkit/timing.h"

namespace labkit {
class SlotBatch;  // slot_batch.h
}

namespace labkit::launches {

// One kernel that ran inside a scope.
struct Kernel {
  std::string name;           // as CUPTI reports it: the mangled name (extern "C" kernels: the plain name)
  std::string launched_from;  // library whose code made the launch call ("cublas", "cusparse", "nccl"), "" if none
  // Static plus dynamic shared memory of the launch, in bytes: a kernel without any cannot race in shared memory,
  // so the grader's racecheck can leave out a gate whose own kernels all had none (labkit::gate::own_kernels).
  std::int64_t shared_bytes = 0;
  // The launched code as the device ran it (-1: not recorded): registers per thread and static shared memory,
  // compared with the binary's own function of the same name (Symbols::compiled_here).
  int registers = -1;
  std::int64_t static_shared = -1;
  // The launch's grid and block (0: not recorded). Lab 07's reductions must launch the grid their blocks_per_sm
  // argument asks for: the gates compare the grid that ran with it.
  long long blocks = 0;  // gridDim.x * gridDim.y * gridDim.z
  int threads = 0;       // blockDim.x * blockDim.y * blockDim.z
};

// The functions defined in a binary (its ELF .symtab, or .dynsym when stripped), compared by demangled name: the
// host stub of a kernel with internal linkage (static, anonymous namespace) is mangled with an `L` that the
// device-side name, which CUPTI reports, lacks (_ZL13static_kernelPf on the host, _Z13static_kernelPf on the
// device); both demangle to static_kernel(float*).
class Symbols {
 public:
  // Whether the function at `address` (a function of the binary) is the code of the kernel that ran.
  using CodeCheck = std::function<bool(const void* address, const Kernel& ran)>;
  Symbols() = default;
  explicit Symbols(const std::vector<std::string>& mangled_names);
  // Names with each function's address in the running process, and the check of the code there (own_symbols():
  // the CUDA runtime's attributes of the kernel registered at that address).
  Symbols(const std::vector<std::pair<std::string, const void*>>& functions, CodeCheck check);
  bool contains(const std::string& mangled_name) const;
  // Whether `ran` is code compiled into the binary: a function of its name passes the code check (without one,
  // or for a kernel whose code was not recorded, the name alone decides).
  bool compiled_here(const Kernel& ran) const;
  std::size_t size() const { return names_.size(); }

 private:
  std::unordered_set<std::string> names_;
  std::unordered_multimap<std::string, const void*> addresses_;  // demangled name -> address
  CodeCheck check_;
};
// A function symbol of an ELF file: its (mangled) name and value (its address before the file is loaded).
struct FunctionSymbol {
  std::string name;
  std::uint64_t value = 0;
};
// Reads the defined function symbols of an ELF file (.symtab, local ones too; .dynsym when stripped); throws
// std::runtime_error naming the file if it cannot.
std::vector<FunctionSymbol> read_functions(const std::string& elf_path);
Symbols read_function_symbols(const std::string& elf_path);
// Whether the function at `address` is a kernel the CUDA runtime registered (the host stub of a __global__ function
// compiled into the binary) with the registers and static shared memory of the kernel that ran.
bool registered_kernel_matches(const void* address, const Kernel& ran);
// The running binary's own functions (read once from /proc/self/exe), each checked with registered_kernel_matches.
const Symbols& own_symbols();

// abi::__cxa_demangle for names that start with _Z; any other name unchanged (extern "C" kernels).
std::string demangle(const std::string& mangled);
// "cub" or "thrust" when the kernel's own qualified name (not its template arguments) lies in that namespace.
std::string header_library(const std::string& mangled);
// "cublas" for libcublas.so*/libcublasLt.so*, "cusparse" for libcusparse.so*, "nccl" for libnccl.so*, "" otherwise
// (a path or a file name).
std::string library_of_file(std::string_view path);

struct Origin {
  std::string library;  // "" = compiled into the binary; else cub, thrust, cublas, cusparse, nccl or "library"
  bool own() const { return library.empty(); }
};
Origin classify(const Kernel& k, const Symbols& own);

// The first kernel that the step may not run, as a message for the gate's failure; "" when every kernel is
// allowed. `allowed` holds rubric names (cublas, cusparse, cub, thrust, nccl); "cublas" also covers cuBLASLt, "thrust"
// also covers CUB (Thrust's algorithms run CUB's kernels). A step that allows cublas or cusparse also accepts a
// kernel of unknown library origin (see refusal() in launches.cpp).
//   step 5 (tuned) ran a kernel of cuBLAS (sm90_xmma_gemm_f32f32_...): this step must be your own kernel
std::string refusal(std::string_view step, const std::vector<Kernel>& ran, const std::vector<std::string>& allowed,
                    const Symbols& own);

// The display name of a rubric library name ("cublas" -> "cuBLAS").
std::string library_title(std::string_view library);

// Records the kernels that run between construction and stop() (or destruction). One at a time per process.
// available() is false where CUPTI cannot start (no device, a profiler or compute-sanitizer already holds the
// tools interface); reason() says why.
class Recorder {
 public:
  // Which library launched a kernel (Kernel::launched_from) comes from callbacks on the launch APIs, which cost
  // the launching thread host time per launch: a backtrace, tens of microseconds under a deep stack. Without them
  // (names_only) a library's kernel is still refused, as one "not compiled from your source" (classify()), and only
  // a step allowed cuBLAS or cuSPARSE would accept one of the other library; launches cost little more than
  // unrecorded ones. The speed gates' recorder, on through every timed call, records so.
  enum class Attribution { by_launch_callbacks, names_only };
  explicit Recorder(Attribution attribution = Attribution::by_launch_callbacks);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  ~Recorder();
  // Waits for the device, delivers the records and stops recording; returns the kernels in the order they ran.
  std::vector<Kernel> stop();
  // Waits for the current device and returns the kernels recorded since the start or the last take(), in the order
  // they ran, and records on: a speed gate's recorder stays on through all its timed calls and takes each call's
  // kernels apart (gate::record_timed_calls). Kernels still running on another device must have been waited for.
  std::vector<Kernel> take();
  bool available() const { return available_; }
  const std::string& reason() const { return reason_; }
  // True while a recorder records (a scope inside another one does not start a second).
  static bool active();

 private:
  bool available_ = false, stopped_ = false;
  std::string reason_;
};

}  // namespace labkit::launches

namespace labkit::gate {
// Runs `call` (one call of a student's step) with the launch recorder on, then fails the current gate when a
// kernel ran that the step may not use: the rubric entry of the current gate lists the libraries it allows
// (allow_libraries). `step` names the step in the message ("step 5 (tuned)"). Waits for the device after the
// call. Exceptions of `call` (NotImplemented, invalid_argument) pass through unchanged.
// Where CUPTI cannot record (compute-sanitizer, ncu or nsys already hold it): under LABKIT_SANITIZER, or in a run by
// hand without a result channel, the check is left out with one console line; in a graded run the gate fails with
// CUPTI's reason (a check that silently switches off is no check).
// It also reports the metric `shared_memory_kernels`: how many distinct kernels compiled into the binary (not a
// library's) that use shared memory the current gate's scopes have seen so far. The grader's default racecheck,
// which checks only shared memory, leaves out a correctness gate that reported 0 (labgrade's sanitizers.cpp).
void own_kernels(std::string_view step, const std::function<void()>& call);
// own_kernels that also returns the kernels the call ran, in order, for a gate that checks how they were launched
// (lab 07: the grid of a reduction against its blocks_per_sm). Empty where nothing was recorded: the check left out
// (see above), or the call made inside a scope that already records.
std::vector<launches::Kernel> own_kernels_ran(std::string_view step, const std::function<void()>& call);
// Within the current gate, the recorded calls of `function` (a label up to its first ')', RecordedWork in gate.h)
// may run no kernel: a step function whose work is copies (lab 08's distribute_rows uploads each part's rows). The
// gate's other functions must still run kernels, and the gate as a whole at least one.
void allow_copies_only(std::string_view function);

// For a speed gate: sets tc.record to the launch recorder with own_kernels' rules, tc.recorded to `which` (see
// labkit::TimedCase: every call, with one recorder on through all of compare_speed, or two calls), under two_calls
// tc.recorded_round to a round the gate's secret picks, and tc.verified_round to another (gate::pick_timed_round),
// whose counted call verify() checks besides the last. The timed calls' recorder has no launch callbacks (their host
// cost per launch is what a step could time), so a library's kernel is refused as one "not compiled from your
// source", under its own name; compare_speed's L2 scrub is left out. The checked calls count toward the gate's
// "ran no kernel" check like own_kernels' scopes; their kernels are not reported for the grader's memory and race
// checks, which run only the correctness gates.
void record_timed_calls(TimedCase& tc, std::string step, const TimingOptions& opt, RecordedCalls which);

// A gate's batch of a step's small calls (labkit::SlotBatch, slot_batch.h): `call(k)` makes call k on batch.in(k)
// and batch.out(k); all of them run inside one own_kernels scope named `step`, are checked against `source`
// (SlotBatch::matches) and, under repeat_runs(), run a second time and compared bit for bit. Returns "" when the
// batch is right, else the gate's message (SlotBatch::failure(what)); the caller decides whether to check every
// case on its own first, for a message that names the case.
std::string batch_failure(SlotBatch& batch, std::string_view step, const std::string& what,
                          const std::function<void(int k)>& call,
                          const std::function<long long(int k, std::size_t j)>& source);
// A gate's batch of small cases and its fallback (labs 01 and 04): `batch()` makes the calls together and returns ""
// or what it found; then the gate passes a check named `what` + " in one batch". On a finding, and on an exception
// other than NotImplemented (the step is not written: passed on, for the gate's status) or a sticky CUDA error
// (nothing can run after it: the gate fails saying how to find the case), `each()` checks every case on buffers of
// its own, whose failure names the case and the likely mistake; when they all pass, the gate fails with the batch's
// finding. `what` names the step and the cases ("step 3 (...), 19 shapes"), `layout` how the batch holds them.
void require_batch(const std::string& what, const std::string& layout, const std::function<std::string()>& batch,
                   const std::function<void()>& each);
}  // namespace labkit::gate
