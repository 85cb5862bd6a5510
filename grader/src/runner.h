// Running one lab's gate binary until every graded gate has an outcome.
//
// The binary writes its results to an inherited socket (fd 3, which the gate uses as it is: it cannot be opened
// again by path, see open_channel in runner.cpp): nothing in the file system that a submission could overwrite, and the grader sees each event the moment it is written, so it
// knows which gate is running and for how long. A gate_start without its gate_end means the process died or was
// killed inside that gate; the binary is then started again with the gates that are left (passed to Catch2 as
// test names), so one crash costs one gate, not the lab.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "labkit/channel_auth.h"
#include "sandbox.h"
#include "sass.h"
#include "scoring.h"

namespace labgrade {

class HeldStart;

struct GateRunSpec {
  fs::path exe;                    // the gate binary
  fs::path rubric;                 // passed as --labkit-rubric (the grader's copy, never the submission's)
  fs::path log_dir;                // console output of each attempt: <log_dir>/lab<NN>.<what><attempt>.log
  // Time limits count the gate binary's own progress (grader/src/progress.h: wall time minus the time it waited
  // for a CPU), so a busy grading machine never turns a healthy submission into a timeout. Each limit also has a
  // wall-clock backstop of wall_factor times the limit, and a gate's processes together may use at most the gate
  // limit times the number of usable CPUs of CPU time (a fork bomb slows its own progress, not its CPU use).
  double gate_time_limit_s = 120;  // any one gate
  double quiet_time_limit_s = 0;   // start-up and silence between gates; 0: max(gate limit, 60 s)
  double time_limit_s = 600;       // the whole lab, restarts included
  double wall_factor = 10;
  // The most the lab's files may take on disk while its gate binary runs (diskuse.h: process.writable, and what the
  // slot's uid owns in /tmp, /var/tmp and /dev/shm), looked at about once a second; beyond it the binary is killed,
  // the open gate fails and the rest are not run. 0: not watched (a student's own machine).
  std::uintmax_t disk_limit_bytes = 0;
  // How the process is started (sandbox, uid slot, environment, limits). argv/output/channel are filled in.
  ProcessSpec process;
  std::vector<std::string> prefix;  // e.g. compute-sanitizer --tool memcheck ... (empty: run directly)
  // The recipe's launcher (mpirun -np 4 ...), between prefix and the gate binary. The launcher does not hand the
  // channel descriptor on, so the gate binary is told to open its parent's (the launcher's): "@parent:3".
  std::vector<std::string> launcher;
  std::string log_tag = "run";      // "run", "memcheck", "racecheck"
  // The grader hands the gate binary a fresh key in the channel and takes only lines signed with it
  // (labkit/channel_auth.h). Off only for the grader's own tests, whose stand-in gate binaries are shell scripts;
  // under a launcher the channel is a pipe that carries no key, and lines are taken unsigned.
  bool signed_channel = true;
  // The default memory and race checks after the graded run (check_with_sanitizers): on unless the instructor
  // or student turns them off (--no-sanitizer-checks); the rubric's sanitizer_time_limit_s per tool.
  bool sanitizer_checks = true;
  double sanitizer_time_limit_s = 120;
  // The CPUs of the speed gates' process (empty: process.limits.cpus, as every other process): a batch keeps them
  // free of compiles and of other workers' runs, so that a timed step's host round trips never wait for a CPU.
  std::vector<int> speed_cpus;
  // Called on the grader's thread each time a gate starts (its id), for a progress display; may be empty.
  std::function<void(const std::string& gate)> on_gate_start;
  // The first attempt's process, already started and waiting for its turn (start_held); used when it was started
  // for the same gates, else left to end unused.
  std::shared_ptr<HeldStart> held;
  // The gate binary's machine code (sass.h), when it was read before the run: a batch reads it in the sandbox of the
  // student's compiles, where none of the student's code runs. Not set: run_and_score reads it itself, directly,
  // unless the process is sandboxed (a batch never parses a submission's binary as the grader's user).
  std::shared_future<SassDump> sass;
  // A batch whose workers run side by side: how many more of this student's speed processes may be timed again in
  // the quiet turn because a gate lost points with a finished timing, unsteady or not (grade.cpp's
  // time_lost_again; shared by the student's labs). Null: only unsteady timings are timed again.
  std::shared_ptr<std::atomic<int>> busy_retimes;
  // A batch: how many more of this student's speed processes may be timed again because a gate's timing was
  // unsteady (`stalled`), shared by its labs. Each second timing holds every other worker's new runs until it ends,
  // so code that makes every lab's timing unsteady must not buy a quiet turn per lab and visibility. Null: no bound
  // (a local run grades one student; still once per process run).
  std::shared_ptr<std::atomic<int>> unsteady_retimes;
};

// A gate process started ahead of its turn on the GPU, waiting in labkit's earliest constructor (after the libraries
// are loaded and cuInit, before any code of the student's runs) for the grader to release a file lock
// (LABKIT_HOLD_START, gates_main.cpp). The next lab's speed gates start this way while the current lab's are
// timed: their 0.4-1 s of start-up no longer waits in line for the GPU. Destroying it unused kills the process.
// Only for processes run as the grader's own user (no sandbox): under a dedicated uid the sweep that ends the
// timed lab's leftovers would end the waiting process too.
class HeldStart {
 public:
  ~HeldStart();
  HeldStart(const HeldStart&) = delete;
  HeldStart& operator=(const HeldStart&) = delete;
  const std::vector<std::string>& gates() const { return gates_; }
  bool waiting() const { return process_ != nullptr; }  // not yet taken over by a run

 private:
  HeldStart() = default;
  friend std::shared_ptr<HeldStart> start_held(const GateRunSpec&, const std::vector<std::string>&);
  friend struct HeldAccess;
  std::vector<std::string> gates_;
  fs::path log_, turn_file_;
  int turn_fd_ = -1, read_fd_ = -1;
  std::optional<labkit::report::auth::Key> key_;
  std::unique_ptr<Process> process_;
};

// Starts `spec`'s gate binary for `gate_ids` as its first attempt would, held before the student's code until a
// run_gates with spec.held set to it takes it over. Null (nothing started) under a sandbox, or if the lock file
// cannot be made.
std::shared_ptr<HeldStart> start_held(const GateRunSpec& spec, const std::vector<std::string>& gate_ids);

// Runs the gates of `lab` whose ids are in `gate_ids` (all graded gates when empty) and stores each outcome
// (status, message, seconds, metrics) in lab.gates. Does not apply the rubric's points (see apply_rubric).
// Returns the part of the lab's time limit the run used: the gate binary's progress over every attempt, which on a
// busy machine is far less than lab.run_seconds (the clock).
double run_gates(LabResult& lab, const GateRunSpec& spec, std::vector<std::string> gate_ids = {});

// --sanitize: runs the lab's correctness gates (and cpu gates) again under compute-sanitizer with `tool`
// (memcheck or racecheck), one process per gate so that every report belongs to one gate, and parses
// "ERROR SUMMARY: N errors" / "RACECHECK SUMMARY: N hazards". Findings are listed per gate and per lab; with
// strict, a gate with findings fails.
// `hidden`: only the visible gates (false) or only the hidden ones (true); unset: both.
void run_sanitizer(LabResult& lab, const GateRunSpec& spec, const std::string& tool, bool strict,
                   std::optional<bool> hidden = std::nullopt);

// The default memory and race checks: the lab's correctness gates that passed the graded run are run again under
// compute-sanitizer, memcheck (out-of-bounds and misaligned accesses) and racecheck (shared-memory races) at the
// same time (two processes, each with its own time limit; the lab's time is the longer of the two),
// with LABKIT_SANITIZER set so that the gates keep only their small and odd shapes, which reach every bound and
// every barrier. A healthy lab costs one process per tool (visible and hidden gates apart); only when that process
// reports an error are its gates run again one per process, so that each report belongs to one gate, and a gate
// with its own report fails ("compute-sanitizer memcheck: 2 error(s)" and the sanitizer's first lines). What the
// time limit (spec.sanitizer_time_limit_s per tool) leaves unchecked is said in a note, never held against a gate.
// `cpu` gates get memcheck too (they may call the student's host code, and it costs nothing in the same process).
// `hidden`: only the visible gates (false) or only the hidden ones (true); unset: both, visible first.
void check_with_sanitizers(LabResult& lab, const GateRunSpec& spec, std::optional<bool> hidden = std::nullopt);

// Counts the errors in a compute-sanitizer log: the larger of its summary ("ERROR SUMMARY: N errors", racecheck's
// "(N errors, M warnings)") and the reports it printed (a process killed before its summary still counts those).
// Racecheck warnings are not errors. Exposed for the tests.
int sanitizer_error_count(const std::string& log);
// A sanitizer run's log as the counts read it: whole up to 96 MiB, else its first and last 48 MiB.
std::string read_sanitizer_log(const fs::path& log);

// Escapes a gate id for use as a Catch2 test-spec argument (`,` `[` `*` ... are special there).
std::string catch2_test_arg(const std::string& gate_id);

}  // namespace labgrade
