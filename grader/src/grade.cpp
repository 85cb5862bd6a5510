#include "grade.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include "devices.h"
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

void run_and_score(LabResult& lab, const GateRunSpec& spec, bool sanitize, bool strict) {
  std::vector<std::string> visible, hidden;
  for (const auto& g : lab.gates) (g.hidden ? hidden : visible).push_back(g.id);
  if (hidden.empty()) {
    run_gates(lab, spec);
  } else {
    // Hidden gates run in a process of their own, after the visible ones: nothing the student's code saw in a
    // hidden gate (its inputs) can reach a visible gate's message or console tail, which students read.
    if (!visible.empty()) run_gates(lab, spec, visible);
    GateRunSpec h = spec;
    h.log_tag = spec.log_tag + "-hidden";
    h.time_limit_s = std::max(1e-3, spec.time_limit_s - lab.run_seconds);  // one lab time limit for both
    const std::size_t notes_before = lab.notes.size();
    run_gates(lab, h, hidden);
    for (std::size_t i = notes_before; i < lab.notes.size(); ++i) lab.notes[i] = kHiddenRunNote + lab.notes[i];
  }
  if (sanitize) {  // --sanitize: every correctness and cpu gate in a process of its own, the full shapes' run
    run_sanitizer(lab, spec, "memcheck", strict);
    run_sanitizer(lab, spec, "racecheck", strict);
  } else {
    check_with_sanitizers(lab, spec);  // the default: a memory error or race on the small shapes fails its gate
  }
  apply_rubric(lab);
}

namespace {

// One line on a terminal, rewritten as gates start: the lab, the gate, the time so far and, from the gate times of
// the previous run (kept beside the lab's logs), about how long the lab takes in all. Nothing when stderr is a file.
class ProgressLine {
 public:
  ProgressLine(std::string lab, const fs::path& timings) : lab_(std::move(lab)), timings_(timings) {
    std::ifstream in(timings_);
    std::string key;
    double secs = 0;
    while (in >> key >> secs)
      if (key == "lab_seconds") expected_ = secs;
  }
  void gate(const std::string& id) {
    if (!on_) return;
    ++started_;
    const double so_far = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string line = "  lab " + lab_ + ": " + id + ", " + format_seconds(so_far) + " so far";
    if (expected_ > 0) line += ", about " + format_seconds(expected_) + " in all (last run)";
    std::cerr << "\r\033[K" << line << std::flush;
  }
  // Clears the line and keeps this run's gate times for the next run's estimate.
  void done(const LabResult& lab) {
    if (on_ && started_ > 0) std::cerr << "\r\033[K" << std::flush;
    std::ofstream out(timings_);
    out << "lab_seconds " << lab.run_seconds << "\n";  // the gates, restarts and the sanitizer checks
    for (const auto& g : lab.gates) out << g.id << " " << g.seconds << "\n";
  }

 private:
  bool on_ = ::isatty(2) == 1;
  std::string lab_;
  fs::path timings_;
  double expected_ = 0;
  int started_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

void write_outputs(const std::vector<SubmissionResult>& results, const OutputFiles& files, const std::string& title) {
  if (!files.json.empty()) {
    // Gradescope grades one submission: for several (a batch) write one results.json per student instead.
    nlohmann::json j = results.size() == 1 ? gradescope_json(results[0]) : nlohmann::json::array();
    if (results.size() != 1)
      for (const auto& r : results) j.push_back(gradescope_json(r));
    write_file_atomic(files.json, j.dump(2) + "\n");
  }
  if (!files.junit.empty()) write_file_atomic(files.junit, junit_xml(results));
  if (!files.csv.empty()) write_file_atomic(files.csv, gradebook_csv(results));
  if (!files.markdown.empty()) write_file_atomic(files.markdown, markdown_report(results, title));
}

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
  for (const auto& recipe : recipes) {
    labkit::Rubric rubric;
    try {
      rubric = labkit::load_rubric(recipe.rubric.string());
    } catch (const labkit::RubricError& e) {
      throw UserError(std::string("lab ") + recipe.lab + ": " + e.what());
    }
    LabResult lab = make_lab_result(rubric, recipe.name, lab_has_hidden_tests(recipe) && !opts.no_hidden);
    const std::string target = opts.solutions ? recipe.solution_target : recipe.student_target;
    const fs::path exe = opts.solutions ? recipe.solution_gates : recipe.student_gates;
    if (target.empty() || exe.empty()) {
      set_all(lab, Status::build_failed,
              "this lab has no " + tree + " tree to grade (a student release has no solutions/)");
      apply_rubric(lab);
      result.labs.push_back(std::move(lab));
      continue;
    }
    if (!bo.no_build) {
      std::cerr << "labgrade: building " << target << "\n";
      BuildOutcome b = build_target(build, target);
      lab.compile_seconds = b.seconds;
      if (!b.ok) {
        set_all(lab, Status::build_failed, "the " + tree + " tree does not build:\n" + b.diagnostics);
        apply_rubric(lab);
        result.compile_seconds += lab.compile_seconds;
        result.labs.push_back(std::move(lab));
        continue;
      }
    }
    if (!fs::exists(exe)) {
      set_all(lab, Status::build_failed,
              "the gate binary " + exe.string() + " does not exist (build target " + target + ")");
      apply_rubric(lab);
      result.labs.push_back(std::move(lab));
      continue;
    }
    GateRunSpec spec;
    spec.exe = exe;
    spec.launcher = recipe.launcher;
    spec.log_dir = build.dir / "grading" / "logs" / tree / ("lab" + recipe.lab);
    fs::create_directories(spec.log_dir);
    // The gate binary reads the grader's copy: floors as thresholds (partial credit, see apply_rubric).
    spec.rubric = spec.log_dir / "gate-rubric.toml";
    write_file_atomic(spec.rubric, gate_rubric_text(read_file(recipe.rubric), true));
    apply_time_limits(spec, rubric, opts.gate_timeout);
    spec.sanitizer_checks = !opts.no_sanitizer_checks;
    spec.process.inherit_env = true;  // the student's own machine and environment
    spec.process.limits.file_size = 1ull << 30;
    spec.process.cwd = spec.log_dir;
    std::cerr << "labgrade: running lab " << recipe.lab << " (" << lab.gates.size() << " gates, " << tree << " tree)\n";
    ProgressLine progress(recipe.lab, spec.log_dir / "gate-times.txt");
    spec.on_gate_start = [&progress](const std::string& gate) { progress.gate(gate); };
    run_and_score(lab, spec, opts.sanitize, opts.sanitize_strict);
    progress.done(lab);
    result.compile_seconds += lab.compile_seconds;
    result.run_seconds += lab.run_seconds;
    result.labs.push_back(std::move(lab));
  }
  std::cout << "\n";
  print_table(std::cout, result, opts.color);
  write_outputs({result}, opts.outputs, "Grading report (" + tree + " tree)");
  return result.all_passed() ? 0 : 1;
}

}  // namespace labgrade
