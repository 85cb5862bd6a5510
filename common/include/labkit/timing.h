// Timing with CUDA events: warm-up, then repeats until both a minimum count and a time budget are reached, and
// the median reported. compare_speed() times a baseline and a candidate in the same process, interleaving them
// so that clock or thermal drift affects both alike, and reports the ratio (> 1: the candidate is faster).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace labkit {

struct TimingOptions {
  int warmup = 2;
  int min_repeats = 5;
  int max_repeats = 200;
  double budget_ms = 300;  // stop after this much measured time once min_repeats are done
};

struct TimingStats {
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0;
  int repeats = 0;
};

// fn(rep) enqueues the work on the default stream; rep counts from 0 so that fn can rotate among input sets.
TimingStats time_gpu(const std::function<void(int)>& fn, const TimingOptions& opt = {});

struct SpeedComparison {
  TimingStats baseline, candidate;
  double ratio = 0;  // baseline median / candidate median
  // Work of the candidate still running on the device after its stop event (launched on a stream the events do
  // not see): the median, over the timed calls, of how long a device-wide synchronization waited after the stop
  // event had completed. `escaped` is set when that is too long to be launch latency (gate::require_speedup fails).
  double escaped_ms = 0;
  bool escaped = false;
  // Why the candidate's time is not its plain median (limit_fixed_cost), shown with a failed threshold; "" if it is.
  std::string note;
  // Under RecordedCalls::two_calls: the faster of the two recorded candidate calls, in ms (0: none). Its own event
  // interval, like a counted call's, so it should match the median but for the recorder's cost per kernel; a step
  // that runs its own kernels only when recorded and a faster library otherwise shows here as a recorded call well
  // slower than its median (gate::require_speedup reports the quotient, the class report lists the outliers).
  double recorded_ms = 0;
  // Rounds timed beyond the usual count because a median was stalled (stalled_median): 0 on a quiet machine.
  int stall_rounds = 0;
  // A median still stalled when the timing ended (after the extra rounds): the calls' times say more about the
  // machine than about the step, and a failed verdict is worth a rerun (the gate says so; the class report lists it).
  bool stalled = false;
  // Device memory the candidate's counted calls kept: free device memory (cudaMemGetInfo, the current device) just
  // before each call's start event minus just after its escaped-work wait, summed over the calls measured; and in
  // how many of them less was free afterwards. A step that allocates per call and never frees (a cudaMalloc without
  // its cudaFree, a graph instantiated per call) keeps memory in every call; see keeps_device_memory.
  long long kept_bytes = 0;
  int kept_calls = 0, kept_measured = 0;
};

// Whether the candidate kept device memory call after call: in more than half of the measured calls (at least
// three) less was free after the call than before, kKeptBytesLimit or more in all. One allocation kept for good (a
// cache, a workspace made in the first call, a kernel module loaded late, a memory pool that keeps what was freed)
// shows in one call, not in most; in a speed turn no other process of the grader runs on the GPU. A pure function.
inline constexpr long long kKeptBytesLimit = 16ll << 20;
bool keeps_device_memory(const SpeedComparison& cmp);

// A timed case that cannot be replayed or hidden from the timer (issue: speed gates a student cannot game):
//  - refresh(rep): untimed, before every timed call (the baseline's and the candidate's): gives the inputs fresh
//    contents and resets the output, so that a cache keyed on pointers, sizes or sampled values misses, and the
//    timed call does not read inputs still warm in L2 from the refresh;
//  - verify(): untimed, checks the output of the candidate call just made (or, with keep and restore, the one
//    restored) against a trusted result; it fails the gate itself (gate::require). compare_speed calls it for the
//    candidate's counted call in round `verified_round`, for the late round's, and for the last call. A step that
//    skips its work on some calls (an answer kept from an earlier call, or none) is caught with a chance of at
//    least its skip rate at the first, which it cannot tell from the other counted calls, and needs luck at the
//    last too. Its messages name the call with verified_call().
// Both are required; a gate that leaves refresh empty says why in a comment.
//  - record (optional; every gate whose step may run only its own kernels sets it, with
//    gate::record_timed_calls): makes a CallRecorder, the launch recorder with gate::own_kernels' rules. check()
//    fails the gate when the candidate call since the last drop() ran a library kernel. Which calls it watches is
//    `recorded`:
//      every_call: one recorder on from before the first call of compare_speed to after the last, baseline and
//        warm-up included; every candidate call is checked and counted. Every call pays the recorder's cost alike,
//        so a step cannot tell a checked call from another, nor run a library on the calls it believes unchecked.
//        That cost is CUPTI's, on the device: 1.1 us a kernel on an H100 (labkit_tests, "the speed gates' recorder
//        costs the device about a microsecond a kernel"), and short calls moved by more than their kernels account
//        for (a 0.17 ms transpose lost 3.5 %): a few per cent of a call of short kernels, and more for the side with
//        more kernels (lab 04's step 1 baseline, 300 kernels a sort, would raise step 3's ratio to it by 7 %). Gates
//        whose calls are long against it use this.
//      two_calls: the candidate is recorded in one timed round, `recorded_round` (< min_repeats, from the gate's
//        secret), and in one extra call after the timed rounds; neither counts in the medians. The other calls pay
//        nothing, and a recorded one costs about 0.5 us more per launch on the host (no launch callbacks: see
//        launches::Recorder::Attribution) plus the device's cost per kernel, which a step that timed its own
//        kernels could still tell apart. Gates of short calls, or of steps whose libraries are refused before
//        they link (lab 04's Thrust and CUB), use this.
//  - verified_round (< min_repeats; -1: none): the round whose counted candidate call is verified before the last.
//    The gate derives it from its secret (gate::pick_timed_round; record_timed_calls does it too), apart from the
//    recorded round under two_calls: a step that told the recorded calls from the others and worked only there
//    fails it.
class CallRecorder {
 public:
  virtual ~CallRecorder() = default;  // stops recording
  virtual void drop() = 0;            // waits for the device and forgets the kernels recorded so far
  virtual void check() = 0;           // the kernels since the last drop() are a candidate call's: checks them
};
enum class RecordedCalls { every_call, two_calls };
struct TimedCase {
  std::function<void(int rep)> refresh;
  std::function<void()> verify;
  std::function<std::unique_ptr<CallRecorder>()> record;
  RecordedCalls recorded = RecordedCalls::two_calls;
  int recorded_round = 0;  // two_calls only
  int verified_round = -1;
  // Nonzero: a draw from the gate's secret (gate::pick_timed_round) for one more verified round, past the first
  // min_repeats (past verified_round and recorded_round). compare_speed places it once those rounds show how many
  // more the budget allows: anywhere among them, each as likely. A step knows how many calls the gates make (short
  // calls always run max_repeats rounds) and could work honestly in the first rounds and the last call only,
  // skimping in all the others, which decide the median; this round finds it with a chance of its skip rate.
  std::uint64_t late_draw = 0;
  // Optional; every lab's speed gates set them (through KeptCalls). keep(slot) copies what verify() reads of the
  // candidate call just made (its output, the inputs it could have written, the gate's note of which call it was)
  // into slot `slot` (0 .. kKeptSlots - 1); restore(slot) puts it back. With both set, compare_speed keeps every
  // counted candidate call alike, the picked ones in slots of their own, and runs verify() on those after the timed
  // calls, in call order: a check takes milliseconds of host time, and between two calls a step that timed the gaps
  // between its own calls would see it, then skimp on every call after the late verified round (see
  // docs/instructor-guide.md, "replayed results"). A copy of the same bytes after every call shows nothing. Without
  // them, verify() runs right after the picked call.
  std::function<void(int slot)> keep, restore;
};

// The picked calls of one comparison are at most three (verified_round's, the late round's, one of the rounds a
// stalled median adds), and the call being kept needs a slot that holds none of them.
inline constexpr int kKeptSlots = 4;

// keep/restore for a TimedCase from the regions verify() reads: device regions (on the current device) copied on
// the device, host objects (trivially copyable: counters, scalars a call returned) copied on the host. Every slot is
// allocated by attach(), before the timing, so that no call pays for an allocation the others do not.
class KeptCalls {
 public:
  KeptCalls() = default;
  ~KeptCalls();
  KeptCalls(const KeptCalls&) = delete;
  KeptCalls& operator=(const KeptCalls&) = delete;
  KeptCalls& device_bytes(void* p, std::size_t bytes);
  template <class T>
  KeptCalls& device(T* p, std::size_t count) {
    return device_bytes(static_cast<void*>(p), count * sizeof(T));
  }
  KeptCalls& host_bytes(void* p, std::size_t bytes);
  template <class T>
  KeptCalls& host(T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "KeptCalls::host copies the object's bytes");
    return host_bytes(static_cast<void*>(&value), sizeof(T));
  }
  // Allocates kKeptSlots slots and sets tc.keep and tc.restore, which use this object (it must outlive the timing).
  // Where the slots would take more than half of the GPU's memory, it says so on stderr and leaves them unset:
  // verify() then runs between the calls, as without them. Returns whether they were set. Where they would fit
  // but the process holds too much device memory, it throws: the step's memory must not turn the copies off.
  bool attach(TimedCase& tc);
  // The same for a TimedCase that outlives the scope that made it (a function returning it): tc's keep and restore
  // hold `kept`.
  static bool attach(const std::shared_ptr<KeptCalls>& kept, TimedCase& tc);

 private:
  struct Region {
    void* p;
    std::size_t bytes;
  };
  void keep(int slot);
  void restore(int slot);
  std::vector<Region> device_, host_;
  std::size_t device_total_ = 0, host_total_ = 0;
  bool attached_ = false;
  std::vector<void*> device_slots_;
  std::vector<std::vector<unsigned char>> host_slots_;
};

// While compare_speed runs verify(): which call it checks, for the gate's messages ("the last timed call", or
// "timed call 7, one the gate's secret picked among the timed calls"); "the last timed call" otherwise.
std::string verified_call();
//
// The synchronizations after each scrub and after each call (the escaped-work wait) cover every device the process
// has a context on, so that work a step leaves running on a second GPU (lab 08's, or any a worker with several
// GPUs makes visible) is charged like work on a private stream.
// The order of one round: refresh(k); evict_l2(); synchronize; baseline(k) timed; refresh(k+1); (a recorded call:
// drop()); evict_l2(); synchronize; candidate(k+1) timed; then the wait for escaped work, (check()), keep(slot) of
// the counted calls where the gate set it and, without it, in round `verified_round` and in the late round late_draw
// picks, verify(). With keep, the picked calls and the last are restored and verified after the last call, in call
// order. k counts every call from 0 (warm-up included), so a gate can derive the inputs of call k from k, and the
// call each verify() checks is always the candidate's (under two_calls, the last is the extra recorded call).
SpeedComparison compare_speed(const std::function<void(int)>& baseline, const std::function<void(int)>& candidate,
                              const TimedCase& timed_case, const TimingOptions& opt = {});
// Deprecated: no fresh inputs, no verification, no escaped-work check (labs 04, 06, 07 until they move over).
SpeedComparison compare_speed(const std::function<void(int)>& baseline, const std::function<void(int)>& candidate,
                              const TimingOptions& opt = {});

// The time per unit of work from two comparisons that differ only in the amount of work (CG iterations in labs 07
// and 08): (longer - shorter) / units for both medians, which cancels the fixed cost of a call (uploads, set-up).
// The ratio is recomputed from those; repeats are the fewer of the two; work hidden from the timer in either run is
// hidden from the difference too, so `escaped` carries over.
// Kept device memory (kept_bytes, kept_calls, kept_measured) adds up over the two.
SpeedComparison per_unit_difference(const SpeedComparison& shorter, const SpeedComparison& longer, double units);

// Bounds what a per-unit difference credits to calls that get slower the fewer units they are asked for. A solver
// that stalls when max_iter is small (a sleep of (64 - max_iter) ms, say) makes the shorter run slow and the
// difference small, so its iterations look fast; only the calls' fixed cost gives it away. A candidate call may cost
// up to `allowance_ms` beyond its units (set-up, allocations, a final residual); what the difference implies beyond
// that counts as time of the units: the candidate's time per unit becomes at least
// (longer candidate median - allowance_ms) / longer_units, the ratio follows, and `note` says so. A pure function.
SpeedComparison limit_fixed_cost(SpeedComparison per_unit, const SpeedComparison& longer, double longer_units,
                                 double allowance_ms);

// The escaped-work bound, a pure function so that it is tested without a GPU: a median wait above
// max(0.25 * candidate median, 0.2 ms) after the stop event is work the timer did not see. See timing.cpp.
double escaped_limit_ms(double candidate_median_ms);
// Work a candidate call left running past its stop event is its own time, not a gift below the escaped-work bound:
// each call's wait beyond the idle round trip (the median wait after the baseline's calls, which leave nothing
// behind) is added to that call's time before the medians are taken. A healthy step waits as long as the baseline
// does and keeps its time; a descheduled wait now and then moves a single call, not the median.
void charge_escaped_tail(std::vector<double>& candidate_ms, const std::vector<double>& escaped_ms, double idle_ms);
// Whether the median of a side's call times `ms` sits more than 10 % above their lower quartile (the fastest call
// when there are four or fewer): half of the calls or more were slowed by something outside them. The quartile and
// not the fastest call, since the fastest of many calls keeps falling as calls are added: lab 08's speed gates, whose
// short solves are mostly a pageable transfer of 80 MB (25-38 ms, drifting), ended `stalled` in 9 of 15 gate runs
// of about 57 rounds on a quiet pair of H200s (and 1 of 6 with 15 rounds), each after six extra rounds for nothing. On a machine that grades on several GPUs at once, a call that
// allocates (cudaMalloc, cudaMallocHost: a solver's work vectors) waits for the driver's locks while another
// worker's processes create contexts or pin memory: 11-57 ms more on a 49 ms CG call in one of every few calls on
// two H200s, while calls that allocate nothing kept their time (session 36). Three calls and two of them stalled
// put lab 07 step 4's reference at 0.42 of its floor. compare_speed then times more rounds (up to
// max(min_repeats, 6) more, within max_repeats) until neither side's median is stalled, so the median is again a
// call that nothing slowed; a quiet machine's calls spread by a few per cent and take no extra round. Extra rounds
// only add samples: a step cannot gain from them (the median still decides, and the same calls are verified).
inline constexpr double kStalledMedianFactor = 1.1;  // "more than 10 % above"
bool stalled_median(const std::vector<double>& ms);
// Builds the comparison from the per-call times (ms) and per-call post-stop waits (ms) of the candidate; `stalled`
// when either side's median is (stalled_median).
SpeedComparison summarize_comparison(std::vector<double> baseline_ms, std::vector<double> candidate_ms,
                                     std::vector<double> escaped_ms);

// Waits for every device this process has a context on (the runtime's primary contexts, which the driver reports
// active), the current one included, and leaves the current device as it was. compare_speed's waits use it; so does
// a gate that times a step with clocks of its own (lab 09).
void synchronize_devices_in_use();

// Pushes everything out of L2 with an untimed read of a buffer twice the L2 size (on the default stream), so
// that the next timed call reads its inputs from DRAM as it would in a real pipeline. See timing_l2.cu.
void evict_l2();

// The name under which the launch recorder sees evict_l2()'s kernel (a speed gate's recorder leaves it out of the
// step's calls, between which compare_speed runs it).
const char* l2_scrub_kernel_name();

// How many distinct input sets of `bytes_per_set` to rotate through so that repeats cannot be served from L2.
int rotation_sets(std::size_t bytes_per_set);

// Device-to-device cudaMemcpy bandwidth in GB/s, counting bytes read plus bytes written (the bandwidth ceiling
// every memory-bound gate compares with).
double memcpy_bandwidth_gbs(std::size_t bytes = std::size_t(1) << 30, const TimingOptions& opt = {});

// Event pair for ad-hoc timing.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t s = 0);
  void stop(cudaStream_t s = 0);
  double elapsed_ms();  // synchronizes on the stop event

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace labkit
