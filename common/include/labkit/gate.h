// Helpers for writing gates with Catch2. Every GPU gate starts with LABKIT_REQUIRE_GPU().
#pragma once
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "labkit/compare.h"
#include "labkit/device.h"
#include "labkit/rubric.h"
#include "labkit/timing.h"

// ---- Every gate body runs through labkit ----------------------------------------------------------------------
// TEST_CASE is redefined here (after Catch2's own definition, which the include guard then keeps out) so that the
// gate binary knows whether each gate's body returned or was left by an exception. Catch2 swallows its own
// "a check already failed" and "skipped" exceptions without a word, trusting that the failure or the skip was
// recorded when they were thrown; code of the student's in the same process can throw an object that only carries
// one of those type names (libstdc++ matches exception types by name), leave the gate with nothing recorded, and
// the gate would count as passed. gates_main.cpp fails a gate whose body was left that way, and a gate that did not
// come through this macro at all (a gate file that does not include labkit/gate.h).
namespace labkit::gate::detail {
void body_started();
void body_returned();
struct BodyRuns {
  int started = 0, returned = 0;
};
// The current gate's count of body runs (reset when a gate starts); read by the result channel's listener.
BodyRuns& body_runs();
// The current gate's launch-recorder scopes (labkit::gate::own_kernels, launches.h) that ran to their end, and the
// kernels of any origin they saw (reset when a gate starts). A gate whose step ran in the recorder and never ran a
// single kernel fails (gates_main.cpp): its answers came from host code and copies, not from the GPU work the step
// is about. So does a gate in which one of the functions it records ran none, while another did: a gate that checks
// two functions of a step (lab 05's count_nonfinite beside saxpy_device_vector) would otherwise pass one written as
// a host loop. A scope's function is its label up to the first ')' ("step 6 (count_nonfinite)" of
// "step 6 (count_nonfinite), n = 9"), or the whole label.
struct RecordedWork {
  int scopes = 0;
  long kernels = 0;
  long own_shared_memory_kernels = 0;  // launches of kernels compiled into the binary that had shared memory
  std::string step;  // as the gate named it in its last scope
  struct Function {
    int scopes = 0;
    long kernels = 0;
  };
  std::map<std::string, Function> functions;  // by function_of(label)
  std::set<std::string> copies_only;           // functions whose calls may run no kernel (allow_copies_only)
};
RecordedWork& recorded_work();
// A scope label's function (see RecordedWork).
std::string function_of(std::string_view label);
}  // namespace labkit::gate::detail

#define LABKIT_GATE_CAT2(a, b) a##b
#define LABKIT_GATE_CAT(a, b) LABKIT_GATE_CAT2(a, b)
#define LABKIT_GATE_CASE(Body, Entry, Registrar, ...)                                                         \
  static void Body();                                                                                         \
  static void Entry() {                                                                                       \
    ::labkit::gate::detail::body_started();                                                                   \
    Body();                                                                                                   \
    ::labkit::gate::detail::body_returned();                                                                  \
  }                                                                                                           \
  namespace {                                                                                                 \
  const ::Catch::AutoReg Registrar(::Catch::makeTestInvoker(&Entry), CATCH_INTERNAL_LINEINFO,                 \
                                   ::Catch::StringRef(), ::Catch::NameAndTags{__VA_ARGS__});                  \
  }                                                                                                           \
  static void Body()
#undef TEST_CASE
#define TEST_CASE(...)                                                                                        \
  LABKIT_GATE_CASE(LABKIT_GATE_CAT(labkit_gate_body_, __LINE__), LABKIT_GATE_CAT(labkit_gate_entry_, __LINE__), \
                   LABKIT_GATE_CAT(labkit_gate_registrar_, __LINE__), __VA_ARGS__)

#define LABKIT_REQUIRE_GPU()                                             \
  do {                                                                   \
    if (!::labkit::has_device()) SKIP(::labkit::no_device_reason());     \
  } while (0)

namespace labkit::gate {

// ---- Seeds ------------------------------------------------------------------------------------------------------
// Every gate input comes from seed(label) = derive_seed(base_seed() mixed with secret(), label):
//  - base_seed(): Catch2's --rng-seed (random each run unless given), printed in run_start and in every hint;
//  - secret(): a per-run value that the gates' source does not determine: std::random_device at start-up, or
//    `--labkit-secret X` to repeat a run. Without it a student could compute a fixed --rng-seed's inputs from the
//    public gate source ahead of time and tune to them (special-case the values, hard-code the answers).
// A run is reproduced by both values together, which every failure message prints:
//   reproduce: build/ci/labs/01_matmul/lab01_gates_student "step3.correct" --rng-seed 1234 --labkit-secret 5678
// --rng-seed alone, as before, still fixes the run's base seed, but the inputs differ unless the secret is given.
// The secret is not hidden from code in the same process (the student's object could call secret()): it stops
// tuning to the inputs ahead of time, not a step that inspects its inputs at run time (fresh inputs per timed
// call and the verification after timing handle that).
std::uint64_t seed(std::string_view label);
std::uint64_t base_seed();
std::uint64_t secret();
// The pure mixing behind seed(), for tests: the same (base, secret, label) always gives the same seed.
std::uint64_t mix_seed(std::uint64_t base, std::uint64_t secret, std::string_view label);
namespace detail {
// Set once by the gate binary's main() from --labkit-secret; otherwise secret() draws one on first use.
void set_secret(std::uint64_t secret);
}  // namespace detail
// "reproduce: <binary> "step3.correct" --rng-seed 1234 --labkit-secret 5678"
std::string reproduce_hint();

// For a speed gate: sets tc.verified_round to a round below opt.min_repeats that the gate's secret picks (not
// tc.recorded_round when the recorder watches two calls), so compare_speed verifies the candidate's counted call in a
// round a step cannot predict as well as the last one (see labkit::TimedCase). record_timed_calls (launches.h) calls
// it.
void pick_timed_round(TimedCase& tc, const TimingOptions& opt);
namespace detail {
// The label that the draws of one timed case (its verified, late and recorded rounds) are seeded with: the gate's
// name and how many timed cases it has drawn for so far. One lab's gates run in one process: a step that saw which
// round was verified in one gate (a verification takes milliseconds the step can see between its calls) would
// otherwise know the rounds of every later gate, and of a gate's second timing (labs 07 and 08 time two run lengths).
std::string next_timed_case_label();
void pick_timed_round(TimedCase& tc, const TimingOptions& opt, const std::string& label);
}  // namespace detail

// The rubric this binary was started with (--labkit-rubric, or the lab's own rubric.toml).
const Rubric& rubric();
// The speed threshold of a gate (the current gate by default). Fails the gate if the rubric has none.
double threshold(std::string gate_id = "");

// Fails the current gate with the verdict's diagnosis (and how to reproduce it) unless it is ok.
void require(const Verdict& verdict, std::string_view context);

// Speed gate epilogue: reports baseline/candidate times, the figures of merit (work / time, e.g. GFLOP/s when
// work is in GFLOP), the ratio and the escaped-work wait (metrics baseline_ms, candidate_ms, baseline_rate,
// candidate_rate, ratio, escaped_ms), then fails the gate, in this order, when
//  1. cmp.escaped: work still ran after the timed call returned (launched on a stream the timer does not see);
//  2. the ratio is above the gate's max_ratio: beyond what the hardware allows (replayed results, hidden work);
//  3. the ratio is below threshold(gate).
// The failure message names both figures, the threshold, the ceiling, the reference's ratio and the rubric's hint.
void require_speedup(const SpeedComparison& cmp, std::string_view baseline_name, std::string_view candidate_name,
                     double work, std::string_view work_unit);

// The verdict of require_speedup as a pure function (tested without a GPU): "" when the gate passes, otherwise
// the first line of its failure (one of the three reasons above).
std::string speed_problem(const SpeedComparison& cmp, double threshold, std::optional<double> max_ratio,
                          std::string_view baseline_name, std::string_view candidate_name);

// Information only, for speed gates that replaced "step N vs step N-1" by "step N vs a trusted baseline": times
// the previous step against the same baseline (a few calls, inputs refreshed as in the graded comparison), reports
// the metric previous_ratio and prints how many times faster the candidate is. Never decides the verdict: a
// previous step that is missing, throws or is wrong just leaves the metric out (its own gates grade it); a sticky
// CUDA error still ends the gate.
void report_previous_ratio(const SpeedComparison& candidate, const std::function<void(int)>& baseline,
                           const std::function<void(int)>& previous, const std::function<void(int)>& refresh,
                           std::string_view candidate_name, std::string_view previous_name,
                           std::string_view baseline_name);

// ---- Under compute-sanitizer ------------------------------------------------------------------------------------
// Instrumented kernels run 10-1000x slower (racecheck on shared-memory kernels the slowest: a 2048^3 tiled matmul
// takes many minutes), so under a sanitizer the correctness gates leave out their largest cases; the small and odd
// ones (1, primes, non-multiples of every tile, edge tiles) already reach every bound and every barrier. A normal
// run is unaffected. `labgrade --sanitize` sets LABKIT_SANITIZER=<tool> for the gate process; by hand:
//   LABKIT_SANITIZER=1 compute-sanitizer --tool racecheck build/gpu/labs/01_matmul/lab01_gates_student "step3.correct"

// True when the environment variable LABKIT_SANITIZER is set to a non-empty value other than "0".
bool under_sanitizer();
// The tool the gate runs under ("memcheck", "racecheck"; what LABKIT_SANITIZER says), "" when none: for a gate
// whose cost under one tool differs from the other's.
std::string sanitizer_tool();
// Whether a case past 2^32 elements (its arrays labkit::HugeDeviceArray ranges) is left out: under a sanitizer (2^32
// elements under memcheck take far too long), or where the driver cannot map such a range, which a console line
// names with `ctx`.
bool huge_case_left_out(std::string_view ctx);

// The grader's default memory and race checks (every graded run, labgrade's check_with_sanitizers) also set
// LABKIT_SANITIZER_SMALL=1: then every SanitizerCap is kSmallShapesDivisor times smaller. `labgrade --sanitize`
// does not set it and keeps every case up to the full cap.
inline constexpr double kSmallShapesDivisor = 16;
bool sanitizer_small_shapes();
// True when the default checks' racecheck runs the gate (LABKIT_SANITIZER=racecheck with LABKIT_SANITIZER_SMALL):
// the most expensive check of all, paid on every graded submission. Measured on an H100 (2026-11-24): it is bound
// by the GPU's instrumented work, not by one host core (four racecheck processes at once take as long as one after
// the other), so the only way to make it cheaper is to give it less to check.
bool default_racecheck();
// False under any sanitizer: a gate's second identical run exists only for the run-to-run comparison (a race that
// changes the answer), whose verdict the grader throws away under a sanitizer, and the first run already put every
// access in front of the tool. Gates write `if (labkit::gate::repeat_runs()) again = run(...)`.
bool repeat_runs();

// One per gate run: which cases the gate leaves out under a sanitizer, and the one console line that says so,
// printed when the object goes out of scope if anything was left out:
//   [sanitizer] under compute-sanitizer (LABKIT_SANITIZER=racecheck): left out M=2048 N=2048 K=2048 (above 2^26
//   multiply-adds; the small and odd cases check bounds and races)
// Use:
//   labkit::gate::SanitizerCap cap(double(1 << 26), "multiply-adds");
//   for (const Shape& s : kShapes)
//     if (!cap.skips(double(s.M) * s.N * s.K, str(s))) check_shape(step, s);
// racecheck's cost grows with every shared-memory access (about a million a second on an H100, where memcheck's
// barely shows), so a lab whose kernels live in shared memory can give the default checks' racecheck a cap of its
// own, `race_cap`, instead of cap / kSmallShapesDivisor: the cases that still put every barrier of a block to work
// (a race is between the threads of one block; more blocks add time, not coverage). `labgrade --sanitize` keeps
// the full cap for both tools. Likewise `small_cap`, the default checks' cap for the other tool (memcheck) instead of
// cap / kSmallShapesDivisor: for a gate whose kernels are launched many times per case (a sorting network's one
// launch per step), where memcheck pays per launch and the larger cases only add launches of the same kernels.
class SanitizerCap {
 public:
  SanitizerCap(double cap, std::string unit, double race_cap = 0, double small_cap = 0);
  SanitizerCap(const SanitizerCap&) = delete;
  SanitizerCap& operator=(const SanitizerCap&) = delete;
  ~SanitizerCap();
  // Always false without a sanitizer; under one, true (and `name` remembered) when work > cap.
  bool skips(double work, std::string_view name);
  // The same, and under the default checks' racecheck also true for a case that is not `race_checked`: one whose
  // blocks meet the same barriers as a case racecheck runs (other pointer offsets or sizes, say), left to memcheck,
  // which still runs it and checks what differs. A case above the cap is named as such first.
  bool skips(double work, std::string_view name, bool race_checked);
  // True (and `name` remembered) only under the default checks' racecheck, for such a case without a work figure.
  // `labgrade --sanitize` runs it under both tools.
  bool skips_racecheck(std::string_view name);
  // The line printed at the end ("" when nothing was left out).
  std::string summary() const;

 private:
  double cap_;
  std::string unit_;
  std::vector<std::string> left_out_;
  std::vector<std::string> left_to_memcheck_;
};

}  // namespace labkit::gate
