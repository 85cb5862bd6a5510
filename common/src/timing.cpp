#include "labkit/timing.h"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/report.h"

namespace labkit {

EventTimer::EventTimer() {
  LABKIT_CUDA(cudaEventCreate(&start_));
  LABKIT_CUDA(cudaEventCreate(&stop_));
}
EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}
void EventTimer::start(cudaStream_t s) { LABKIT_CUDA(cudaEventRecord(start_, s)); }
void EventTimer::stop(cudaStream_t s) { LABKIT_CUDA(cudaEventRecord(stop_, s)); }
double EventTimer::elapsed_ms() {
  LABKIT_CUDA(cudaEventSynchronize(stop_));
  float ms = 0;
  LABKIT_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

namespace {
TimingStats summarize(std::vector<double> t) {
  TimingStats s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.repeats = static_cast<int>(t.size());
  s.min_ms = t.front();
  s.max_ms = t.back();
  s.median_ms = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  s.mean_ms = std::accumulate(t.begin(), t.end(), 0.0) / t.size();
  return s;
}

double time_once(const std::function<void(int)>& fn, int rep, EventTimer& timer) {
  timer.start();
  fn(rep);
  timer.stop();
  LABKIT_CHECK_LAUNCH();
  return timer.elapsed_ms();
}
}  // namespace

TimingStats time_gpu(const std::function<void(int)>& fn, const TimingOptions& opt) {
  EventTimer timer;
  int rep = 0;
  for (int i = 0; i < opt.warmup; ++i) time_once(fn, rep++, timer);
  LABKIT_CUDA(cudaDeviceSynchronize());
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < opt.max_repeats &&
         (static_cast<int>(times.size()) < opt.min_repeats || total < opt.budget_ms)) {
    times.push_back(time_once(fn, rep++, timer));
    total += times.back();
  }
  return summarize(times);
}

SpeedComparison compare_speed(const std::function<void(int)>& baseline, const std::function<void(int)>& candidate,
                              const TimingOptions& opt) {
  EventTimer timer;
  int rep = 0;
  for (int i = 0; i < opt.warmup; ++i) {
    time_once(baseline, rep, timer);
    time_once(candidate, rep++, timer);
  }
  LABKIT_CUDA(cudaDeviceSynchronize());
  std::vector<double> tb, tc;
  double total = 0;
  // Alternate baseline and candidate so that both see the same clocks and temperature.
  while (static_cast<int>(tb.size()) < opt.max_repeats &&
         (static_cast<int>(tb.size()) < opt.min_repeats || total < 2 * opt.budget_ms)) {
    tb.push_back(time_once(baseline, rep, timer));
    tc.push_back(time_once(candidate, rep++, timer));
    total += tb.back() + tc.back();
  }
  SpeedComparison c;
  c.baseline = summarize(tb);
  c.candidate = summarize(tc);
  c.ratio = c.candidate.median_ms > 0 ? c.baseline.median_ms / c.candidate.median_ms : 0;
  return c;
}

// ---- compare_speed with a TimedCase -------------------------------------------------------------------------
//
// Escaped work. Events recorded on the default stream see only work ordered with it; a kernel launched on a
// private non-blocking stream runs on after the stop event. Once the stop event has completed we time how long a
// cudaDeviceSynchronize() still waits: with nothing left it returns in 5-20 us (a driver round trip); with hidden
// work it waits for that work. The bound, max(0.25 * candidate median, 0.2 ms):
//  - 0.2 ms is ten times the idle round trip, so launch latency never trips it;
//  - the relative part scales with the step: a hidden kernel that is a quarter of the visible time is not
//    latency, while a healthy step whose teardown (a cudaFree in its launch function, say) costs a little is
//    judged against its own size;
//  - the median over all timed calls, not the maximum: a host thread descheduled during the wait (a busy grading
//    machine) inflates single calls, not half of them.
// Work hidden so well that it escapes even this (tiny kernels under 0.2 ms) still shows as a ratio above the
// gate's max_ratio, which gate::require_speedup fails separately.
double escaped_limit_ms(double candidate_median_ms) { return std::max(0.25 * candidate_median_ms, 0.2); }

SpeedComparison summarize_comparison(std::vector<double> baseline_ms, std::vector<double> candidate_ms,
                                     std::vector<double> escaped_ms) {
  SpeedComparison c;
  c.stalled = stalled_median(baseline_ms) || stalled_median(candidate_ms);
  c.baseline = summarize(std::move(baseline_ms));
  c.candidate = summarize(std::move(candidate_ms));
  c.ratio = c.candidate.median_ms > 0 ? c.baseline.median_ms / c.candidate.median_ms : 0;
  c.escaped_ms = summarize(std::move(escaped_ms)).median_ms;
  c.escaped = c.escaped_ms > escaped_limit_ms(c.candidate.median_ms);
  return c;
}

namespace {
// LABKIT_TIMING_TRACE=FILE appends one JSON line per timed call of compare_speed (gate, side, call index, ms and,
// for the candidate, the wait after its stop event; wall_ms, the host's time for the whole call with its refresh,
// scrub and waits): the raw samples behind a ratio's median, for finding where a speed gate's run-to-run spread
// and its untimed cost come from. Off unless the variable is set; the file is opened per call so that
// several gate processes can append to it.
void trace_call(const char* side, int call, double ms, double wait_ms, double wall_ms) {
  static const char* path = std::getenv("LABKIT_TIMING_TRACE");
  if (!path || !*path) return;
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "{\"gate\":\"%s\",\"side\":\"%s\",\"call\":%d,\"ms\":%.6f,\"wait_ms\":%.6f,\"wall_ms\":%.6f}\n",
                 report::current_gate().c_str(), side, call, ms, wait_ms, wall_ms);
    std::fclose(f);
  }
}

// The devices this process has a context on. The runtime API makes only primary contexts (one per device, created
// by the first call that needs it), and the driver says which are active; the driver is asked through the library
// the runtime has already loaded, since the gate binaries do not link it. Where it cannot answer: the current one.
std::vector<int> devices_in_use(int current) {
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  using Get = CUresult (*)(CUdevice*, int);
  static const auto driver = [] {
    std::pair<GetState, Get> f{nullptr, nullptr};
    if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      f.first = reinterpret_cast<GetState>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
      f.second = reinterpret_cast<Get>(dlsym(lib, "cuDeviceGet"));
    }
    return f;
  }();
  int count = 0;
  if (!driver.first || !driver.second || cudaGetDeviceCount(&count) != cudaSuccess) return {current};
  std::vector<int> used;
  for (int d = 0; d < count; ++d) {
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (d == current || (driver.second(&dev, d) == CUDA_SUCCESS && driver.first(dev, &flags, &active) == CUDA_SUCCESS &&
                         active))
      used.push_back(d);
  }
  return used;
}

}  // namespace

// A step could otherwise leave work running on a second GPU (lab 08's, or one a worker with several GPUs makes
// visible) into the next round, where the one-GPU baseline would not even compete with it.
void synchronize_devices_in_use() {
  int current = 0;
  LABKIT_CUDA(cudaGetDevice(&current));
  const std::vector<int> used = devices_in_use(current);
  if (used.size() == 1) {
    LABKIT_CUDA(cudaDeviceSynchronize());
    return;
  }
  for (int d : used) {
    LABKIT_CUDA(cudaSetDevice(d));
    LABKIT_CUDA(cudaDeviceSynchronize());
  }
  LABKIT_CUDA(cudaSetDevice(current));
}

namespace {
// How long the devices still work after the stop event of the last call has completed (see above).
double wait_after_stop_ms(EventTimer& timer) {
  timer.elapsed_ms();  // waits for the stop event only
  const auto t0 = std::chrono::steady_clock::now();
  synchronize_devices_in_use();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// What verify() is checking, for its messages (verified_call()); set only while compare_speed runs it mid-way.
thread_local std::string verifying_call;

// verify() on the call just made, named for the gate's messages while it runs (also when it fails: Catch2's
// failure is an exception, and the name is reset on the way out).
void verify_call(const TimedCase& tc, std::string name) {
  struct Named {
    explicit Named(std::string n) { verifying_call = std::move(n); }
    ~Named() { verifying_call.clear(); }
  } named(std::move(name));
  tc.verify();
}
}  // namespace

std::string verified_call() { return verifying_call.empty() ? "the last timed call" : verifying_call; }

SpeedComparison compare_speed(const std::function<void(int)>& baseline, const std::function<void(int)>& candidate,
                              const TimedCase& tc, const TimingOptions& opt) {
  if (!tc.refresh || !tc.verify) throw std::invalid_argument("compare_speed: a TimedCase needs refresh and verify");
  // The gate's set-up (inputs, baselines' handles) as a line of its own in LABKIT_GATE_TRACE, apart from the timing.
  report::detail::trace_checkpoint("before the timed calls", true);
  EventTimer timer;
  int call = 0;
  const bool every_call = tc.record && tc.recorded == RecordedCalls::every_call;
  // every_call: on before the first call and through the last, so that every call pays the same.
  const std::unique_ptr<CallRecorder> always = every_call ? tc.record() : nullptr;
  // One timed call: fresh inputs (so no cached answer matches), then L2 scrubbed. Scrubbing instead of rotating
  // among input sets because the refresh itself writes the inputs and leaves them in L2; only an eviction after it
  // makes the timed call read from DRAM. The scrub runs on the default stream after the refresh's work, and the
  // synchronization of every device in use after the scrub ends both before the start event is recorded: the fresh
  // inputs are complete for work on ANY stream (a step on a stream of its own would otherwise race with the refill
  // and fail verification instead of being diagnosed as escaped work), and a call that launched its work on a
  // stream that does not wait for the default stream (cudaStreamNonBlocking) and joined it back before returning
  // cannot run beside the scrub, before the start event, timed for part of its work only (a saxpy at 0.10 ms against
  // 0.19 ms on the default stream, on an H200). Both sides pay the first launch's latency inside the interval alike.
  // The previous call ended with a device-wide synchronization (the escaped-work wait). A recorded call's drop()
  // (which waits for the device itself, so the refresh's kernels are dropped) and check() come outside the interval.
  long long kept_bytes = 0;
  int kept_calls = 0, kept_measured = 0;
  const auto free_device_bytes = [] {
    std::size_t free_bytes = 0, total_bytes = 0;
    LABKIT_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<long long>(free_bytes);
  };
  auto timed = [&](const std::function<void(int)>& fn, double* escaped, bool recorded_once = false) {
    const int k = call++;
    const bool is_candidate = &fn == &candidate;
    // The candidate's counted calls (those that report their escaped work): the device memory each one kept,
    // measured outside the interval, after the scrub's synchronization and after the escaped-work wait.
    const bool measure_memory = is_candidate && escaped;
    const auto wall0 = std::chrono::steady_clock::now();
    tc.refresh(k);
    const std::unique_ptr<CallRecorder> once = recorded_once ? tc.record() : nullptr;
    CallRecorder* recorder = once ? once.get() : is_candidate ? always.get() : nullptr;
    if (recorder) recorder->drop();
    evict_l2();
    synchronize_devices_in_use();
    const long long free_before = measure_memory ? free_device_bytes() : 0;
    timer.start();
    fn(k);
    timer.stop();
    LABKIT_CHECK_LAUNCH();
    const double ms = timer.elapsed_ms();
    const double wait = wait_after_stop_ms(timer);
    if (escaped) *escaped = wait;
    if (measure_memory) {
      const long long kept = free_before - free_device_bytes();
      kept_bytes += kept;
      kept_calls += kept > 0;
      ++kept_measured;
    }
    if (recorder) recorder->check();
    trace_call(!is_candidate ? "baseline" : recorded_once ? "candidate (recorded)" : "candidate", k, ms, wait,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count());
    return ms;
  };
  for (int i = 0; i < opt.warmup; ++i) {
    timed(baseline, nullptr);
    timed(candidate, nullptr);
  }
  std::vector<double> tb, tcand, esc, idle, recorded;
  double total = 0, wait = 0, baseline_wait = 0;
  // The candidate's counted call in round verified_round is verified as well as the last (see TimedCase::verify),
  // and so are the late round's and one extra round's. With keep and restore, every counted candidate call is kept
  // alike, the picked ones in slots that later calls leave alone, and checked after the timed calls; without them,
  // right after the call, outside the timing, before the next refresh overwrites its inputs.
  const bool deferred = tc.keep && tc.restore;
  std::array<int, kKeptSlots> slot_call;  // the picked call a slot holds, -1: free
  slot_call.fill(-1);
  const auto picked_name = [](int k) {
    return "timed call " + std::to_string(k) + ", one the gate's secret picked among the timed calls";
  };
  int last_verified = -1;  // the call checked (or kept to be checked) last
  // The call just made kept in the first slot no picked call holds; returns that slot's entry.
  const auto keep_in_free_slot = [&] {
    const auto free_slot = std::find(slot_call.begin(), slot_call.end(), -1);
    if (free_slot == slot_call.end()) throw std::logic_error("compare_speed: more picked calls than kept slots");
    tc.keep(static_cast<int>(free_slot - slot_call.begin()));
    return free_slot;
  };
  // After the candidate's call k of a round: kept, and checked now or later where the round is picked.
  const auto after_candidate = [&](int k, bool picked) {
    if (deferred) {
      const auto slot = keep_in_free_slot();
      if (picked) *slot = k;
    } else if (picked) {
      verify_call(tc, picked_name(k));
    }
    if (picked) last_verified = k;
  };
  const bool two_calls = tc.record && !every_call;
  int late_round = -1;  // set after the first min_repeats counted rounds (below)
  // Alternate baseline and candidate so that both see the same clocks and temperature.
  auto one_round = [&](int round) {
    const double b = timed(baseline, &baseline_wait);
    idle.push_back(baseline_wait);
    const int k = call;
    if (two_calls && round == tc.recorded_round) {
      recorded.push_back(timed(candidate, nullptr, true));  // checked, not counted (see TimedCase::record)
      after_candidate(k, round == tc.verified_round);      // picked where a gate set both to one round
      return;
    }
    tb.push_back(b);
    tcand.push_back(timed(candidate, &wait));
    esc.push_back(wait);
    total += tb.back() + tcand.back();
    after_candidate(k, round == tc.verified_round || round == late_round);
  };
  // How many counted rounds run is fixed once the first min_repeats have shown how long a round takes, and not
  // changed by the calls after them: a step that made one late call slow enough to exhaust the budget would
  // otherwise end the timing on a round of its choosing, after rounds that nobody verified (the late verified round
  // is placed among the rounds the count leaves). The other side of it: calls that slow down after the first rounds
  // all still run (up to max_repeats); the gate's time limit bounds what that costs.
  std::optional<int> counted_rounds;  // set after the first min_repeats counted rounds
  int round = 0;
  for (; static_cast<int>(tb.size()) < counted_rounds.value_or(opt.max_repeats); ++round) {
    one_round(round);
    if (counted_rounds || static_cast<int>(tb.size()) < std::max(1, opt.min_repeats)) continue;
    const double per_round = total / static_cast<double>(tb.size());
    const double wanted = per_round > 0 ? std::ceil(2 * opt.budget_ms / per_round) : double(opt.max_repeats);
    counted_rounds = static_cast<int>(std::clamp(wanted, double(opt.min_repeats), double(opt.max_repeats)));
    // The late verified round (TimedCase::late_draw), among the rounds still to come but the last, whose call is
    // verified anyway; where the recorder takes two calls, the last call is the extra recorded one after the counted
    // rounds, so the last counted round is among the draws.
    const int more = *counted_rounds - opt.min_repeats - (two_calls ? 0 : 1);
    if (tc.late_draw && more > 0) late_round = round + 1 + static_cast<int>(tc.late_draw % std::uint64_t(more));
  }
  // A stalled median (stalled_median): more rounds until neither side's is, the candidate's with its escaped work
  // charged as below.
  const int stall_cap = std::max(opt.min_repeats, 6);
  int stall_rounds = 0;
  const auto stalled = [&] {
    std::vector<double> charged = tcand;
    charge_escaped_tail(charged, esc, summarize(idle).median_ms);
    return stalled_median(tb) || stalled_median(charged);
  };
  // One of the extra rounds is verified too, drawn like the late round: they come after the counted ones, and a
  // step that made its early calls uneven on purpose would otherwise get unverified rounds to skimp in.
  const int verified_extra = tc.late_draw ? static_cast<int>((tc.late_draw >> 17) % std::uint64_t(stall_cap)) : -1;
  for (; stall_rounds < stall_cap && static_cast<int>(tb.size()) < opt.max_repeats && stalled(); ++stall_rounds) {
    if (stall_rounds == verified_extra) late_round = round;
    one_round(round++);
  }
  if (two_calls) recorded.push_back(timed(candidate, nullptr, true));  // the last call, recorded too
  report::detail::trace_checkpoint("the timed calls", true);
  // The last call was the candidate's: its output, on inputs it never saw before, must be right (unless the verified
  // extra round was the last one: then it has been checked, or kept to be).
  if (!deferred) {
    if (last_verified != call - 1) verify_call(tc, "");
  } else {
    // The picked calls, then the last, in call order. The last is kept too, in a free slot (nothing follows it to
    // see the copy), since restoring the others overwrites what it left.
    if (last_verified != call - 1) *keep_in_free_slot() = call - 1;
    std::vector<std::pair<int, int>> order;  // (call, slot)
    for (int slot = 0; slot < kKeptSlots; ++slot)
      if (slot_call[slot] >= 0) order.emplace_back(slot_call[slot], slot);
    std::sort(order.begin(), order.end());
    for (const auto& [k, slot] : order) {
      tc.restore(slot);
      verify_call(tc, k == call - 1 && k != last_verified ? "" : picked_name(k));
    }
  }
  charge_escaped_tail(tcand, esc, summarize(idle).median_ms);
  SpeedComparison c = summarize_comparison(std::move(tb), std::move(tcand), std::move(esc));
  // The faster one: a host thread descheduled during one recorded call's launch (a busy machine) does not count.
  if (!recorded.empty()) c.recorded_ms = *std::min_element(recorded.begin(), recorded.end());
  c.stall_rounds = stall_rounds;
  c.kept_bytes = kept_bytes;
  c.kept_calls = kept_calls;
  c.kept_measured = kept_measured;
  return c;
}

bool stalled_median(const std::vector<double>& ms) {
  if (ms.size() < 2) return false;
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double low = sorted[(sorted.size() - 1) / 4];  // the lower quartile; the fastest of up to four calls
  return low > 0 && summarize(ms).median_ms > kStalledMedianFactor * low;
}

void charge_escaped_tail(std::vector<double>& candidate_ms, const std::vector<double>& escaped_ms, double idle_ms) {
  for (std::size_t i = 0; i < candidate_ms.size() && i < escaped_ms.size(); ++i)
    candidate_ms[i] += std::max(0.0, escaped_ms[i] - idle_ms);
}

int rotation_sets(std::size_t bytes_per_set) {
  std::size_t l2 = has_device() ? device_info().l2_bytes : (std::size_t(50) << 20);
  if (bytes_per_set == 0) return 1;
  std::size_t sets = (3 * l2) / bytes_per_set + 1;  // > 3x L2 between two uses of one set: it has been evicted
  return static_cast<int>(std::min<std::size_t>(sets, 64));
}

SpeedComparison per_unit_difference(const SpeedComparison& shorter, const SpeedComparison& longer, double units) {
  SpeedComparison c;
  c.baseline.median_ms = (longer.baseline.median_ms - shorter.baseline.median_ms) / units;
  c.candidate.median_ms = (longer.candidate.median_ms - shorter.candidate.median_ms) / units;
  c.baseline.repeats = std::min(longer.baseline.repeats, shorter.baseline.repeats);
  c.candidate.repeats = std::min(longer.candidate.repeats, shorter.candidate.repeats);
  c.ratio = c.candidate.median_ms > 0 ? c.baseline.median_ms / c.candidate.median_ms : 0;
  c.escaped = shorter.escaped || longer.escaped;
  c.escaped_ms = std::max(shorter.escaped_ms, longer.escaped_ms);
  c.stall_rounds = shorter.stall_rounds + longer.stall_rounds;
  c.stalled = shorter.stalled || longer.stalled;
  c.kept_bytes = shorter.kept_bytes + longer.kept_bytes;
  c.kept_calls = shorter.kept_calls + longer.kept_calls;
  c.kept_measured = shorter.kept_measured + longer.kept_measured;
  return c;
}

bool keeps_device_memory(const SpeedComparison& cmp) {
  return cmp.kept_measured >= 3 && 2 * cmp.kept_calls > cmp.kept_measured && cmp.kept_bytes >= kKeptBytesLimit;
}

SpeedComparison limit_fixed_cost(SpeedComparison c, const SpeedComparison& longer, double longer_units,
                                 double allowance_ms) {
  const double per_unit_floor = (longer.candidate.median_ms - allowance_ms) / longer_units;
  if (!(per_unit_floor > c.candidate.median_ms)) return c;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "a call of %g units took %.3f ms, which leaves %.3f ms per unit after the %.3f ms allowed for its "
                "fixed cost; the difference of the two run lengths gave %.3f ms",
                longer_units, longer.candidate.median_ms, per_unit_floor, allowance_ms, c.candidate.median_ms);
  c.note = buf;
  c.candidate.median_ms = per_unit_floor;
  c.ratio = c.baseline.median_ms / per_unit_floor;
  return c;
}

KeptCalls::~KeptCalls() {
  for (void* p : device_slots_) cudaFree(p);
}

KeptCalls& KeptCalls::device_bytes(void* p, std::size_t bytes) {
  if (attached_) throw std::logic_error("KeptCalls: a region added after attach()");
  device_.push_back({p, bytes});
  device_total_ += bytes;
  return *this;
}

KeptCalls& KeptCalls::host_bytes(void* p, std::size_t bytes) {
  if (attached_) throw std::logic_error("KeptCalls: a region added after attach()");
  host_.push_back({p, bytes});
  host_total_ += bytes;
  return *this;
}

bool KeptCalls::attach(TimedCase& tc) {
  // At most half of the device's memory: the gate's own buffers and the step's allocations must still fit, on a GPU
  // smaller than the grading one too. A smaller GPU checks between the calls; on one large enough, memory the
  // process holds (a step's allocations kept from earlier gates) does not turn the copies off: the gate fails.
  std::size_t free_bytes = 0, total_bytes = 0;
  if (device_total_ > 0) LABKIT_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (device_total_ > total_bytes / 2 / kKeptSlots) {
    std::fprintf(stderr,
                 "labkit: %d copies of %zu bytes would take more than half of this GPU's memory: the picked timed "
                 "calls are checked between the calls\n",
                 kKeptSlots, device_total_);
    return false;
  }
  for (int slot = 0; slot < kKeptSlots && device_total_ > 0; ++slot) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, device_total_);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it
      for (void* q : device_slots_) cudaFree(q);
      device_slots_.clear();
      throw std::runtime_error("the speed gate found no room for its " + std::to_string(kKeptSlots) +
                               " copies of the step's output (" + std::to_string(device_total_ >> 20) +
                               " MiB each; " + std::to_string(free_bytes >> 20) + " of " +
                               std::to_string(total_bytes >> 20) +
                               " MiB free): something in this process holds device memory (a step that keeps its "
                               "allocations from call to call?)");
    }
    LABKIT_CUDA(e);
    device_slots_.push_back(p);
    // Written once now, so that no slot's first copy in the timing differs from the others.
    LABKIT_CUDA(cudaMemset(p, 0, device_total_));
  }
  attached_ = true;
  host_slots_.assign(kKeptSlots, std::vector<unsigned char>(host_total_));
  tc.keep = [this](int slot) { keep(slot); };
  tc.restore = [this](int slot) { restore(slot); };
  return true;
}

bool KeptCalls::attach(const std::shared_ptr<KeptCalls>& kept, TimedCase& tc) {
  if (!kept->attach(tc)) return false;
  tc.keep = [kept](int slot) { kept->keep(slot); };
  tc.restore = [kept](int slot) { kept->restore(slot); };
  return true;
}

// The same copies after every call, on the default stream after the escaped-work wait (the call's work is done on
// every stream), and waited for: the next refresh overwrites the inputs.
void KeptCalls::keep(int slot) {
  auto* d = static_cast<unsigned char*>(device_slots_.empty() ? nullptr : device_slots_.at(slot));
  for (const Region& r : device_) {
    LABKIT_CUDA(cudaMemcpyAsync(d, r.p, r.bytes, cudaMemcpyDeviceToDevice));
    d += r.bytes;
  }
  if (d) LABKIT_CUDA(cudaStreamSynchronize(nullptr));
  unsigned char* h = host_slots_.at(slot).data();
  for (const Region& r : host_) {
    std::memcpy(h, r.p, r.bytes);
    h += r.bytes;
  }
}

void KeptCalls::restore(int slot) {
  const auto* d = static_cast<const unsigned char*>(device_slots_.empty() ? nullptr : device_slots_.at(slot));
  for (const Region& r : device_) {
    LABKIT_CUDA(cudaMemcpyAsync(r.p, d, r.bytes, cudaMemcpyDeviceToDevice));
    d += r.bytes;
  }
  LABKIT_CUDA(cudaDeviceSynchronize());
  const unsigned char* h = host_slots_.at(slot).data();
  for (const Region& r : host_) {
    std::memcpy(r.p, h, r.bytes);
    h += r.bytes;
  }
}

double memcpy_bandwidth_gbs(std::size_t bytes, const TimingOptions& opt) {
  DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  src.fill_bytes(1);
  TimingStats t = time_gpu(
      [&](int) { LABKIT_CUDA(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice)); }, opt);
  return 2.0 * bytes / (t.median_ms * 1e-3) / 1e9;
}

}  // namespace labkit
