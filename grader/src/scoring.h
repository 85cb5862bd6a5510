// What a grading run produces, how the result channel of a gate binary is read, and how the rubric turns the
// reported outcomes into points.
//
// The channel (see common/include/labkit/report.h) is written by code that shares its process with the
// student's code, so it is read defensively: only a well-ordered run_start / gate_start / metric / gate_end
// sequence counts, a gate may end only once, and anything out of protocol taints the gate that was running when
// it appeared (that gate then fails with a "result channel tampered with" diagnosis). Console text is never read.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "labkit/rubric.h"

#include "labkit/channel_auth.h"

namespace labgrade {

enum class Status {
  passed,
  failed,
  skipped,          // no CUDA device (or the gate chose to skip)
  not_implemented,  // the step still throws labkit::NotImplemented
  crashed,          // the process died inside the gate, or the CUDA context was destroyed
  timeout,          // killed by the grader: the gate (or the lab) ran past its time limit
  missing,          // the rubric lists the gate but the gate binary has none of that name
  build_failed,     // the submission did not compile or link
  not_submitted,    // the submission has no student source for this lab (0 points, not a build failure)
  refused,          // the compiled student object was refused before linking (objcheck.h: symbols it may not
                    // define or use, raw system calls)
};
std::string to_string(Status s);
std::string fmt_number(double v);  // "%.4g": the figures in diagnoses
Status status_from_string(const std::string& s);  // unknown -> failed

struct Metric {
  double value = 0;
  std::string unit;
};

struct GateResult {
  std::string id, title, kind;
  bool hidden = false;
  double points = 0, max_points = 0;
  Status status = Status::missing;
  std::string message;  // the diagnosis shown under a failure
  double seconds = 0;
  std::map<std::string, Metric> metrics;
  // Lists the gate wrote for the grader (report::names), mangled kernel names: "step_kernels", every kernel its
  // steps ran, which the default memcheck instruments; "shared_memory_kernels", the steps' own kernels with shared
  // memory, which the default racecheck instruments (sanitizers.cpp).
  std::map<std::string, std::vector<std::string>> names;
  // Speed gates: the figure the threshold applies to, as re-checked by the grader.
  std::string metric_name;
  std::optional<double> threshold, reference, measured;
  std::optional<double> floor;  // partial credit from floor (0 points) to threshold (full), see apply_rubric
  std::optional<double> max_ratio;  // a `ratio` above it is beyond the hardware: re-checked by apply_rubric too
  std::string hint;
  int gpus = 1;           // the GPUs the gate needs (its rubric entry's `gpus`)
  // The rubric's checks of the machine code of the kernels the gate's recorded calls ran (sass.h).
  bool needs_shared_memory = false;
  std::vector<std::string> needs_instructions;
  std::vector<std::string> instruction_archs;
  std::vector<std::string> forbid_instructions;
  std::string sanitizer;  // compute-sanitizer findings attributed to this gate (--sanitize)
};

struct SanitizerFinding {
  std::string tool;  // memcheck | racecheck
  int errors = 0;
  std::string excerpt;  // the first reports, trimmed
};

struct LabResult {
  std::string lab, name, title;
  std::vector<GateResult> gates;
  double compile_seconds = 0, run_seconds = 0;
  std::string device;                 // from run_start
  std::optional<std::uint64_t> seed;  // Catch2's --rng-seed of the (first) run
  std::vector<std::string> notes;     // restarts, tampering, sanitizer skipped...
  std::vector<SanitizerFinding> sanitizer;
  std::string leaderboard_gate, leaderboard_metric, leaderboard_order = "desc";
  std::optional<double> leaderboard_value;

  double score() const;
  double max_score() const;
  bool all_passed() const;
};

struct SubmissionResult {
  std::string student;  // "" for a local run
  std::vector<LabResult> labs;
  double compile_seconds = 0, run_seconds = 0;
  std::string error;  // the grader itself failed for this submission (never the student's fault)
  // The isolation the submission ran under (isolation_name(): bwrap, uid-only, none; "local" for `labgrade` on
  // one's own tree): stated in every report.
  std::string isolation;

  double score() const;
  double max_score() const;
  bool all_passed() const;
};

nlohmann::json to_json(const SubmissionResult& r);
SubmissionResult submission_from_json(const nlohmann::json& j);

// Notes about the run of a lab's hidden gates start with this: student-visible writers leave them out.
inline constexpr const char* kHiddenRunNote = "[hidden gates] ";
// A note without kHiddenRunNote (the same note when it has none): what it says, whichever visibility it is about.
inline std::string without_hidden_mark(const std::string& note) {
  const std::string mark = kHiddenRunNote;
  return note.compare(0, mark.size(), mark) == 0 ? note.substr(mark.size()) : note;
}
// Puts kHiddenRunNote before lab notes [from, end) that do not have it yet.
inline void mark_hidden_notes(std::vector<std::string>& notes, std::size_t from) {
  for (std::size_t i = from; i < notes.size(); ++i)
    if (without_hidden_mark(notes[i]).size() == notes[i].size()) notes[i] = kHiddenRunNote + notes[i];
}
// Notes that say another process computed on the student's GPU when its speed gates were timed (batch.cpp):
// the class report lists those students for a second grading.
inline constexpr const char* kSharedGpuNote = "[shared GPU] ";
// Notes that say a speed gate was timed again with the machine quiet after an unsteady first timing (grade.cpp):
// the class report lists them with both figures.
inline constexpr const char* kRetimedNote = "[timed again] ";
// Notes of the object check that are not refusals but ask the instructor to read a file's code (batch.cpp,
// objcheck.h's find_hidden_syscalls): the class report lists them.
inline constexpr const char* kObjectReviewNote = "[object code to read] ";

// ---- the rubric --------------------------------------------------------------------------------------------

// A speed gate that finished its timing and loses points for its figure: it reported `metric_name` below its
// threshold, and failed (below the floor the gate binary judged against) or passed (partial credit). A gate that
// failed with its figure at or above the threshold failed for something else (work left running, a ratio beyond the
// hardware), which a second timing is not for. Before apply_rubric, from what the gate binary reported.
bool lost_points_with_timing(const GateResult& g);

// The gates to grade, in rubric order: hidden gates only when include_hidden.
std::vector<const labkit::RubricGate*> graded_gates(const labkit::Rubric& rubric, bool include_hidden);

// A LabResult with one entry per graded gate, all `missing` until the runner fills them in.
LabResult make_lab_result(const labkit::Rubric& rubric, const std::string& lab_name, bool include_hidden);
// The gates without an outcome yet whose rubric entry needs more GPUs (`gpus`) than the lab sees here: `skipped`,
// with a message saying so, and never run. The gate binary would skip them too, but only once started: a speed
// process whose every gate is skipped here is not started at all, and takes no exclusive turn of the GPU (labs 08
// and 09 on one GPU: about 2 s of the turn). `visible` <= 0 (no GPU, or not known) changes nothing: the binary then
// says what it found.
void skip_gates_needing_more_gpus(LabResult& lab, int visible);

// Every gate of the lab gets the same status and message (build failures, "not submitted").
void set_all(LabResult& lab, Status status, const std::string& message);

// Points, and the speed re-check: a speed gate passes only when the gate says passed AND the metric named by the
// rubric was reported AND it reaches the threshold; the binary's own verdict is not trusted alone.
// Partial credit: a speed gate whose rubric entry has a `floor` (GateResult::floor) and that the binary passed
// (it judged against the floor: see gate_rubric_text) gets max_points * (measured - floor) / (threshold - floor)
// points for a measured figure in [floor, threshold), with status failed and a message that says so; below the
// floor, or failed by the binary for any reason, 0. Without a floor: all or nothing.
void apply_rubric(LabResult& lab);

// The rubric text handed to the gate binary (--labkit-rubric) instead of the rubric file itself:
//   - a gate with a `floor` gets threshold = floor (and no floor key), so that the binary passes a figure that
//     earns partial credit and the grader applies the curve (apply_rubric) against the real threshold;
//   - with redact_hidden, hidden gates keep id, kind, points, metric and thresholds (the gates need them) but
//     lose their title and hint, which the binary would otherwise copy into messages.
std::string gate_rubric_text(const std::string& rubric_toml, bool redact_hidden);

// ---- the result channel ------------------------------------------------------------------------------------

struct GateOutcome {
  Status status = Status::failed;
  std::string message;
  double seconds = 0;
  std::map<std::string, Metric> metrics;
  std::map<std::string, std::vector<std::string>> names;
  bool tainted = false;
  std::string taint_reason;
};

// Reads the JSON lines of one run of a gate binary, incrementally (bytes arrive from a socket or pipe in any chunking).
class ChannelParser {
 public:
  // From now on only lines signed with `key` in order count (labkit/channel_auth.h); any other line is out of
  // protocol. Without a key (a launcher's pipe, the grader's scripted stand-ins) lines are taken as they are.
  void require_key(const labkit::report::auth::Key& key) { key_ = key; }
  std::size_t unsigned_lines() const { return unsigned_lines_; }  // lines refused for their tag
  void feed(std::string_view bytes);
  void finish();  // the writer is gone: a trailing partial line is dropped

  bool run_started() const { return run_started_; }
  bool run_ended() const { return run_ended_; }
  const std::string& open_gate() const { return open_gate_; }  // "" when no gate is running
  const std::map<std::string, GateOutcome>& ended() const { return ended_; }
  const std::vector<std::string>& ended_order() const { return ended_order_; }
  const std::vector<std::string>& anomalies() const { return anomalies_; }
  const std::set<std::string>& started() const { return started_; }
  const std::string& device() const { return device_; }
  // Whether the gate binary closed /proc to writes before the student's code ran ("closed", or "open: why").
  const std::string& proc_writes() const { return proc_writes_; }
  std::optional<std::uint64_t> seed() const { return seed_; }
  // Gate events seen so far (gate_start and gate_end): the runner uses it to notice progress.
  std::size_t gate_events() const { return gate_events_; }
  // Metrics of the gate that is still open (a gate killed by a timeout keeps what it had measured).
  const std::map<std::string, Metric>& open_metrics() const { return open_metrics_; }
  // Why the open gate is no longer trusted ("" when it is).
  const std::string& open_taint() const { return open_taint_; }

 private:
  void line(std::string_view l);
  void anomaly(const std::string& what);

  std::string pending_;
  bool run_started_ = false, run_ended_ = false;
  std::string open_gate_;
  std::map<std::string, Metric> open_metrics_;
  std::map<std::string, std::vector<std::string>> open_names_;
  std::string open_taint_;
  std::map<std::string, GateOutcome> ended_;
  std::vector<std::string> ended_order_;
  std::set<std::string> started_;
  std::vector<std::string> anomalies_;
  std::string device_;
  std::string proc_writes_;
  std::optional<std::uint64_t> seed_;
  std::size_t gate_events_ = 0;
  std::size_t bytes_ = 0;
  std::optional<labkit::report::auth::Key> key_;
  std::uint64_t next_seq_ = 0;  // the number the next signed line must carry
  std::size_t unsigned_lines_ = 0;
};

}  // namespace labgrade
