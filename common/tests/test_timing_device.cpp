// compare_speed's TimedCase on a GPU: which candidate calls verify() checks (one in the round the gate's secret picks,
// and the last), and the escaped-work wait over every device the process uses. Skipped without a device (and the
// last case without a second one); on a GPU machine these prove that a step skipping its work on most calls, or
// leaving work on a second GPU, is seen. The "step" here is a copy of a fresh input into a poisoned output.
#include <catch2/catch_test_macros.hpp>
#include <string>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/random.h"
#include "labkit/timing.h"

namespace {

constexpr std::size_t kN = std::size_t(1) << 20;

struct Checked {
  std::string call;  // labkit::verified_call() while verify() ran
  bool right;        // the output held the input of the call before it
};

// A TimedCase around a copy: refresh(k) writes input k and poisons the output; verify() compares them and keeps what
// it saw instead of failing, so that the test can look at every check.
struct CopyCase {
  labkit::DeviceBuffer<float> in{kN}, out{kN};
  std::vector<Checked> checked;
  labkit::TimedCase tc;
  CopyCase() {
    tc.refresh = [this](int k) {
      labkit::fill_random_device(in.data(), kN, 1000 + std::uint64_t(k));
      out.fill_bytes(0xFF);  // NaNs
    };
    tc.verify = [this] {
      LABKIT_CUDA(cudaDeviceSynchronize());
      checked.push_back({labkit::verified_call(), in.download() == out.download()});
    };
  }
  void copy() {
    LABKIT_CUDA(cudaMemcpyAsync(out.data(), in.data(), kN * sizeof(float), cudaMemcpyDeviceToDevice));
  }
};

labkit::TimingOptions exact_rounds(int rounds) {
  labkit::TimingOptions opt;
  opt.warmup = 1;
  opt.min_repeats = opt.max_repeats = rounds;
  opt.budget_ms = 0;
  return opt;
}

}  // namespace

TEST_CASE("compare_speed verifies the candidate's call of the picked round and its last call", "[gpu][timing]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  CopyCase c;
  c.tc.verified_round = 2;  // a gate derives it from its secret (gate::pick_timed_round)
  labkit::DeviceBuffer<float> spare(kN);
  const auto baseline = [&](int) {
    LABKIT_CUDA(cudaMemcpyAsync(spare.data(), c.in.data(), kN * sizeof(float), cudaMemcpyDeviceToDevice));
  };
  SECTION("a step that does its work on every call passes both checks") {
    labkit::compare_speed(baseline, [&](int) { c.copy(); }, c.tc, exact_rounds(4));
    REQUIRE(c.checked.size() == 2);
    // Calls 0 and 1 are the warm-up's; round r's candidate call is 2 + 2r + 1.
    CHECK(c.checked[0].call == "timed call 7, one the gate's secret picked among the timed calls");
    CHECK(c.checked[0].right);
    CHECK(c.checked[1].call == "the last timed call");
    CHECK(c.checked[1].right);
    CHECK(labkit::verified_call() == "the last timed call");  // outside verify() too
  }
  SECTION("a step that works only on the last of its calls is caught at the picked one") {
    // Four counted rounds and no `record`: the last candidate call is 2 + 2*3 + 1 = 9.
    labkit::compare_speed(baseline, [&](int k) { if (k == 9) c.copy(); }, c.tc, exact_rounds(4));
    REQUIRE(c.checked.size() == 2);
    CHECK_FALSE(c.checked[0].right);
    CHECK(c.checked[1].right);
  }
  SECTION("with `record`, a step that works only on the recorded calls is caught at the verified one") {
    // As if it could tell the recorder's calls from the others: both recorded calls are right, and the counted call
    // of round 2 (not the recorded round 1) is the one checked.
    c.tc.recorded_round = 1;
    bool recording = false;
    int recorded = 0;
    c.tc.record = [&](const std::function<void()>& call) {
      ++recorded;
      recording = true;
      call();
      recording = false;
    };
    labkit::compare_speed(baseline, [&](int) { if (recording) c.copy(); }, c.tc, exact_rounds(4));
    CHECK(recorded == 2);
    REQUIRE(c.checked.size() == 2);
    CHECK(c.checked[0].call == "timed call 7, one the gate's secret picked among the timed calls");
    CHECK_FALSE(c.checked[0].right);
    CHECK(c.checked[1].right);  // the last call, recorded
  }
}

TEST_CASE("work a step leaves on a second GPU is escaped work", "[gpu][timing]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  int count = 0;
  LABKIT_CUDA(cudaGetDeviceCount(&count));
  if (count < 2) SKIP("one GPU: this case needs two");
  LABKIT_CUDA(cudaSetDevice(0));
  CopyCase c;
  const auto baseline = [&](int) { c.copy(); };
  LABKIT_CUDA(cudaSetDevice(1));
  // About 2 GiB of writes on GPU 1 per call (1 ms or more on any GPU with that much memory): queued, not waited for.
  labkit::DeviceBuffer<float> far(std::size_t(1) << 29);
  LABKIT_CUDA(cudaSetDevice(0));
  const auto candidate = [&](int k) {
    c.copy();
    LABKIT_CUDA(cudaSetDevice(1));
    labkit::fill_random_device(far.data(), far.size(), std::uint64_t(k));
    LABKIT_CUDA(cudaSetDevice(0));
  };
  const auto cmp = labkit::compare_speed(baseline, candidate, c.tc, exact_rounds(5));
  CHECK(cmp.escaped);
  CHECK(cmp.escaped_ms > 0.2);
  CHECK(cmp.candidate.median_ms >= 0.5 * cmp.escaped_ms);  // the wait is charged to the call
  int now = -1;
  LABKIT_CUDA(cudaGetDevice(&now));
  CHECK(now == 0);  // the waits leave the current device as they found it
  // And the same step on GPU 0 alone is not flagged: the second GPU's wait is not a cost of every call.
  const auto alone = labkit::compare_speed(baseline, [&](int) { c.copy(); }, c.tc, exact_rounds(5));
  CHECK_FALSE(alone.escaped);
}
