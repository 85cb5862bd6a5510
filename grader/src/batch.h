// `labgrade batch SUBMISSIONS --out DIR`: grading a class.
//
// Each subfolder of SUBMISSIONS is one student. Only the files named by each recipe's student_sources are taken
// from it (tests, rubrics and everything else come from the grader's own tree), compiled and linked against the
// prebuilt gate objects, and run in the sandbox. Compiling runs on a pool of CPU jobs, running on one worker per
// GPU; a student's result is written atomically to OUT/<student>/result.json when it is complete, so a batch
// that is stopped and started again skips the students that are done and redoes the rest.
//
//   OUT/<student>/result.json    everything labgrade knows (the resume marker: written last)
//   OUT/<student>/results.json   Gradescope's format
//   OUT/<student>/logs/          compiler and console output (written by the grader, unreachable by the sandbox)
//   OUT/gradebook.csv, junit.xml, report.md   the class
//   OUT/.work/<n>-<student>/     scratch while a student is being graded (removed afterwards)
#pragma once
#include <string>
#include <vector>

#include "recipe.h"

namespace labgrade {

struct BatchOptions {
  fs::path submissions, out;
  std::vector<std::string> labs;
  BuildOptions build;
  int workers = 0;   // run workers (default: one per GPU, 1 without GPUs)
  std::string gpus;  // "0,1": a worker each; "0+1": one worker that sees both (default: every GPU CUDA sees)
  std::string sandbox = "auto";
  int jobs = 0;  // parallel compile jobs (default: the CPU cores)
  bool sanitize = false, sanitize_strict = false;
  bool no_sanitizer_checks = false;  // skip the default memory and race checks (check_with_sanitizers)
  double gate_timeout = 0;       // overrides the rubrics' gate_time_limit_s when > 0
  double compile_timeout = 300;  // per source file, and for the link
  double memory_gib = 16;        // host memory of one gate binary (RLIMIT_DATA, and memory.max with cgroups)
  // Disk one lab's gate binary may fill (its working folder, and /tmp, /var/tmp, /dev/shm under its uid):
  // GateRunSpec::disk_limit_bytes; 0: not watched.
  double disk_gib = 2;
  int max_processes = 0;         // processes + threads of one submission (0: 256, or 4 per core + 64 if more)
  bool keep_scratch = false;
  bool no_hidden = false;
  int lab_jobs = 0;  // labs of one student run at once on its GPU (labpool.h); 0: default_lab_jobs
  // With several workers, how many of a student's speed processes may be timed again in the quiet turn because a
  // gate lost points with a finished timing, unsteady or not (GateRunSpec::busy_retimes; unsteady timings are
  // always timed again). One worker: no other worker's runs to slow its timings, none.
  int busy_retimes = 3;
  // How many of a student's speed processes may be timed again because a gate's timing was unsteady (`stalled`) and
  // lost points (GateRunSpec::unsteady_retimes). A healthy workbook on a busy machine needs one or two; a workbook
  // whose every lab makes its own timing unsteady would otherwise hold the other workers once per lab.
  int unsteady_retimes = 4;
};

int batch_main(const BatchOptions& opts);
// `labgrade merge OUT PART_OUT...`: the class outputs (gradebook.csv, junit.xml, report.md) of several batches over
// disjoint students (the parts of a cluster run), written by the same writers from every part's
// <student>/result.json. A student in two parts: error, nothing written (2). With `submissions`, students of that
// folder without a result in any part are listed (exit 1).
int merge_main(const fs::path& out, const std::vector<fs::path>& parts, const fs::path& submissions);

// Copies the submission's files for one lab (only the recipe's student_sources, regular files, no symbolic link
// anywhere on the way, at most 4 MiB each) to dest/<source>. Returns "" or what is wrong with the submission;
// *not_submitted (when given) tells whether that is "none of the lab's student files is there" (status
// not_submitted) rather than a broken submission (build_failed).
// A step file (stepK_*.cu) that is absent is no problem: it is left out and (*present)[k] stays false, so that
// the skeleton's stands in for it (stepbuild.h). Names come from the recipe only, never from the submission.
std::string copy_student_sources(const fs::path& submission, const Recipe& recipe, const fs::path& dest,
                                 bool* not_submitted = nullptr, std::vector<bool>* present = nullptr);

}  // namespace labgrade
