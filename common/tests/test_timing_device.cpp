// compare_speed's TimedCase on a GPU: which candidate calls verify() checks (one in the round the gate's secret picks,
// and the last), when the recorder (TimedCase::record) is made, dropped, checked and stopped, and the escaped-work
// wait over every device the process uses. Skipped without a device (and the last case without a second one); on a
// GPU machine these prove that a step skipping its work on most calls, or leaving work on a second GPU, is seen. The "step" here is a copy of a fresh input into a poisoned output.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
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

// One warm-up round, then every round up to max_repeats: a budget no round reaches.
labkit::TimingOptions all_rounds(int min_repeats, int max_repeats) {
  labkit::TimingOptions opt;
  opt.warmup = 1;
  opt.min_repeats = min_repeats;
  opt.max_repeats = max_repeats;
  opt.budget_ms = 1e6;
  return opt;
}

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
  // Every section twice: checked right after the picked calls, and kept (labkit::KeptCalls) and checked after the
  // timed calls, in the same order.
  const bool deferred = GENERATE(false, true);
  labkit::KeptCalls kept;
  if (deferred) {
    kept.device(c.in.data(), kN).device(c.out.data(), kN);
    REQUIRE(kept.attach(c.tc));
  }
  INFO((deferred ? "checked after the timed calls" : "checked between the calls"));
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
  SECTION("a step honest in the first rounds and the last call only is caught at the late verified round") {
    // It knows the gates' call count (short calls always run max_repeats rounds) and skimps on the rounds between
    // the first min_repeats and the last, which decide the median: the late round falls among those.
    const labkit::TimingOptions opt = all_rounds(3, 12);
    c.tc.verified_round = 1;
    int skimped = 0;
    for (std::uint64_t draw : {1ull, 7ull, 8ull, 0x9E3779B97F4A7C15ull}) {  // late rounds 4, 10, 3, ...
      c.checked.clear();
      c.tc.late_draw = draw;
      // Calls 0, 1 warm up; round r's candidate call is 3 + 2r; the last, round 11's, is 25.
      labkit::compare_speed(baseline, [&](int k) { if (k < 3 + 2 * 3 || k == 25) c.copy(); }, c.tc, opt);
      REQUIRE(c.checked.size() == 3);  // the picked round, the late round, the last call
      CHECK(c.checked[0].right);
      INFO(c.checked[1].call);
      CHECK_FALSE(c.checked[1].right);
      CHECK(c.checked[2].call == "the last timed call");
      CHECK(c.checked[2].right);
      ++skimped;
    }
    CHECK(skimped == 4);
  }
  SECTION("one slow call does not end the timing early: the rounds the first ones set still run, the late one "
          "verified") {
    // After the first min_repeats rounds the budget (twice 1 ms) sets how many rounds are counted: the cap, 12, since
    // a round of two 4 MB copies takes far less than 2/12 ms. A step honest in those rounds and skimping after, that
    // padded one call past the budget, used to end the timing there, before the late verified round (here round
    // 3 + draw % 8: 4, 10, 8), on rounds nobody checked.
    labkit::TimingOptions opt;
    opt.warmup = 1;
    opt.min_repeats = 3;
    opt.max_repeats = 12;
    opt.budget_ms = 1;
    c.tc.verified_round = 1;
    for (std::uint64_t draw : {1ull, 7ull, 13ull}) {
      c.checked.clear();
      c.tc.late_draw = draw;
      int candidate_calls = 0;
      const auto cmp = labkit::compare_speed(
          baseline,
          [&](int k) {
            ++candidate_calls;
            if (k < 3 + 2 * 3) c.copy();  // the warm-up and the first three rounds: honest
            if (k == 3 + 2 * 3) {         // round 3: honest, and 5 ms long
              c.copy();
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            if (k == 25) c.copy();  // the last call, round 11's
          },
          c.tc, opt);
      CHECK(cmp.candidate.repeats == 12);
      CHECK(candidate_calls == 13);
      REQUIRE(c.checked.size() == 3);
      INFO(c.checked[1].call);
      CHECK_FALSE(c.checked[1].right);
    }
  }
  SECTION("a step that works only on the last of its calls is caught at the picked one") {
    // Four counted rounds and no `record`: the last candidate call is 2 + 2*3 + 1 = 9.
    labkit::compare_speed(baseline, [&](int k) { if (k == 9) c.copy(); }, c.tc, exact_rounds(4));
    REQUIRE(c.checked.size() == 2);
    CHECK_FALSE(c.checked[0].right);
    CHECK(c.checked[1].right);
  }
  // The test's recorder: logs when it is made, dropped, checked and destroyed, and whether a call runs under it.
  std::vector<std::string> events;
  int made = 0;
  bool recording = false;
  struct Logging : labkit::CallRecorder {
    std::vector<std::string>* log;
    bool* on;
    Logging(std::vector<std::string>* l, bool* o) : log(l), on(o) {
      log->push_back("start");
      *on = true;
    }
    ~Logging() override {
      log->push_back("stop");
      *on = false;
    }
    void drop() override { log->push_back("drop"); }
    void check() override { log->push_back("check"); }
  };
  c.tc.record = [&]() -> std::unique_ptr<labkit::CallRecorder> {
    ++made;
    return std::make_unique<Logging>(&events, &recording);
  };
  int calls = 0;
  const auto logged_baseline = [&](int k) {
    events.push_back("baseline");
    baseline(k);
  };
  const auto logged_copy = [&](int) {
    events.push_back("candidate " + std::to_string(calls++));
    c.copy();
  };
  SECTION("every_call: one recorder through all the calls, each candidate call checked after a drop()") {
    // A step cannot tell a checked call from another by the recorder's cost: one recorder spans all the calls.
    c.tc.recorded = labkit::RecordedCalls::every_call;
    const auto cmp = labkit::compare_speed(logged_baseline, logged_copy, c.tc, exact_rounds(4));
    CHECK(made == 1);
    CHECK(cmp.recorded_ms == 0);  // no call apart from the counted ones
    // One warm-up round and four counted ones, each candidate call between a drop() and a check(); no extra call.
    std::vector<std::string> expected{"start"};
    for (int i = 0; i < 5; ++i)
      for (const std::string& e : std::vector<std::string>{"baseline", "drop", "candidate " + std::to_string(i), "check"})
        expected.push_back(e);
    expected.push_back("stop");
    CHECK(events == expected);
    CHECK(cmp.candidate.repeats == 4);  // every counted call is a recorded one
    REQUIRE(c.checked.size() == 2);
    CHECK(c.checked[0].right);
    CHECK(c.checked[1].right);
  }
  SECTION("two_calls: the recorded round and an extra last call, neither counted") {
    c.tc.recorded = labkit::RecordedCalls::two_calls;
    c.tc.recorded_round = 1;
    const auto cmp = labkit::compare_speed(logged_baseline, logged_copy, c.tc, exact_rounds(4));
    CHECK(made == 2);
    // warm-up (candidate 0); rounds 0 (1), 1 recorded (2), 2 (3), 3 (4), 4 (5): a recorded round does not count,
    // so a fifth round makes the four; then the extra recorded call (6).
    const auto recorded = [](int i) {
      return std::vector<std::string>{"start", "drop", "candidate " + std::to_string(i), "check", "stop"};
    };
    std::vector<std::string> expected;
    for (int i = 0; i < 6; ++i) {
      expected.push_back("baseline");
      if (i == 2) {
        for (const auto& e : recorded(2)) expected.push_back(e);
      } else {
        expected.push_back("candidate " + std::to_string(i));
      }
    }
    for (const auto& e : recorded(6)) expected.push_back(e);
    CHECK(events == expected);
    CHECK(cmp.candidate.repeats == 4);
    CHECK(cmp.baseline.repeats == 4);
    // The faster recorded call, timed like a counted one: a copy of 4 MiB both, so within a few times the median.
    CHECK(cmp.recorded_ms > 0);
    CHECK(cmp.recorded_ms < 5 * cmp.candidate.median_ms);
  }
  SECTION("two_calls: a step that works only on the recorded calls is caught at the verified one") {
    // As if it could tell the recorder's calls from the others: both recorded calls are right, and the counted call
    // of round 2 (not the recorded round 1) is the one checked.
    c.tc.recorded = labkit::RecordedCalls::two_calls;
    c.tc.recorded_round = 1;
    labkit::compare_speed(baseline, [&](int) { if (recording) c.copy(); }, c.tc, exact_rounds(4));
    CHECK(made == 2);
    REQUIRE(c.checked.size() == 2);
    CHECK(c.checked[0].call == "timed call 7, one the gate's secret picked among the timed calls");
    CHECK_FALSE(c.checked[0].right);
    CHECK(c.checked[1].right);  // the last call, recorded
  }
  SECTION("two_calls: the last counted round is among the late verified round's draws") {
    // With the recorder's two calls the last call is the extra recorded one, so the last counted round is a round
    // like the others: a step honest everywhere but there was never checked. Rounds 0, 1 (recorded), 2, 3 make the
    // first three counted; six are counted in all (rounds 4-6), and late_draw 2 picks the third of them, round 6.
    c.tc.recorded = labkit::RecordedCalls::two_calls;
    c.tc.recorded_round = 1;
    c.tc.late_draw = 2;
    const labkit::TimingOptions opt = all_rounds(3, 6);
    int candidate_calls = 0;  // 0 the warm-up, 1-7 rounds 0-6, then the extra recorded call
    labkit::compare_speed(
        baseline, [&](int) { if (candidate_calls++ != 7) c.copy(); }, c.tc, opt);
    REQUIRE(c.checked.size() >= 3);
    CHECK(c.checked[0].right);  // round 2, the picked one
    INFO(c.checked[1].call);
    CHECK_FALSE(c.checked[1].right);  // round 6, the last counted
    CHECK(c.checked.back().right);    // the extra recorded call
  }
  SECTION("the recorder stops when a check fails") {
    events.clear();
    c.tc.recorded = labkit::RecordedCalls::every_call;
    struct Refusing : labkit::CallRecorder {
      std::vector<std::string>* log;
      explicit Refusing(std::vector<std::string>* l) : log(l) {}
      ~Refusing() override { log->push_back("stop"); }
      void drop() override {}
      void check() override { throw std::runtime_error("a library kernel"); }
    };
    c.tc.record = [&]() -> std::unique_ptr<labkit::CallRecorder> { return std::make_unique<Refusing>(&events); };
    CHECK_THROWS_WITH(labkit::compare_speed(baseline, [&](int) { c.copy(); }, c.tc, exact_rounds(4)),
                      "a library kernel");
    CHECK(events == std::vector<std::string>{"stop"});
  }
}

TEST_CASE("with keep and restore, no check runs between two candidate calls", "[gpu][timing]") {
  // A check takes host time between two calls, which a step timing the gaps between its own calls could see; with
  // keep and restore every counted call is kept alike and the checks wait for the end of the timing.
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  CopyCase c;
  int refreshed = -1;
  const auto refresh = c.tc.refresh;
  c.tc.refresh = [&](int k) {
    refresh(k);
    refreshed = k;
  };
  labkit::KeptCalls kept;
  kept.device(c.in.data(), kN).device(c.out.data(), kN).host(refreshed);
  REQUIRE(kept.attach(c.tc));
  std::vector<std::string> events;
  const auto keep = c.tc.keep;
  c.tc.keep = [&](int slot) {
    events.push_back("keep " + std::to_string(slot));
    keep(slot);
  };
  const auto verify = c.tc.verify;
  std::vector<int> verified;  // the call each check saw restored
  c.tc.verify = [&] {
    events.push_back("verify");
    verified.push_back(refreshed);
    verify();
  };
  labkit::DeviceBuffer<float> spare(kN);
  const auto baseline = [&](int) {
    LABKIT_CUDA(cudaMemcpyAsync(spare.data(), c.in.data(), kN * sizeof(float), cudaMemcpyDeviceToDevice));
  };
  const labkit::TimingOptions opt = all_rounds(3, 12);
  c.tc.verified_round = 1;
  c.tc.late_draw = 7;  // round 3 + 7 % 8 = 10
  const std::string mode = GENERATE(std::string("honest"), std::string("skips one call"));
  INFO(mode);
  int candidate_calls = 0;
  labkit::compare_speed(
      baseline,
      [&](int k) {
        events.push_back("candidate");
        ++candidate_calls;
        // Calls 0, 1 warm up; round r's candidate call is 3 + 2r; the late round's is 23, the last 25.
        if (mode == "honest" || k != 23) c.copy();
      },
      c.tc, opt);
  // Every counted call kept, in the first slot no picked call holds: 0 until round 1 (slot 0 kept), then 1 until
  // round 10; the last call after the timing, in slot 2.
  std::vector<std::string> expected{"candidate"};  // the warm-up
  for (int round = 0; round < 12; ++round) {
    expected.push_back("candidate");
    expected.push_back("keep " + std::to_string(round <= 1 ? 0 : round <= 10 ? 1 : 2));
  }
  expected.push_back("keep 2");
  for (int i = 0; i < 3; ++i) expected.push_back("verify");
  CHECK(events == expected);
  CHECK(candidate_calls == 13);
  // Each check saw the call it names: rounds 1 and 10, then the last, with its own input.
  CHECK(verified == std::vector<int>{5, 23, 25});
  REQUIRE(c.checked.size() == 3);
  CHECK(c.checked[0].call == "timed call 5, one the gate's secret picked among the timed calls");
  CHECK(c.checked[1].call == "timed call 23, one the gate's secret picked among the timed calls");
  CHECK(c.checked[2].call == "the last timed call");
  CHECK(c.checked[0].right);
  CHECK(c.checked[1].right == (mode == "honest"));  // the restored output of the call it skipped
  CHECK(c.checked[2].right);
}

TEST_CASE("a call that runs on a stream of its own beside the L2 scrub is still timed in full", "[gpu][timing]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  // The same 256 MiB copy on both sides; the candidate's goes on a non-blocking stream (which does not wait for the
  // default stream, where the gate scrubs L2 before each timed call) and joins the default stream before returning.
  // With the start event queued behind the scrub but not waiting for it, the candidate's copy ran beside the scrub
  // and was timed for its tail only: a saxpy measured 0.10 ms against 0.19 ms on the default stream (H200).
  constexpr std::size_t n = std::size_t(64) << 20;
  labkit::DeviceBuffer<float> in(n), out(n);
  labkit::fill_random_device(in.data(), n, 7);
  cudaStream_t side = nullptr;
  cudaEvent_t done = nullptr;
  LABKIT_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  LABKIT_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  labkit::TimedCase tc;
  tc.refresh = [](int) {};
  tc.verify = [] {};
  labkit::TimingOptions opt;
  opt.warmup = 2;
  opt.min_repeats = opt.max_repeats = 15;
  const auto cmp = labkit::compare_speed(
      [&](int) { LABKIT_CUDA(cudaMemcpyAsync(out.data(), in.data(), n * sizeof(float), cudaMemcpyDeviceToDevice)); },
      [&](int) {
        LABKIT_CUDA(cudaMemcpyAsync(out.data(), in.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, side));
        LABKIT_CUDA(cudaEventRecord(done, side));
        LABKIT_CUDA(cudaStreamWaitEvent(nullptr, done, 0));
      },
      tc, opt);
  LABKIT_CUDA(cudaEventDestroy(done));
  LABKIT_CUDA(cudaStreamDestroy(side));
  INFO("baseline " << cmp.baseline.median_ms << " ms, candidate " << cmp.candidate.median_ms << " ms");
  CHECK(cmp.ratio < 1.1);
  CHECK(cmp.ratio > 0.9);
}

TEST_CASE("compare_speed times more rounds while a median is stalled", "[gpu][timing]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  CopyCase c;
  labkit::DeviceBuffer<float> spare(kN);
  // Both sides idle the device for 2 ms inside the timed interval (the host sleeps between the events), so a call
  // takes about 2 ms; the candidate's first two counted calls (3 and 5: warm-up 0 and 1, then baseline 2 + 2r and
  // candidate 3 + 2r) stall 40 ms more, as a cudaMalloc waiting for the driver's lock did beside another worker.
  const auto pause = [](double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); };
  const auto baseline = [&](int) {
    pause(2);
    LABKIT_CUDA(cudaMemcpyAsync(spare.data(), c.in.data(), kN * sizeof(float), cudaMemcpyDeviceToDevice));
  };
  const auto candidate = [&](int k) {
    pause(k == 3 || k == 5 ? 42 : 2);
    c.copy();
  };
  labkit::TimingOptions opt;
  opt.warmup = 1;
  opt.min_repeats = 3;
  opt.budget_ms = 0;
  const auto cmp = labkit::compare_speed(baseline, candidate, c.tc, opt);
  CHECK(cmp.stall_rounds >= 1);
  CHECK(cmp.stall_rounds <= 6);  // max(min_repeats, 6)
  CHECK(cmp.candidate.repeats == 3 + cmp.stall_rounds);
  CHECK(cmp.candidate.median_ms < 20);  // a clean call: without the extra rounds it was a stalled one (42 ms)
  CHECK_FALSE(cmp.stalled);
  CHECK(c.checked.size() == 1);         // the last call, verified as always
  CHECK(c.checked[0].right);
  // max_repeats bounds the extra rounds: a gate that asked for exactly three rounds gets three.
  opt.max_repeats = 3;
  const auto capped = labkit::compare_speed(baseline, candidate, c.tc, opt);
  CHECK(capped.stall_rounds == 0);
  CHECK(capped.candidate.median_ms > 40);
  CHECK(capped.stalled);  // and the comparison says its median is not to be trusted
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
