// A lab's rubric.toml: its gates with points, speed thresholds and visibility. The gate binaries read their
// thresholds from it at run time and the grader reads points from it, so an instructor changes grading by
// editing the file, without recompiling.
//
//   lab = "01"
//   title = "Naive to tiled matrix multiply"
//   time_limit_s = 300            # whole gate binary
//   gate_time_limit_s = 60        # any single gate
//   sanitizer_time_limit_s = 120  # the default memory and race checks: one compute-sanitizer tool over the lab's
//                                 # passed correctness gates (their small shapes); past it the rest is unchecked
//   expected_run_s = 12           # optional: what the reference's untimed gates and checks take alone on an H100;
//                                 # the grader starts the longest labs first before it has timed any run itself
//   gpus = 2                      # optional (default 1): the GPUs the lab's multi-GPU gates need; where fewer are
//                                 # visible they report `skipped`, and a batch whose workers see fewer warns
//   [leaderboard]                 # the headline figure for the class leaderboard
//   gate = "step5.speed"
//   metric = "candidate_gflops"
//   order = "desc"
//   [[gate]]
//   id = "step2.speed"
//   title = "Step 2 (coalesced) is faster than step 1"
//   kind = "speed"                # cpu | correctness | speed
//   points = 5
//   metric = "ratio"              # the figure the gate reports that the threshold applies to
//   threshold = 2.0               # pass when metric >= threshold
//   reference = 6.1               # what the reference solution measured (H100), for information
//   floor = 1.2                   # optional: partial credit, linear from floor (0 points) to threshold (full)
//   max_ratio = 1.15              # speed gates: a ratio above this is beyond what the hardware allows: the gate
//                                 # fails (replayed results, work hidden from the timer)
//   allow_libraries = ["cublas"]  # kernels of these libraries may run inside the step this gate checks
//                                 # (cublas, cusparse, cub, thrust, nccl); any other non-student kernel fails
//                                 # the gate
//   needs_shared_memory = true    # correctness gates of a step whose idea is a tile in shared memory: the gate
//                                 # fails when none of the kernels of the student's own that its recorded calls
//                                 # ran used shared memory (an earlier step's kernel copied into the file); the
//                                 # grader also looks in those kernels' machine code for a shared-memory load
//   needs_instructions = ["DMMA"] # correctness gates of a step about an instruction (fp64 tensor cores): the
//                                 # grader fails the gate when no kernel of the student's own that its recorded
//                                 # calls ran has one of these SASS opcodes in its machine code (cuobjdump)
//   instruction_archs = ["sm_90"] # optional: judge needs_instructions only in the code for these architectures
//                                 # (where the instruction exists; elsewhere the gate is left as it is)
//   forbid_instructions = ["HMMA"] # correctness gates of a step whose idea excludes an instruction (lab 01's fp32
//                                 # SIMT kernels: no tensor cores): the grader fails the gate when a kernel of the
//                                 # student's own that its recorded calls ran holds one of these SASS opcodes
//   gpus = 2                      # optional (default 1, at most the lab's `gpus`): the GPUs this gate needs. Where
//                                 # the lab sees fewer (one or more), the grader reports it `skipped` without
//                                 # running it: a speed process whose every gate needs more GPUs is not started,
//                                 # and one GPU's exclusive turn is not spent on gates that could only skip
//   hidden = false                # hidden gates: not in the student release, visible after the due date
//   hint = "..."                  # shown with a failure
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace labkit {

struct RubricGate {
  std::string id, title, kind = "correctness";
  double points = 0;
  std::string metric;                // speed gates: name of the reported metric the threshold applies to
  std::optional<double> threshold;   // speed gates
  std::optional<double> reference;   // the reference solution's figure
  std::optional<double> floor;       // speed gates: partial credit from floor (0) to threshold (full points)
  std::optional<double> max_ratio;   // speed gates: above this the measurement is impossible, the gate fails
  std::vector<std::string> allow_libraries;  // library kernels allowed inside the step (empty: the student's own only)
  bool needs_shared_memory = false;          // some own kernel of the step's recorded calls must use shared memory
  std::vector<std::string> needs_instructions;  // SASS opcodes, one of which some such kernel's code must hold
  std::vector<std::string> instruction_archs;   // where needs_instructions is judged ("sm_80"; empty: everywhere)
  std::vector<std::string> forbid_instructions;  // SASS opcodes that no such kernel's code may hold (any architecture)
  int gpus = 1;                              // the GPUs the gate needs (at most the lab's)
  bool hidden = false;
  std::string hint;
};

struct Rubric {
  std::string lab, title, path;
  double time_limit_s = 600, gate_time_limit_s = 120;
  double sanitizer_time_limit_s = 120;  // per tool (memcheck, racecheck) and lab
  double expected_run_s = 0;            // the untimed part's usual length, for the labs' order (0: not given)
  int gpus = 1;                         // the GPUs the lab's multi-GPU gates need
  std::string leaderboard_gate, leaderboard_metric, leaderboard_order = "desc";
  std::vector<RubricGate> gates;

  const RubricGate* find(const std::string& id) const;
  double max_points() const;
};

class RubricError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws RubricError naming the file and the problem (missing id, duplicate id, threshold on a non-speed gate...).
Rubric load_rubric(const std::string& path);
Rubric parse_rubric(const std::string& toml_text, const std::string& source_name);

}  // namespace labkit
