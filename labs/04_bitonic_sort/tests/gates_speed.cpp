// Lab 04 speed gates: step 3 against the gate's own one-kernel-per-step network and against thrust::sort, step 5
// against thrust::sort, at 2^24 keys, measured in one process on fresh keys for every timed call, the last one
// verified. What the gate files share (the steps, the sort check) is in gate_util.h; the correctness gates are in
// gates.cpp.
#include <catch2/catch_test_macros.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bitonic_sort.h"
#include "device_check.h"
#include "gate_util.h"
#include "global_bitonic.h"
#include "labkit/buffer.h"
#include "labkit/gate.h"
#include "labkit/guard.h"
#include "labkit/launches.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "thrust_sort.h"

using namespace lab04_gates;

namespace {

// ---------------------------------------------------------------------------------------------------------
// Speed at 2^24 keys, against baselines the student cannot change (thrust::sort, or the gate's own textbook
// network in global_bitonic.cu), in the TimedCase form of labkit::compare_speed:
//  - refresh(rep), untimed, before every timed call: both arrays get new random keys (a seed per rep), so nobody
//    sorts sorted data and a sort that remembers its last answer (keyed on the pointer, n or a few sampled keys)
//    hands back a wrong one;
//  - verify(), untimed, on the candidate's call in a round the gate's secret picks and on its last call, after the
//    timing (labkit::KeptCalls): the output must be the sorted input of that call (the check of the correctness
//    gates, on the GPU first, with the host's diagnosis when it fails). A fast wrong sort earns nothing, and needs no check before the timing: the
//    checked calls are at the timed size on keys they never saw;
//  - record: only the step's own kernels may run (no thrust::sort or CUB inside a step), in a timed round the
//    gate's secret picks and in the last call.
constexpr std::size_t kSpeedN = std::size_t(1) << 24;

std::uint64_t speed_seed(int rep) { return labkit::gate::seed("speed keys, timed call " + std::to_string(rep)); }

// The gate's verdict is `candidate` against `baseline`. `previous` (an earlier step) is timed against the same
// baseline only to report how far the step moved (metric previous_ratio): the teaching point, without letting a
// deliberately slow earlier step raise this gate's ratio.
void check_speed(Step candidate, const char* baseline_name, const std::function<void(float*, std::size_t)>& baseline,
                 std::optional<Step> previous = std::nullopt) {
  const std::size_t n = kSpeedN;
  const std::string ctx = std::string(kStepName[int(candidate)]) + " at the timed size n = 2^24, ascending";
  labkit::GuardedBuffer<float> work(n, "keys");  // the candidate's array
  labkit::DeviceBuffer<float> base(n);           // the baseline's own, so that it never sorts the candidate's keys
  // compare_speed calls refresh(k) before call k (k counts every call, the baseline's too), and verify() on the
  // candidate call it checks, restored with what `kept` holds of it: `last_rep` names the keys that call sorted.
  int inputs_rep = -1, last_rep = -1;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    // The same keys in both arrays (fill_random_device gives random_floats(n, seed) bit for bit).
    labkit::fill_random_device(work.data(), n, speed_seed(rep), -1.f, 1.f);
    labkit::fill_random_device(base.data(), n, speed_seed(rep), -1.f, 1.f);
    inputs_rep = rep;
  };
  tc.verify = [&] {
    LABKIT_CUDA(cudaDeviceSynchronize());
    if (last_rep < 0 || last_rep != inputs_rep) FAIL(ctx << ": the verified call was not the candidate's");
    require_guards(work.check_guards(), ctx + " (" + labkit::verified_call() + ")");
    // The keys of that call, written again into the baseline's array (free until the next refresh): the GPU check
    // answers in milliseconds; only a "no" (or a sanitizer) brings both arrays to the host check, which decides and
    // diagnoses (device_check.h). On the host this took ~0.5 s per gate, with the GPU held exclusively.
    const std::string checked =
        ctx + ", the output of " + labkit::verified_call() + " (fresh keys, call " + std::to_string(last_rep) + ")";
    labkit::fill_random_device(base.data(), n, speed_seed(last_rep), -1.f, 1.f);
    if (!labkit::gate::under_sanitizer() &&
        lab04_gates::on_device::sorted_permutation(work.data(), base.data(), n, false))
      return labkit::gate::require(labkit::Verdict{}, checked);
    const std::vector<float> in = labkit::random_floats_via_device(n, speed_seed(last_rep), -1.f, 1.f);
    labkit::gate::require(check_sort(work.download(), in, Order::ascending), checked);
  };
  labkit::TimingOptions opt;
  opt.warmup = 1;
  opt.min_repeats = 5;
  // 100 ms a side: on an H100 the medians of five runs matched 200 ms within 0.1 % (spreads 0.2-0.9 %).
  opt.budget_ms = 100;
  // Two recorded calls: step 1's 300 kernels a sort pay the recorder's cost per kernel 300 times (on every call, step
  // 3's ratio to it rose 7 % on an H100), and the libraries that would sort faster (Thrust, CUB) are refused before
  // the step links.
  labkit::gate::record_timed_calls(tc, kStepName[int(candidate)], opt, labkit::RecordedCalls::two_calls);
  // The keys and the bookkeeping of every candidate call kept alike, so that the picked calls are checked after the
  // timing (labkit::KeptCalls).
  labkit::KeptCalls kept;
  kept.device(work.data(), n).host(inputs_rep).host(last_rep);
  kept.attach(tc);
  auto timed_baseline = [&](int) { baseline(base.data(), n); };
  auto timed_candidate = [&](int) {
    run_keys(candidate, work.data(), n, Order::ascending);
    last_rep = inputs_rep;  // host bookkeeping only: nanoseconds inside the timed region
  };
  const auto cmp = labkit::compare_speed(timed_baseline, timed_candidate, tc, opt);
  if (previous)
    labkit::gate::report_previous_ratio(
        cmp, timed_baseline, [&](int) { run_keys(*previous, work.data(), n, Order::ascending); }, tc.refresh,
        kStepName[int(candidate)], kStepName[int(*previous)], baseline_name);
  labkit::gate::require_speedup(cmp, baseline_name, kStepName[int(candidate)], double(n) / 1e9, "Gkeys");
}

}  // namespace

TEST_CASE("step3.speed", "[lab04][step3][speed]") {
  LABKIT_REQUIRE_GPU();
  // The baseline is the gate's own one-kernel-per-step network (what step 1 is), never the student's step 1.
  check_speed(Step::shared, "the textbook global-memory network (the gate's own, one kernel per step)",
              [](float* k, std::size_t n) { lab04::baseline::global_bitonic_sort(k, n); }, Step::pow2);
}
TEST_CASE("step3.speed_thrust", "[lab04][step3][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::shared, "thrust::sort", [](float* k, std::size_t n) { lab04::baseline::thrust_sort(k, n); });
}
TEST_CASE("step5.speed", "[lab04][step5][speed]") {
  LABKIT_REQUIRE_GPU();
  check_speed(Step::fused, "thrust::sort", [](float* k, std::size_t n) { lab04::baseline::thrust_sort(k, n); },
              Step::shared);
}
