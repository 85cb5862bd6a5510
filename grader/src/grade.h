// `labgrade [LAB...]`: grading this checkout's own tree (student/ or, with --solutions, solutions/), and the
// pieces batch grading shares with it.
#pragma once
#include <string>
#include <vector>

#include "labpool.h"
#include "recipe.h"
#include "runner.h"
#include "scoring.h"

namespace labgrade {

struct OutputFiles {
  std::string json, junit, csv, markdown;
};

struct GradeOptions {
  std::vector<std::string> labs;
  bool solutions = false;
  BuildOptions build;
  OutputFiles outputs;
  bool sanitize = false, sanitize_strict = false;
  bool no_sanitizer_checks = false;  // skip the default memory and race checks (check_with_sanitizers)
  double gate_timeout = 0;  // overrides every rubric's gate_time_limit_s when > 0
  bool no_hidden = false;   // grade as a student would see it (no hidden gates)
  bool color = false;
  int lab_jobs = 0;         // labs run at once (labpool.h); 0: default_lab_jobs for the GPU and the CPUs
};

// Exit status: 0 every gate passed, 1 some did not, 2 the grader could not do its job.
int grade_main(const GradeOptions& opts);

// Hidden gates are graded when the lab's tree has its hidden tests (the instructor's tree): then the gate binary
// was built with them. The student release has neither the tests nor the rubric entries.
bool lab_has_hidden_tests(const Recipe& r);

// The rubric's time limits, with the --gate-timeout override.
void apply_time_limits(GateRunSpec& spec, const labkit::Rubric& rubric, double gate_timeout_override);

// Runs the gates (and the sanitizer passes) of one lab and applies its rubric. The untimed gates and the speed gates
// run in processes of their own, the speed gates in `turns`' exclusive turn (labpool.h: other labs' untimed runs
// may share the GPU with the untimed ones; null: the lab is alone). Hidden gates run after every visible one.
// `used_s`: the lab time run_speed_gates already took (it counts against the same lab time limit).
// A speed process whose gates lost points on an unsteady timing (or, where spec.busy_retimes allows, on any finished
// timing) is followed by a second one for those gates in the quiet turn, whose timing decides (grade.cpp's
// time_lost_again); run_speed_gates does the same.
void run_and_score(LabResult& lab, const GateRunSpec& spec, bool sanitize, bool strict, GpuTurns* turns = nullptr,
                   double used_s = 0);

// The lab's visible speed gates alone, in `turns`' exclusive turn; returns the lab time they took. A caller that
// grades several labs side by side runs these for every lab before it starts any lab's untimed gates: the speed
// gates then take their turns one after another on an idle GPU, instead of each waiting for the untimed runs (and
// checks) of the labs already running to end while no new one may start (on an H200, --solutions spent half of its
// wall time so). run_and_score then leaves out the gates that already have an outcome.
// `held`: the process start_speed_gates started for it, if any.
double run_speed_gates(LabResult& lab, const GateRunSpec& spec, GpuTurns* turns,
                       std::shared_ptr<HeldStart> held = nullptr);
// Starts the process of the lab's speed gates ahead of its turn (start_held, runner.h): called while the previous
// lab's speed gates are timed, it hides the next one's start-up. Null when it cannot (a sandbox, no speed gates).
std::shared_ptr<HeldStart> start_speed_gates(const LabResult& lab, const GateRunSpec& spec);

// not_graded: markdown_report's list of what a batch did not grade.
void write_outputs(const std::vector<SubmissionResult>& results, const OutputFiles& files, const std::string& title,
                   const std::vector<std::string>& not_graded = {});

}  // namespace labgrade
