#include "grade.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "devices.h"
#include "progress.h"
#include "sass.h"
#include "stepbuild.h"
#include "writers.h"

namespace labgrade {

bool lab_has_hidden_tests(const Recipe& r) {
  std::error_code ec;
  return fs::is_directory(r.lab_dir / "tests" / "hidden", ec);
}

void apply_time_limits(GateRunSpec& spec, const labkit::Rubric& rubric, double gate_timeout_override) {
  spec.gate_time_limit_s = gate_timeout_override > 0 ? gate_timeout_override : rubric.gate_time_limit_s;
  spec.time_limit_s = std::max(rubric.time_limit_s, spec.gate_time_limit_s);
  spec.sanitizer_time_limit_s = rubric.sanitizer_time_limit_s;
}

namespace {

// The spec of one process of run_one_process: its log names and what is left of the lab's time.
GateRunSpec process_spec(const GateRunSpec& spec, bool speed, bool hidden, double used) {
  GateRunSpec s = spec;
  s.log_tag = spec.log_tag + (speed ? "-speed" : "") + (hidden ? "-hidden" : "");
  s.time_limit_s = std::max(1e-3, spec.time_limit_s - used);
  s.held = nullptr;
  if (speed && !spec.speed_cpus.empty()) s.process.limits.cpus = spec.speed_cpus;
  return s;
}

// The figure a speed gate is judged on, for the notes: "ratio 0.4189", or its outcome when it has none.
std::string speed_figure(const GateResult& g) {
  const auto it = g.metrics.find(g.metric_name);
  if (g.metric_name.empty() || it == g.metrics.end()) return to_string(g.status);
  return g.metric_name + " " + fmt_number(it->second.value);
}

// One process for `todo` (the speed gates, or the untimed ones) of the visible or hidden gates, within what is left
// of the lab's time limit (`held`: that process, already started by start_speed_gates); returns the lab time it took.
double run_one_process(LabResult& lab, const GateRunSpec& spec, const std::vector<std::string>& todo, bool speed,
                       bool hidden, double used, GpuTurns* turns, std::shared_ptr<HeldStart> held = nullptr,
                       bool quiet = false) {
  GateRunSpec s = process_spec(spec, speed, hidden, used);
  if (quiet) s.log_tag += "-again";
  s.held = std::move(held);
  const std::size_t notes_before = lab.notes.size();
  double took = 0;
  {
    GpuTurns::Turn turn(turns, speed, quiet);
    if (speed && !spec.process.sweep_uid && spec.process.sandbox) {
      // The slot is shared by labs run side by side (their processes do not end each other's): nothing of them
      // runs now, so end what their code left behind before the timing, and after it as usual.
      sweep_uid(spec.process.sandbox, spec.process.slot);
      s.process.sweep_uid = true;
    }
    took = run_gates(lab, s, todo);
  }
  if (hidden)
    mark_hidden_notes(lab.notes, notes_before);
  return took;
}

// The speed gates of `todo` that lose points for their figure (lost_points_with_timing) with a timing labkit found
// unsteady (`stalled`: a median still more than 10 % above its side's lower quartile after the extra rounds) are timed
// once more, in a process of their own in the quiet turn (labpool.h: in a batch, no gate process runs anywhere on
// the machine beside it), and that second timing decides. Other workers' processes taking the GPU driver's locks
// stalled a healthy lab 07 step 4's calls on two H200s (0.42 of its floor against 1.02 alone); the gate's own extra
// rounds outlast a few such stalls, not a neighbour that keeps starting processes.
// In a batch whose workers run side by side (spec.busy_retimes), a gate that lost points with a finished timing is
// timed again too, unsteady or not, while the student has such second timings left: a neighbour can slow every call
// alike, which no spread shows (six reference workbooks on two H200s: lab 07 step 6 at 1.08 for one of them, 1.65-1.70
// alone, its three calls equally slow). Each costs the other workers the wait for the quiet turn (their runs under
// way end, none starts), so a student gets a few (BatchOptions::busy_retimes), not one per failed gate of a weak
// workbook.
// Once per process run: code that makes its own timing unsteady gets one more timing, not a stream of them, and gains
// nothing from it (the second timing replaces the first; a second run that ends without a verdict, crashed or out of
// time, leaves the first). In a batch, a few per student (spec.unsteady_retimes) for unsteady timings too: code that
// made every lab's timing unsteady would otherwise hold the other workers once per lab and visibility. The second run
// has the time the first had (`used`: the lab time before the first) and is not counted against the lab's limit: the
// grader chose to run it.
void time_lost_again(LabResult& lab, const GateRunSpec& spec, const std::vector<std::string>& todo, bool hidden,
                     double used, GpuTurns* turns) {
  const auto lost = [&](const GateResult& g) {
    return std::find(todo.begin(), todo.end(), g.id) != todo.end() && lost_points_with_timing(g);
  };
  // One of a shared count of second timings; a null count: `unbounded`.
  const auto take = [](const std::shared_ptr<std::atomic<int>>& count, bool unbounded) {
    if (!count) return unbounded;
    int left = count->load();
    while (left > 0 && !count->compare_exchange_weak(left, left - 1)) {
    }
    return left > 0;
  };
  bool steady = false, unsteady = false;
  for (const auto& g : lab.gates)
    if (lost(g)) (g.metrics.count("stalled") ? unsteady : steady) = true;
  // The quiet turn holds every worker of the machine: the second run gets at most kQuietRunCapFactor times what the
  // first took for the gates it repeats (kQuietRunMinS at least), so that code slow on purpose, or slow only in its
  // second run (it can count its runs in its lab's folder), holds the batch for that long and not for the rest of its
  // lab's time limit. (A first timing's seconds are the gate binary's wall clock, longer on a busy machine, which is
  // when a second timing is wanted: no first timing is refused for its length.)
  constexpr double kQuietRunCapFactor = 3, kQuietRunMinS = 20;
  double first_s = 0;
  for (const auto& g : lab.gates)
    if (lost(g)) first_s += g.seconds;
  // One second timing per process run, whatever the number of such gates in it: one of the student's busy-machine
  // timings when a steady timing lost points (the unsteady ones are timed along), else one of its unsteady ones, or,
  // those used up, a busy-machine one.
  bool busy = steady && take(spec.busy_retimes, false);
  bool for_unsteady = false;
  if (!busy && unsteady) {
    for_unsteady = take(spec.unsteady_retimes, true);
    if (!for_unsteady && !steady) busy = take(spec.busy_retimes, false);
  }
  if (unsteady && !busy && !for_unsteady)
    for (auto& g : lab.gates)
      if (lost(g) && g.metrics.count("stalled"))
        g.message += std::string(g.message.empty() ? "" : "\n") +
                     "not timed again: the student's second timings for unsteady timings were all used "
                     "(--unsteady-retimes)";
  const double quiet_used =
      std::max(used, spec.time_limit_s - std::max(kQuietRunMinS, kQuietRunCapFactor * first_s));
  std::vector<std::string> again;  // in the lab's order
  std::map<std::string, GateResult> first;
  for (auto& g : lab.gates)
    if (lost(g) && (busy || (for_unsteady && g.metrics.count("stalled")))) {
      again.push_back(g.id);
      first.emplace(g.id, g);
      g.status = Status::missing;
      g.message.clear();
      g.metrics.clear();
      g.names.clear();
    }
  if (again.empty()) return;
  run_one_process(lab, spec, again, true, hidden, quiet_used, turns, nullptr, true);
  for (auto& g : lab.gates) {
    const auto f = first.find(g.id);
    if (f == first.end()) continue;
    const GateResult& one = f->second;
    std::string what = one.metrics.count("stalled")
                           ? "its first timing was unsteady (" + speed_figure(one) + ", `stalled`)"
                           : "its first timing (" + speed_figure(one) + ") lost points while other workers of the "
                             "batch ran on the machine";
    if (g.status != Status::passed && g.status != Status::failed) {
      what += "; timed again with the machine quiet, the second run ended " + to_string(g.status) +
              " without a timing, so the first stands";
      g = one;
    } else {
      what += "; timed again with the machine quiet (no other gate process on any GPU): " + speed_figure(g) +
              (g.metrics.count("stalled") ? ", still unsteady" : "") + ", which decides";
      g.message = "timed twice: " + what + (g.message.empty() ? "" : "\n" + g.message);
    }
    lab.notes.push_back(std::string(hidden ? kHiddenRunNote : "") + kRetimedNote + g.id + ": " + what);
  }
}

// The gates still without an outcome (their step did not compile, or was not submitted: apply_build), by visibility
// and kind.
std::vector<std::string> gates_to_run(const LabResult& lab, bool hidden, bool speed) {
  std::vector<std::string> ids;
  for (const auto& g : lab.gates)
    if (g.status == Status::missing && g.hidden == hidden && (g.kind == "speed") == speed) ids.push_back(g.id);
  return ids;
}

}  // namespace

double run_speed_gates(LabResult& lab, const GateRunSpec& spec, GpuTurns* turns, std::shared_ptr<HeldStart> held) {
  const auto todo = gates_to_run(lab, false, true);
  if (todo.empty()) return 0.0;
  const double took = run_one_process(lab, spec, todo, true, false, 0, turns, std::move(held));
  time_lost_again(lab, spec, todo, false, 0, turns);
  return took;
}

std::shared_ptr<HeldStart> start_speed_gates(const LabResult& lab, const GateRunSpec& spec) {
  return start_held(process_spec(spec, true, false, 0), gates_to_run(lab, false, true));
}

void run_and_score(LabResult& lab, const GateRunSpec& spec, bool sanitize, bool strict, GpuTurns* turns,
                   double used_s) {
  // Gates that already have an outcome (their step did not compile, or was not submitted: apply_build; the speed
  // gates run_speed_gates ran) are not run.
  // The visible gates first, then the hidden ones, each in up to two processes (the speed gates, then the untimed
  // gates) followed by their memory and race checks. Every process of the hidden gates starts after the last of
  // the visible ones has ended, so nothing the student's code saw in a hidden gate (its inputs) can reach a
  // visible gate's message, console tail or sanitizer report, which students read. The speed gates' process takes
  // the GPU's exclusive turn; the untimed ones and the checks share the GPU with other labs' untimed work.
  // One lab time limit for all runs, counted as the limits count: by progress. The clock (lab.run_seconds) would
  // leave the later runs nothing after one that waited long for a busy machine's CPUs.
  double used = used_s;
  // The gate binary's machine code (sass.h): the batch's, or read here beside the first untimed run.
  std::shared_future<SassDump> sass = spec.sass;
  const bool machine_code = !spec.exe.empty() && needs_machine_code(lab);
  const auto start_dump = [&] {
    if (!spec.process.sandbox) return start_sass_dump(spec.exe, spec.process.limits.cpus);
    std::promise<SassDump> none;  // sandboxed and no dump made in the compile sandbox: never one outside it
    none.set_value(SassDump{std::nullopt, "the gate binary was not read in the sandbox of the compiles"});
    return none.get_future().share();
  };
  for (const bool hidden : {false, true}) {
    // The speed process first: labs that start together then take their exclusive turns one after another before
    // any untimed run has started, instead of each waiting for the others' untimed runs to end.
    for (const bool speed : {true, false}) {
      const auto todo = gates_to_run(lab, hidden, speed);
      if (todo.empty()) continue;
      const double before = used;
      if (!speed && machine_code && !sass.valid()) sass = start_dump();
      used += run_one_process(lab, spec, todo, speed, hidden, used, turns);
      if (speed) time_lost_again(lab, spec, todo, hidden, before, turns);
    }
    // The notes of the hidden gates' checks carry kHiddenRunNote, as their runs' do (run_one_process): the memory
    // and race checks' notes name gates and quote what a gate said under the sanitizer, which the student's own
    // code can make the inputs of a hidden case.
    const std::size_t checks_notes = lab.notes.size();
    // The machine code of the kernels these gates ran, for the steps about an instruction (sass.h), before the
    // checks below: a gate failed here is not checked again.
    if (machine_code) {
      if (!sass.valid()) sass = start_dump();
      apply_instructions(lab, find_instructions(lab.gates, sass.get(), hidden));
    }
    // The checks of these gates.
    GpuTurns::Turn turn(turns, false);
    if (sanitize) {  // --sanitize: every correctness and cpu gate in a process of its own, the full shapes' run
      run_sanitizer(lab, spec, "memcheck", strict, hidden);
      run_sanitizer(lab, spec, "racecheck", strict, hidden);
    } else {  // the default: a memory error or race on the small shapes fails its gate
      check_with_sanitizers(lab, spec, hidden);
    }
    if (hidden) mark_hidden_notes(lab.notes, checks_notes);
  }
  apply_rubric(lab);
}

namespace {

// One line on a terminal, rewritten as gates start: the labs done, what each running lab is doing, the time so far
// and, from the previous run of the same tree (kept beside the logs), about how long it takes in all. Nothing when
// stderr is a file. Called from every lab's thread.
class RunProgress {
 public:
  RunProgress(std::size_t labs, const fs::path& timings) : labs_(labs), timings_(timings) {
    std::ifstream in(timings_);
    std::string key;
    double secs = 0;
    while (in >> key >> secs) {
      if (key == "wall_seconds") expected_ = secs;
      if (key.rfind("lab", 0) == 0) lab_seconds_[key.substr(3)] = secs;
    }
  }
  // A lab's own run time in the previous run of this tree (0: none), for the order the labs start in.
  double last_seconds(const std::string& lab) const {
    const auto it = lab_seconds_.find(lab);
    return it == lab_seconds_.end() ? 0 : it->second;
  }
  void gate(const std::string& lab, const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    running_[lab] = id;
    draw();
  }
  // Prints `text` (whole lines) above the progress line.
  void print(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    if (on_ && drawn_) std::cerr << "\r\033[K";
    std::cerr << text << std::flush;
    drawn_ = false;
    draw();
  }
  // `seconds`: the lab's own run time, kept for the next run's order.
  void lab_done(const std::string& lab, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    lab_seconds_[lab] = seconds;
    running_.erase(lab);
    ++done_;
    draw();
  }
  // Clears the line and keeps this run's times for the next run's estimate and order (the labs this run did not
  // grade keep their earlier times).
  void finish(double wall_seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    if (on_ && drawn_) std::cerr << "\r\033[K" << std::flush;
    std::ofstream out(timings_);
    out << "wall_seconds " << wall_seconds << "\n";
    for (const auto& [lab, secs] : lab_seconds_) out << "lab" << lab << " " << secs << "\n";
  }

 private:
  void draw() {
    if (!on_ || running_.empty()) return;
    const double so_far = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string line = "  " + std::to_string(done_) + "/" + std::to_string(labs_) + " labs done; running:";
    for (const auto& [lab, gate] : running_) line += " " + lab + " " + gate + ",";
    line += " " + format_seconds(so_far) + " so far";
    if (expected_ > 0) line += ", about " + format_seconds(expected_) + " in all (last run)";
    if (line.size() > 160) line = line.substr(0, 157) + "...";
    std::cerr << "\r\033[K" << line << std::flush;
    drawn_ = true;
  }
  std::mutex mu_;
  bool on_ = ::isatty(2) == 1;
  bool drawn_ = false;
  std::size_t labs_, done_ = 0;
  fs::path timings_;
  double expected_ = 0;
  std::map<std::string, double> lab_seconds_;
  std::map<std::string, std::string> running_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

void write_outputs(const std::vector<SubmissionResult>& results, const OutputFiles& files, const std::string& title,
                   const std::vector<std::string>& not_graded) {
  if (!files.json.empty()) {
    // Gradescope grades one submission: for several (a batch) write one results.json per student instead.
    nlohmann::json j = results.size() == 1 ? gradescope_json(results[0]) : nlohmann::json::array();
    if (results.size() != 1)
      for (const auto& r : results) j.push_back(gradescope_json(r));
    write_file_atomic(files.json, json_text(j));  // never throws on a student's invalid UTF-8
  }
  if (!files.junit.empty()) write_file_atomic(files.junit, junit_xml(results));
  if (!files.csv.empty()) write_file_atomic(files.csv, gradebook_csv(results));
  if (!files.markdown.empty()) write_file_atomic(files.markdown, markdown_report(results, title, not_graded));
}

namespace {

// Joins a thread when the scope ends, also when it ends with an exception (a joinable std::thread's destructor would
// end the program).
class JoinOnExit {
 public:
  explicit JoinOnExit(std::thread& t) : t_(t) {}
  ~JoinOnExit() { join(); }
  JoinOnExit(const JoinOnExit&) = delete;
  JoinOnExit& operator=(const JoinOnExit&) = delete;
  void join() {
    if (t_.joinable()) t_.join();
  }

 private:
  std::thread& t_;
};

// The solution tree always builds as a whole (it is the reference): its CMake target. Returns the gate binary, or
// "" with every gate build_failed.
fs::path build_solution_tree(LabResult& lab, const Recipe& recipe, const Build& build, bool no_build) {
  if (recipe.solution_target.empty() || recipe.solution_gates.empty()) {
    set_all(lab, Status::build_failed, "this lab has no solution tree to grade (a student release has no solutions/)");
    return {};
  }
  if (!no_build) {
    std::cerr << "labgrade: building " << recipe.solution_target << "\n";
    BuildOutcome b = build_target(build, recipe.solution_target);
    lab.compile_seconds = b.seconds;
    if (!b.ok) {
      set_all(lab, Status::build_failed, "the solution tree does not build:\n" + b.diagnostics);
      return {};
    }
  }
  if (!fs::exists(recipe.solution_gates)) {
    set_all(lab, Status::build_failed, "the gate binary " + recipe.solution_gates.string() + " does not exist (build target " +
                                           recipe.solution_target + ")");
    return {};
  }
  return recipe.solution_gates;
}

// The student tree is built the way batch grading builds a submission (stepbuild.h): each file on its own with the
// build's compile command, the skeleton's object (.skeleton/ or, in the instructor's tree, student/ itself) in
// place of a step that does not compile or is missing. Gates of such steps get their outcome here.
// The gates, the skeleton and labkit of a lab (its CMake grading target), before the student's files.
void build_grading_target(const Recipe& recipe, const Build& build) {
  if (recipe.grading_target.empty()) return;
  std::cerr << "labgrade: building " << recipe.grading_target << " (gates, skeleton, labkit)\n";
  BuildOutcome b = build_target(build, recipe.grading_target);
  if (!b.ok) throw UserError("lab " + recipe.lab + ": the gates or the skeleton do not build (" +
                             recipe.grading_target + "), nothing of yours is graded:\n" + b.diagnostics);
}

// Labs side by side share `tokens`, one per process (stepbuild.h).
fs::path build_student_tree(LabResult& lab, const Recipe& recipe, const Build& build, JobTokens* tokens,
                            std::size_t token_order, RunProgress& progress) {
  const fs::path student_dir = recipe.lab_dir / "student", work = build.dir / "grading" / "local" / ("lab" + recipe.lab);
  LabBuildSpec spec;
  for (const auto& s : recipe.student_sources) spec.present.push_back(fs::is_regular_file(student_dir / s));
  spec.src_dir = student_dir;
  spec.obj_dir = work / "obj";
  spec.exe = work / ("lab" + recipe.lab + "_gates");
  spec.log_dir = work / "logs";
  spec.log_prefix = "lab" + recipe.lab;
  spec.process.inherit_env = true;
  spec.process.cwd = work;
  // Other labs' speed gates may be timed meanwhile (grade_main): their host thread comes first.
  spec.process.limits.nice = 5;
  spec.path_rewrites = {{(build.root / "").string(), ""}};
  spec.jobs = usable_cpus();
  spec.tokens = tokens;
  spec.token_order = token_order;
  LabBuild built = build_lab(recipe, spec);
  apply_build(lab, built);
  std::string text = "labgrade: compiled lab " + recipe.lab + "'s " + std::to_string(recipe.student_sources.size()) +
                     " student file(s) (" + format_seconds(built.seconds) + ")\n";
  for (const auto& f : built.files)
    if (f.state != StepFile::State::compiled) text += "labgrade: " + f.message + "\n";
  progress.print(text);
  return built.exe;
}

}  // namespace

int grade_main(const GradeOptions& opts) {
  BuildOptions bo = opts.build;
  if (bo.root.empty()) {
    auto root = find_repo_root(fs::current_path());
    if (!root) root = find_repo_root(self_exe().parent_path());
    if (!root)
      throw UserError("not inside the lab workbook (no folder with labs/ and common/ above " +
                      fs::current_path().string() + ")");
    bo.root = *root;
  }
  CudaInfo cuda = query_cuda();  // picks the preset (gpu or ci) and tells a GPU-less user what to expect
  bo.have_gpu = cuda.ok;
  if (!cuda.ok) std::cerr << "labgrade: " << cuda.error << ": GPU gates will be skipped\n";
  Build build = prepare_build(bo);
  auto recipes = select_labs(load_recipes(build.grading_dirs), opts.labs);
  if (recipes.empty())
    throw UserError("no grading recipes in " + build.grading_dirs.front().string() +
                    " (no lab is configured yet: labs/NN_topic/CMakeLists.txt calling labkit_add_lab)");

  const std::string tree = opts.solutions ? "solution" : "student";
  SubmissionResult result;
  result.student = "";
  result.isolation = "local";  // one's own tree, run as oneself: nothing is isolated
  std::vector<labkit::Rubric> rubrics;
  for (const auto& recipe : recipes) {
    try {
      rubrics.push_back(labkit::load_rubric(recipe.rubric.string()));
    } catch (const labkit::RubricError& e) {
      throw UserError(std::string("lab ") + recipe.lab + ": " + e.what());
    }
  }
  std::vector<LabResult> labs;
  for (std::size_t i = 0; i < recipes.size(); ++i)
    labs.push_back(make_lab_result(rubrics[i], recipes[i].name, lab_has_hidden_tests(recipes[i]) && !opts.no_hidden));

  // The labs run side by side (labpool.h), the longest first (untimed_order), and every lab's
  // speed gates come first, one lab after another with the GPU to itself (run_speed_gates, grade.h).
  const double gpu_gib = cuda.ok && !cuda.gpus.empty() ? cuda.gpus.front().memory_gib : 0;
  const int lab_jobs = opts.lab_jobs > 0 ? opts.lab_jobs : default_lab_jobs(gpu_gib, usable_cpus(), recipes.size());
  GpuTurns turns;
  const fs::path tree_logs = build.dir / "grading" / "logs" / tree;
  fs::create_directories(tree_logs);
  RunProgress progress(recipes.size(), tree_logs / "run-times.txt");
  // The longest untimed runs first: by this tree's previous run, or by the rubrics for labs not graded here before.
  std::vector<double> last(recipes.size()), prior(recipes.size());
  for (std::size_t i = 0; i < recipes.size(); ++i) {
    last[i] = progress.last_seconds(recipes[i].lab);
    prior[i] = rubrics[i].expected_run_s;
  }
  const std::vector<std::size_t> order = untimed_order(last, prior);
  // Each lab's run: its binary, logs, the grader's copy of its rubric and its limits, set once for both phases.
  std::vector<fs::path> exes(recipes.size());
  std::vector<GateRunSpec> specs(recipes.size());
  const auto prepare_run = [&](std::size_t i) {
    const Recipe& recipe = recipes[i];
    GateRunSpec& spec = specs[i];
    spec.exe = exes[i];
    spec.launcher = recipe.launcher;
    spec.log_dir = tree_logs / ("lab" + recipe.lab);
    fs::create_directories(spec.log_dir);
    // The gate binary reads the grader's copy: floors as thresholds (partial credit, see apply_rubric).
    spec.rubric = spec.log_dir / "gate-rubric.toml";
    write_file_atomic(spec.rubric, gate_rubric_text(read_file(recipe.rubric), true));
    apply_time_limits(spec, rubrics[i], opts.gate_timeout);
    spec.sanitizer_checks = !opts.no_sanitizer_checks;
    spec.process.inherit_env = true;  // the student's own machine and environment
    spec.process.limits.file_size = 1ull << 30;
    spec.process.cwd = spec.log_dir;
    spec.on_gate_start = [&progress, &recipe](const std::string& gate) { progress.gate(recipe.lab, gate); };
    // The lab sees the GPUs this process sees (the environment is inherited).
    if (cuda.ok) skip_gates_needing_more_gpus(labs[i], static_cast<int>(cuda.gpus.size()));
  };
  std::vector<double> speed_used(recipes.size(), 0.0);
  std::optional<std::chrono::steady_clock::time_point> started;  // when the first gate process started
  // The next lab's speed process, started while the current lab's are timed and waiting for its turn
  // (start_speed_gates): its start-up (0.4 s, and 1 s for a lab under mpirun, on an H100) then takes no GPU time.
  std::shared_ptr<HeldStart> held;
  std::optional<std::size_t> held_lab;
  const auto time_speed_gates = [&](std::size_t i, std::optional<std::size_t> next) {
    if (exes[i].empty()) return;
    if (specs[i].exe.empty()) prepare_run(i);
    std::shared_ptr<HeldStart> mine = held_lab == i ? std::move(held) : nullptr;
    held = nullptr;
    held_lab.reset();
    if (next && !exes[*next].empty()) {
      if (specs[*next].exe.empty()) prepare_run(*next);
      held = start_speed_gates(labs[*next], specs[*next]);
      held_lab = *next;
    }
    if (!started) started = std::chrono::steady_clock::now();
    progress.print("labgrade: timing the speed gates of lab " + recipes[i].lab + "\n");
    speed_used[i] = run_speed_gates(labs[i], specs[i], &turns, std::move(mine));
  };
  if (opts.solutions) {
    // The solution tree builds through CMake, one target at a time with every CPU and at the grader's priority,
    // before any gate runs: a build beside the gate runs slowed both (an H200 with 16 cores: the whole workbook took
    // 193 s that way, against 42 s of compiling and 88 s of runs).
    for (std::size_t i = 0; i < recipes.size(); ++i)
      exes[i] = build_solution_tree(labs[i], recipes[i], build, bo.no_build);
    if (lab_jobs > 1)
      for (std::size_t k = 0; k < order.size(); ++k)
        time_speed_gates(order[k], k + 1 < order.size() ? std::optional<std::size_t>(order[k + 1]) : std::nullopt);
  } else {
    if (!bo.no_build)
      for (const auto& recipe : recipes) build_grading_target(recipe, build);
    // The student's files of all the labs compile side by side, one process per CPU in all, as `labgrade batch`
    // builds one student (a lab's slowest file no longer holds up the next lab: on an H100 with 16 jobs, one workbook
    // compiled in 46 s lab after lab, 19 s side by side). A lab's speed gates are timed as soon as it is built, in
    // the order the labs are ready, while the others still compile: a speed gate takes the GPU to itself, which no
    // compiler touches, and its one busy host thread needs one CPU of the machine's, which the compilers leave it at
    // niceness +5 (as in a batch, where the next students compile beside the gate runs). The untimed gates and the
    // checks, which keep every CPU busy, wait for the last lab to be built.
    progress.print("labgrade: compiling the student files of " + std::to_string(recipes.size()) + " lab(s)\n");
    JobTokens tokens(usable_cpus());
    std::vector<std::size_t> files;
    for (const auto& recipe : recipes) files.push_back(recipe.student_sources.size());
    const std::vector<std::size_t> rank = compile_ranks(files);
    ReadyQueue built;
    const auto compile_started = std::chrono::steady_clock::now();
    double compile_wall = 0;
    std::thread compiler([&] {
      for_each_concurrently(recipes.size(), static_cast<int>(recipes.size()), [&](std::size_t i) {
        try {
          exes[i] = build_student_tree(labs[i], recipes[i], build, &tokens, rank[i], progress);
          built.push(i);
        } catch (...) {
          built.fail(std::current_exception());
        }
      });
      compile_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - compile_started).count();
      built.finish();
    });
    JoinOnExit join_compiler(compiler);
    for (std::optional<std::size_t> i = built.next(); i;) {
      const std::optional<std::size_t> next = built.ready_now();  // started ahead only if already built
      if (lab_jobs > 1) time_speed_gates(*i, next);
      i = next ? next : built.next();
    }
    join_compiler.join();
    built.rethrow();
    progress.print("labgrade: " + std::to_string(recipes.size()) + " lab(s) compiled in " +
                   format_seconds(compile_wall) + " wall" +
                   (lab_jobs > 1 ? ", their speed gates timed as each was built" : "") + "\n");
  }
  for (std::size_t i = 0; i < recipes.size(); ++i)
    if (!exes[i].empty() && specs[i].exe.empty()) prepare_run(i);
  if (!started) started = std::chrono::steady_clock::now();
  // Then the rest of each lab, the labs side by side.
  for_each_concurrently(recipes.size(), lab_jobs, [&](std::size_t k) {
    const std::size_t i = order[k];
    const Recipe& recipe = recipes[i];
    LabResult& lab = labs[i];
    if (exes[i].empty()) {
      apply_rubric(lab);
      return;
    }
    progress.print("labgrade: running lab " + recipe.lab + " (" + std::to_string(lab.gates.size()) + " gates, " +
                   tree + " tree)\n");
    run_and_score(lab, specs[i], opts.sanitize, opts.sanitize_strict, &turns, speed_used[i]);
    // One line per lab as soon as it is graded: the table comes at the end, and a run stopped before then (a
    // time limit, Ctrl-C) still says how far it got.
    int passed = 0;
    for (const auto& g : lab.gates) passed += g.status == Status::passed;
    std::string text = "labgrade: lab " + recipe.lab + ": " + format_points(lab.score()) + "/" +
                       format_points(lab.max_score()) + " points, " + std::to_string(passed) + " of " +
                       std::to_string(lab.gates.size()) + " gates passed (run " + format_seconds(lab.run_seconds) +
                       ")\n";
    // The memory and race checks are a large part of a lab's run: say what each took, here rather than only in the
    // table.
    for (const auto& note : lab.notes)
      if (note.rfind("memcheck:", 0) == 0 || note.rfind("racecheck:", 0) == 0)
        text += "labgrade:   " + printable(trim_message(note, 1, 240)) + "\n";
    // Kept for the next run's order: the part that runs side by side (the speed gates were timed before, alone).
    progress.lab_done(recipe.lab, std::max(0.0, lab.run_seconds - speed_used[i]));
    progress.print(text);
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - *started).count();
  progress.finish(wall);
  for (auto& lab : labs) {
    result.compile_seconds += lab.compile_seconds;
    result.labs.push_back(std::move(lab));
  }
  result.run_seconds = wall;  // the clock's, as in a batch: with labs side by side, less than their own times added up
  std::cerr << "labgrade: " << recipes.size() << " lab(s) in " << format_seconds(wall) << " wall, "
            << std::min<std::size_t>(static_cast<std::size_t>(lab_jobs), recipes.size())
            << " at a time (the table's times are each lab's own)\n";
  std::cout << "\n";
  print_table(std::cout, result, opts.color);
  write_outputs({result}, opts.outputs, "Grading report (" + tree + " tree)");
  return result.all_passed() ? 0 : 1;
}

}  // namespace labgrade
