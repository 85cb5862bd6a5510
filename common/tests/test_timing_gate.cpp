// CPU tests of the speed-gate mechanism that do not need a GPU: seed mixing with the per-run secret, the escaped-
// work bound, the comparison summary, the verdict order of require_speedup, and max_ratio in the rubrics.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <string>
#include <set>
#include <vector>

#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/random.h"
#include "labkit/report.h"
#include "labkit/rubric.h"
#include "labkit/timing.h"

using Catch::Matchers::ContainsSubstring;

TEST_CASE("seeds mix the run's seed with the per-run secret", "[cpu][seed]") {
  using labkit::gate::mix_seed;
  // Reproducible: the same pair and label give the same seed.
  CHECK(mix_seed(1234, 5678, "A") == mix_seed(1234, 5678, "A"));
  // The secret changes every input, also for neighbouring values, and the labels stay apart.
  CHECK(mix_seed(1234, 5678, "A") != mix_seed(1234, 5679, "A"));
  CHECK(mix_seed(1234, 0, "A") != mix_seed(1234, 1, "A"));
  CHECK(mix_seed(1234, 5678, "A") != mix_seed(1234, 5678, "B"));
  CHECK(mix_seed(1234, 5678, "A") != mix_seed(1235, 5678, "A"));
  // The public seed alone (the old derive_seed) no longer gives the inputs.
  CHECK(mix_seed(1234, 5678, "A") != labkit::derive_seed(1234, "A"));
  // base ^ secret must not cancel: swapping or shifting the pair gives other seeds.
  CHECK(mix_seed(1, 2, "A") != mix_seed(2, 1, "A"));
  CHECK(mix_seed(7, 7, "A") != mix_seed(0, 0, "A"));
}

TEST_CASE("the per-run secret is fixed within a run and settable to reproduce one", "[cpu][seed]") {
  using namespace labkit::gate;
  const std::uint64_t s = secret();
  CHECK(secret() == s);  // every gate of one run sees the same inputs for the same label
  detail::set_secret(42);
  CHECK(secret() == 42);
  CHECK(seed("x") == mix_seed(base_seed(), 42, "x"));
  CHECK_THAT(reproduce_hint(), ContainsSubstring("--labkit-secret 42"));
  CHECK_THAT(reproduce_hint(), ContainsSubstring("--rng-seed " + std::to_string(base_seed())));
  detail::set_secret(s);
}

TEST_CASE("the verified round is drawn from the secret, below min_repeats, never the recorded round", "[cpu][seed]") {
  using namespace labkit::gate;
  const std::uint64_t s = secret();
  labkit::TimingOptions opt;
  opt.min_repeats = 5;
  std::vector<int> seen_verified(5), seen_recorded(5), seen_every(5);
  std::set<std::uint64_t> late_draws;
  for (std::uint64_t trial = 0; trial < 200; ++trial) {
    detail::set_secret(1000 + trial);
    labkit::TimedCase two;
    record_timed_calls(two, "step", opt, labkit::RecordedCalls::two_calls);
    CHECK(two.record);  // the recorder itself is made by compare_speed, on a GPU
    CHECK(two.recorded == labkit::RecordedCalls::two_calls);
    REQUIRE(two.recorded_round >= 0);
    REQUIRE(two.recorded_round < 5);
    REQUIRE(two.verified_round >= 0);
    REQUIRE(two.verified_round < 5);
    CHECK(two.verified_round != two.recorded_round);
    ++seen_recorded[std::size_t(two.recorded_round)];
    ++seen_verified[std::size_t(two.verified_round)];
    // Every call recorded: no recorded round to keep apart from, so any round, the same draw as without a recorder.
    labkit::TimedCase every;
    record_timed_calls(every, "step", opt, labkit::RecordedCalls::every_call);
    CHECK(every.recorded == labkit::RecordedCalls::every_call);
    labkit::TimedCase plain;
    pick_timed_round(plain, opt);
    CHECK(plain.verified_round >= 0);
    CHECK(plain.verified_round < 5);
    ++seen_every[std::size_t(every.verified_round)];
    // A late verified round too, drawn from the secret (compare_speed places it): never none, and each timed case
    // of a gate draws its own (detail::next_timed_case_label).
    CHECK(two.late_draw != 0);
    CHECK(plain.late_draw != two.late_draw);
    CHECK(plain.late_draw != every.late_draw);
    late_draws.insert(plain.late_draw);
  }
  CHECK(late_draws.size() == 200);
  // Every round comes up (200 draws over 5 rounds: a round left out would be a broken draw, not chance).
  for (int r = 0; r < 5; ++r) {
    CHECK(seen_recorded[std::size_t(r)] > 0);
    CHECK(seen_verified[std::size_t(r)] > 0);
    CHECK(seen_every[std::size_t(r)] > 0);
  }
  // The draws are labelled with the gate and the timed case's place in it: another gate's first case draws apart
  // from this gate's first, and the same gate's first case draws the same again (a reproduction with the same seeds).
  labkit::report::detail::set_current_gate("stepA.speed");
  CHECK(detail::next_timed_case_label() == ", stepA.speed, timed case 0");
  CHECK(detail::next_timed_case_label() == ", stepA.speed, timed case 1");
  labkit::TimedCase a0, b0, a0_again;
  labkit::report::detail::set_current_gate("stepA.speed, again");
  pick_timed_round(a0, opt);
  labkit::report::detail::set_current_gate("stepB.speed");
  pick_timed_round(b0, opt);
  labkit::report::detail::set_current_gate("stepA.speed, again");
  pick_timed_round(a0_again, opt);
  CHECK(a0.late_draw != b0.late_draw);
  CHECK(a0.late_draw == a0_again.late_draw);
  CHECK(a0.verified_round == a0_again.verified_round);
  labkit::report::detail::set_current_gate("");
  // One round only: the verified round is that one, even with a recorder.
  opt.min_repeats = 1;
  labkit::TimedCase one;
  record_timed_calls(one, "step", opt, labkit::RecordedCalls::two_calls);
  CHECK(one.recorded_round == 0);
  CHECK(one.verified_round == 0);
  detail::set_secret(s);
}

TEST_CASE("the escaped-work bound: 0.2 ms, or a quarter of the candidate's time", "[cpu][timing]") {
  CHECK(labkit::escaped_limit_ms(0.01) == 0.2);
  CHECK(labkit::escaped_limit_ms(0.8) == 0.2);
  CHECK(labkit::escaped_limit_ms(4.0) == 1.0);
}

TEST_CASE("summarize_comparison: medians, ratio and escaped work", "[cpu][timing]") {
  // A healthy candidate twice as fast; the idle synchronization takes ~10 us, and two calls of seven were
  // descheduled by a busy machine (5 ms each): the median ignores them.
  auto c = labkit::summarize_comparison({2, 2.1, 1.9, 2, 2, 2.2, 1.8}, {1, 1.1, 0.9, 1, 1, 1, 1},
                                        {0.01, 5, 0.012, 0.009, 5, 0.011, 0.01});
  CHECK(c.baseline.median_ms == 2);
  CHECK(c.candidate.median_ms == 1);
  CHECK(c.ratio == 2);
  CHECK(c.escaped_ms == 0.011);
  CHECK_FALSE(c.escaped);
  CHECK(c.candidate.repeats == 7);

  // Work on a private stream: the events see only the launch (10 us), the synchronization waits 3 ms.
  auto h = labkit::summarize_comparison({3, 3, 3, 3, 3}, {0.01, 0.01, 0.012, 0.01, 0.011}, {3, 3.1, 2.9, 3, 3});
  CHECK(h.escaped);
  CHECK(h.escaped_ms == 3);

  // A long step (8 ms) whose launch function ends with 0.5 ms of teardown: within a quarter of its time.
  auto t = labkit::summarize_comparison({8, 8, 8}, {8, 8, 8}, {0.5, 0.5, 0.5});
  CHECK_FALSE(t.escaped);
  CHECK_FALSE(t.stalled);

  // Two of three candidate calls stalled by the driver (lab 07 step 4 beside another worker): the verdict is the
  // machine's, and the comparison says so; a stalled baseline counts too.
  CHECK(labkit::summarize_comparison({49, 49, 49}, {49, 73.7, 106.9}, {0.01, 0.01, 0.01}).stalled);
  CHECK(labkit::summarize_comparison({7, 20, 19}, {7, 7, 7}, {0.01, 0.01, 0.01}).stalled);
}

TEST_CASE("a median is stalled when half the calls or more ran 10 % over the lower quartile", "[cpu][timing]") {
  using labkit::stalled_median;
  CHECK_FALSE(stalled_median({}));
  CHECK_FALSE(stalled_median({5}));
  CHECK_FALSE(stalled_median({49.0, 49.5, 50.1}));  // a quiet machine: a few per cent
  CHECK_FALSE(stalled_median({49.0, 49.5, 106.9}));  // one stalled call of three: the median is a clean one
  CHECK(stalled_median({49.0, 73.7, 106.9}));         // two of three (lab 07 step 4 beside another worker)
  CHECK(stalled_median({49.0, 50.8, 73.7, 106.9}));   // two of four: the median averages a stalled call in
  CHECK_FALSE(stalled_median({49.0, 49.1, 50.8, 73.7, 106.9}));  // a clean round more, and it is clean again
  CHECK_FALSE(stalled_median({1.0, 1.1, 1.1}));       // exactly 10 %: not over
  CHECK(stalled_median({1.0, 2.0}));
  // Many calls that drift (lab 08 step 2's short solves on a quiet H200, in the order they ran) and one that ran
  // faster than the rest (added here): the median is 20 % above that one, 6 % above the lower quartile.
  const std::vector<double> drift{35.39, 32.84, 32.20, 33.07, 32.66, 32.96, 32.32, 33.75, 37.16, 33.96, 34.74, 33.53,
                                  35.12, 36.02, 34.29, 33.20, 36.57, 36.82, 37.19, 37.46, 36.30, 37.27, 38.40, 37.38,
                                  29.0};
  CHECK_FALSE(stalled_median(drift));
  // Twelve of sixteen calls stalled: the quartile is still a clean call.
  std::vector<double> most(12, 70.0);
  for (int i = 0; i < 4; ++i) most.push_back(49.0 + i * 0.1);
  CHECK(stalled_median(most));
}

TEST_CASE("work left running past the stop event is charged to the call", "[cpu][timing]") {
  // A step that leaves a fifth of its work on a private stream: 0.8 ms seen by the events, 0.2 ms waited for after
  // them (under the escaped-work bound of a quarter), against an idle round trip of 0.01 ms.
  std::vector<double> ms{0.8, 0.8, 0.8}, waits{0.21, 0.21, 0.21};
  labkit::charge_escaped_tail(ms, waits, 0.01);
  for (double m : ms) CHECK(m == Catch::Approx(1.0));
  // A healthy step waits as long as the baseline does: its times do not change, and a wait shorter than the idle
  // round trip takes nothing away.
  std::vector<double> healthy{0.8, 0.8, 0.8};
  labkit::charge_escaped_tail(healthy, {0.01, 0.009, 0.012}, 0.01);
  CHECK(healthy[0] == 0.8);
  CHECK(healthy[1] == 0.8);
  CHECK(healthy[2] == Catch::Approx(0.802));
}

TEST_CASE("speed_problem: escaped work, then the ceiling, then the threshold", "[cpu][timing]") {
  using labkit::gate::speed_problem;
  labkit::SpeedComparison c;
  c.ratio = 0.9;
  CHECK(speed_problem(c, 0.6, 1.15, "memcpy", "step 5") == "");
  CHECK(speed_problem(c, 0.6, std::nullopt, "memcpy", "step 5") == "");
  CHECK_THAT(speed_problem(c, 1.0, 1.15, "memcpy", "step 5"),
             ContainsSubstring("step 5 runs at 0.90x the speed of memcpy; the gate needs 1.00x"));
  c.ratio = 39;
  CHECK_THAT(speed_problem(c, 0.6, 1.15, "cuBLAS", "step 5"),
             ContainsSubstring("beyond what the hardware allows (at most 1.15x"));
  CHECK_THAT(speed_problem(c, 0.6, 1.15, "cuBLAS", "step 5"), ContainsSubstring("replayed results"));
  CHECK(speed_problem(c, 0.6, std::nullopt, "cuBLAS", "step 5") == "");  // no ceiling in the rubric: passes
  c.ratio = 1.15;
  CHECK(speed_problem(c, 0.6, 1.15, "cuBLAS", "step 5") == "");  // the ceiling itself is allowed
  c.escaped = true;  // hidden work is named first: it is the cause of the impossible ratio
  c.ratio = 39;
  CHECK_THAT(speed_problem(c, 0.6, 1.15, "cuBLAS", "step 5"),
             ContainsSubstring("work still running after the timed call returned: a kernel launched on a stream the "
                               "timer does not see"));
}

TEST_CASE("keeps_device_memory: memory kept in most calls, 16 MiB or more in all", "[cpu][timing]") {
  using labkit::gate::speed_problem;
  labkit::SpeedComparison c;
  c.ratio = 1.2;
  c.kept_measured = 10;
  c.kept_calls = 10;
  c.kept_bytes = 10ll * (240ll << 20);  // lab 07's r, p and Ap (3 x 80 MB) allocated per call and never freed
  CHECK(labkit::keeps_device_memory(c));
  CHECK_THAT(speed_problem(c, 1.0, 1.5, "memcpy", "step 4"), ContainsSubstring("kept device memory call after call"));
  CHECK_THAT(speed_problem(c, 1.0, 1.5, "memcpy", "step 4"), ContainsSubstring("2400.0 MiB in all (about 240.0"));
  c.kept_calls = 5;  // half the calls: one allocation kept for good and noise do not make a majority
  CHECK_FALSE(labkit::keeps_device_memory(c));
  c.kept_calls = 1;  // a cache or a workspace made once (one call), however large
  c.kept_bytes = 8ll << 30;
  CHECK_FALSE(labkit::keeps_device_memory(c));
  CHECK(speed_problem(c, 1.0, 1.5, "memcpy", "step 4") == "");
  c.kept_calls = 9;  // a few KiB a call: under the limit in all
  c.kept_bytes = 9 * 4096;
  CHECK_FALSE(labkit::keeps_device_memory(c));
  c.kept_measured = c.kept_calls = 2;  // too few calls to tell
  c.kept_bytes = 1ll << 30;
  CHECK_FALSE(labkit::keeps_device_memory(c));
  // per_unit_difference adds the two runs' counts
  labkit::SpeedComparison s, l;
  s.kept_measured = l.kept_measured = 3;
  s.kept_calls = 1;
  l.kept_calls = 3;
  s.kept_bytes = 20ll << 20;
  l.kept_bytes = 60ll << 20;
  const auto d = labkit::per_unit_difference(s, l, 96);
  CHECK(d.kept_measured == 6);
  CHECK(d.kept_calls == 4);
  CHECK(d.kept_bytes == (80ll << 20));
  CHECK(labkit::keeps_device_memory(d));
}

TEST_CASE("max_ratio in the rubric", "[cpu][rubric]") {
  const char* base = "lab='1'\n[[gate]]\nid='s'\nkind='speed'\nmetric='ratio'\nthreshold=1.5\n";
  auto r = labkit::parse_rubric(std::string(base) + "max_ratio=2.5\n", "r.toml");
  REQUIRE(r.find("s")->max_ratio);
  CHECK(*r.find("s")->max_ratio == 2.5);
  CHECK_FALSE(labkit::parse_rubric(base, "r.toml").find("s")->max_ratio);
  CHECK_THROWS_WITH(labkit::parse_rubric(std::string(base) + "max_ratio=1.5\n", "r.toml"),
                    ContainsSubstring("max_ratio must be above the threshold"));
}
TEST_CASE("needs_shared_memory in the rubric: correctness gates only, true or false", "[cpu][rubric]") {
  const char* base = "lab='1'\n[[gate]]\nid='c'\nkind='correctness'\n";
  const auto on = labkit::parse_rubric(std::string(base) + "needs_shared_memory=true\n", "r.toml");
  CHECK(on.find("c")->needs_shared_memory);
  CHECK_FALSE(labkit::parse_rubric(base, "r.toml").find("c")->needs_shared_memory);
  CHECK_THROWS_WITH(labkit::parse_rubric(std::string(base) + "needs_shared_memory='yes'\n", "r.toml"),
                    ContainsSubstring("needs_shared_memory takes true or false"));
  CHECK_THROWS_WITH(labkit::parse_rubric("lab='1'\n[[gate]]\nid='s'\nkind='speed'\nmetric='ratio'\nthreshold=1.5\n"
                                         "needs_shared_memory=true\n",
                                         "r.toml"),
                    ContainsSubstring("needs_shared_memory is for correctness gates"));
  // The steps about shared-memory tiles say so in their rubrics (lab 01 step 3 is one; step 2, the naive kernel, not).
  const auto r = labkit::load_rubric("../../labs/01_matmul/rubric.toml");
  CHECK(r.find("step3.correct")->needs_shared_memory);
  CHECK_FALSE(r.find("step2.correct")->needs_shared_memory);
}
TEST_CASE("every speed gate of labs 01, 02, 03 and 05 has a ceiling above its threshold and reference",
          "[cpu][rubric]") {
  // Run from common/tests (the CTest working directory).
  for (const char* lab : {"01_matmul", "02_transpose", "03_access_patterns", "05_thrust_saxpy"}) {
    const auto r = labkit::load_rubric(std::string("../../labs/") + lab + "/rubric.toml");
    for (const auto& g : r.gates) {
      if (g.kind != "speed") continue;
      INFO(lab << " " << g.id);
      REQUIRE(g.max_ratio);
      CHECK(*g.max_ratio > *g.threshold);
      // The reference solution must pass with room to spare on both sides.
      if (g.reference) CHECK(*g.max_ratio > *g.reference);
    }
  }
}

TEST_CASE("the per-unit difference of two run lengths cancels the fixed cost", "[cpu][timing]") {
  labkit::SpeedComparison shorter, longer;
  // 16 and 48 iterations: baseline 2 ms per iteration + 5 ms fixed, candidate 1 ms per iteration + 9 ms fixed.
  shorter.baseline.median_ms = 37, shorter.candidate.median_ms = 25;
  longer.baseline.median_ms = 101, longer.candidate.median_ms = 57;
  shorter.baseline.repeats = 12, longer.baseline.repeats = 10;
  shorter.candidate.repeats = 9, longer.candidate.repeats = 11;
  auto c = labkit::per_unit_difference(shorter, longer, 32);
  CHECK(c.baseline.median_ms == 2.0);
  CHECK(c.candidate.median_ms == 1.0);
  CHECK(c.ratio == 2.0);
  CHECK(c.baseline.repeats == 10);
  CHECK(c.candidate.repeats == 9);
  CHECK(!c.escaped);
  // Work hidden from the timer in either run is hidden from the difference too.
  longer.escaped = true, longer.escaped_ms = 3;
  c = labkit::per_unit_difference(shorter, longer, 32);
  CHECK(c.escaped);
  CHECK(c.escaped_ms == 3);
  // A candidate whose longer run is no slower has no meaningful rate: ratio 0, never infinite.
  longer.candidate.median_ms = 25;
  CHECK(labkit::per_unit_difference(shorter, longer, 32).ratio == 0);
}

TEST_CASE("the per-unit difference carries the stalls of both run lengths", "[cpu][timing]") {
  labkit::SpeedComparison shorter, longer;
  shorter.baseline.median_ms = 7;
  shorter.candidate.median_ms = 8;
  longer.baseline.median_ms = 49;
  longer.candidate.median_ms = 50;
  shorter.stall_rounds = 2;
  longer.stall_rounds = 6;
  longer.stalled = true;
  const auto d = labkit::per_unit_difference(shorter, longer, 96);
  CHECK(d.stall_rounds == 8);
  CHECK(d.stalled);
  longer.stalled = false;
  CHECK_FALSE(labkit::per_unit_difference(shorter, longer, 96).stalled);
}

TEST_CASE("a fixed cost beyond the allowance counts as time of the units", "[cpu][timing]") {
  labkit::SpeedComparison shorter, longer;
  // 16 and 112 iterations; the baseline 1 ms per iteration and no fixed cost.
  shorter.baseline.median_ms = 16, longer.baseline.median_ms = 112;
  // An honest candidate: 1.25 ms per iteration + 3 ms fixed. Within an allowance of 8 ms nothing changes.
  shorter.candidate.median_ms = 23, longer.candidate.median_ms = 143;
  auto honest = labkit::per_unit_difference(shorter, longer, 96);
  auto limited = labkit::limit_fixed_cost(honest, longer, 112, 8);
  CHECK(limited.candidate.median_ms == honest.candidate.median_ms);
  CHECK(limited.ratio == honest.ratio);
  CHECK(limited.note.empty());
  // The same solver stalling (128 - max_iter) * 0.25 ms: the short call gains 28 ms, the long one 4 ms, so the
  // difference says 1.0 ms per iteration (ratio 1.0, up from 0.8) with an implied fixed cost of 35 ms.
  shorter.candidate.median_ms = 23 + 28, longer.candidate.median_ms = 143 + 4;
  auto gamed = labkit::per_unit_difference(shorter, longer, 96);
  CHECK(gamed.ratio == Catch::Approx(1.0));
  limited = labkit::limit_fixed_cost(gamed, longer, 112, 8);
  CHECK(limited.candidate.median_ms == Catch::Approx((147.0 - 8) / 112));
  CHECK(limited.ratio == Catch::Approx(112.0 / 139));  // 0.81: at most 8 / 112 of an iteration gained
  CHECK(limited.ratio < 0.85);
  CHECK(limited.note.find("allowed for its fixed cost") != std::string::npos);
  // The note reaches the failure message of a missed threshold.
  const std::string why = labkit::gate::speed_problem(limited, 0.9, std::nullopt, "base", "cand");
  CHECK(why.find("allowed for its fixed cost") != std::string::npos);
}

TEST_CASE("a recorded scope's function is its label up to the first ')'", "[cpu][launches]") {
  using labkit::gate::detail::function_of;
  CHECK(function_of("step 6 (count_nonfinite), n = 9") == "step 6 (count_nonfinite)");
  CHECK(function_of("step 6 (count_nonfinite)") == "step 6 (count_nonfinite)");
  CHECK(function_of("step 2 (axpy: y = a x + y), n = 1000, a = 1.5") == "step 2 (axpy: y = a x + y)");
  CHECK(function_of("step 1 (copy_offset), n = 33 (offsets 0-32)") == "step 1 (copy_offset)");
  CHECK(function_of("a label without parentheses") == "a label without parentheses");
  CHECK(function_of("") == "");
}
