// What runner.cpp (the graded run's attempt loop) shares with sanitizers.cpp (the memory and race checks, which run
// the same loop with compute-sanitizer in front of the gate binary). Internal to the grader: runner.h is the
// interface.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runner.h"

namespace labgrade::detail {

using Clock = std::chrono::steady_clock;
inline double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One start of the gate binary: how long it ran and where its console log went.
struct AttemptLog {
  double seconds = 0;
  fs::path log;
};

// Runs `gate_ids` as the graded run does (the binary restarted after a crash, within the lab's limits), records
// their verdicts in `lab`, and returns one AttemptLog per start of the binary.
std::vector<AttemptLog> run_gates_logged(LabResult& lab, const GateRunSpec& spec,
                                         const std::vector<std::string>& gate_ids);

void add_note(LabResult& lab, const std::string& note);  // at most 8 of a kind and 40 per lab (see runner.cpp)
std::string limit_text(double s);                         // "120 s"

}  // namespace labgrade::detail
