// Helpers for writing gates with Catch2. Every GPU gate starts with LABKIT_REQUIRE_GPU().
#pragma once
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "labkit/compare.h"
#include "labkit/device.h"
#include "labkit/rubric.h"
#include "labkit/timing.h"

#define LABKIT_REQUIRE_GPU()                                             \
  do {                                                                   \
    if (!::labkit::has_device()) SKIP(::labkit::no_device_reason());     \
  } while (0)

namespace labkit::gate {

// The run's base seed (Catch2's --rng-seed; random each run unless given) mixed with a label.
std::uint64_t seed(std::string_view label);
std::uint64_t base_seed();
// "rerun: <binary> "step3.correct" --rng-seed 1234"
std::string reproduce_hint();

// The rubric this binary was started with (--labkit-rubric, or the lab's own rubric.toml).
const Rubric& rubric();
// The speed threshold of a gate (the current gate by default). Fails the gate if the rubric has none.
double threshold(std::string gate_id = "");

// Fails the current gate with the verdict's diagnosis (and how to reproduce it) unless it is ok.
void require(const Verdict& verdict, std::string_view context);

// Speed gate epilogue: reports baseline/candidate times, the figures of merit (work / time, e.g. GFLOP/s when
// work is in GFLOP) and the ratio, then checks ratio >= threshold(gate). The failure message names both
// figures, the threshold, the reference's ratio and the rubric's hint.
void require_speedup(const SpeedComparison& cmp, std::string_view baseline_name, std::string_view candidate_name,
                     double work, std::string_view work_unit);

}  // namespace labkit::gate
