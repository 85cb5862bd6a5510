#include "firstrun.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "devices.h"
#include "doctor.h"
#include "recipe.h"

namespace labgrade {

namespace {

bool is_source(const fs::path& p) {
  static const std::vector<std::string> exts = {".cu", ".cuh", ".h", ".hpp", ".cpp"};
  return std::find(exts.begin(), exts.end(), p.extension().string()) != exts.end();
}

std::vector<fs::path> source_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && is_source(e.path())) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Files of student/ that git sees as changed or new since the last commit ("" when not a git checkout).
std::vector<std::string> git_changed(const fs::path& root, const fs::path& student_dir) {
  auto r = run_command({"git", "-C", root.string(), "status", "--porcelain", "--untracked-files=all", "--",
                        student_dir.lexically_relative(root).string()},
                       30);
  std::vector<std::string> out;
  if (r.exit_code != 0) return out;
  for (const auto& line : split_lines(r.output))
    if (line.size() > 3) out.push_back(fs::path(trim(line.substr(3))).filename().string());
  return out;
}

LabState lab_state(const fs::path& root, const fs::path& lab_dir) {
  LabState s;
  s.name = lab_dir.filename().string();
  s.id = s.name.substr(0, 2);
  s.dir = lab_dir;
  const fs::path student = lab_dir / "student", skeleton = lab_dir / ".skeleton";
  auto files = source_files(student);
  std::error_code ec;
  if (fs::is_directory(skeleton, ec)) {
    for (const auto& f : files) {
      const fs::path pristine = skeleton / f.filename();
      if (!fs::exists(pristine, ec) || read_file(pristine) != read_file(f)) {
        s.started = true;
        s.why = f.filename().string() + " differs from the skeleton";
        return s;
      }
    }
    s.why = "every file is still the skeleton";
    return s;
  }
  for (const auto& f : files) {
    if (f.extension() == ".cu" && !contains(read_file(f), "NotImplemented")) {
      s.started = true;
      s.why = f.filename().string() + " throws NotImplemented nowhere";
      return s;
    }
  }
  auto changed = git_changed(root, student);
  if (!changed.empty()) {
    s.started = true;
    s.why = changed.front() + " changed since the last commit";
    return s;
  }
  s.why = "every step still throws NotImplemented";
  return s;
}

struct LabScore {
  double score = 0, max = 0;
  int gates = 0, passed = 0, skipped = 0;
  std::vector<std::string> open;  // gates that did not pass (and did not skip)
};

// Per lab, from the Gradescope results.json that grade_main wrote (tests tagged "labNN"; output "status: X").
std::map<std::string, LabScore> scores_from_results(const fs::path& json_file) {
  std::map<std::string, LabScore> out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(json_file));
  } catch (const std::exception&) {
    return out;
  }
  for (const auto& t : j.value("tests", nlohmann::json::array())) {
    if (!t.contains("tags") || !t["tags"].is_array() || t["tags"].empty()) continue;
    std::string tag = t["tags"][0].get<std::string>();
    if (!starts_with(tag, "lab")) continue;
    LabScore& l = out[tag.substr(3)];
    l.score += t.value("score", 0.0);
    l.max += t.value("max_score", 0.0);
    ++l.gates;
    std::string status = t.value("output", "");
    status = status.substr(0, status.find('\n'));
    std::string name = t.value("name", "");
    name = name.substr(0, name.find(':'));
    if (status == "status: passed")
      ++l.passed;
    else if (status == "status: skipped")
      ++l.skipped;
    else
      l.open.push_back(name.substr(name.find(' ') + 1) + " (" + status.substr(8) + ")");
  }
  return out;
}

std::string readme_of(const LabState& l, const fs::path& root) {
  return (l.dir / "README.md").lexically_relative(root).string();
}

}  // namespace

std::vector<LabState> scan_labs(const fs::path& root) {
  std::vector<LabState> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "labs", ec)) {
    std::string name = e.path().filename().string();
    if (name.size() < 4 || !isdigit(name[0]) || !isdigit(name[1]) || name[2] != '_') continue;
    if (!fs::is_directory(e.path() / "student", ec)) continue;
    out.push_back(lab_state(root, e.path()));
  }
  std::sort(out.begin(), out.end(), [](const LabState& a, const LabState& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> nvidia_smi_gpus() {
  std::vector<std::string> gpus;
  if (!find_program("nvidia-smi")) return gpus;
  auto r = run_command({"nvidia-smi", "--query-gpu=name", "--format=csv,noheader"}, 30);
  if (r.exit_code != 0) return gpus;
  for (const auto& line : split_lines(r.output))
    if (!trim(line).empty()) gpus.push_back(trim(line));
  return gpus;
}

const char* const kNoGpuReminder =
    "No GPU: the skipped gates above say nothing about your kernels (see the note at the top).";

void print_no_gpu_notice(std::ostream& out, const std::string& reason) {
  out << "\n"
         "NO USABLE GPU: " << reason << "\n"
         "Every correctness and speed gate is reported \"skipped\", whether your code is right or wrong: nothing\n"
         "here runs your kernels. What this machine still checks: that your files compile (a compile error is\n"
         "shown as build_failed with the compiler's message) and the CPU gates (cpu.*). For GPU feedback run\n"
         "labgrade on a machine with an NVIDIA GPU (the same setup commands: docs/getting-started.md), or submit\n"
         "to your course's autograder, which runs the gates on a GPU. `labgrade doctor` says what is missing here.\n\n";
}

namespace {

// The workbook to grade: --repo, else the one around the current folder, else the one around labgrade.
fs::path resolve_root(BuildOptions& bo) {
  if (bo.root.empty()) {
    auto root = find_repo_root(fs::current_path());
    if (!root) root = find_repo_root(self_exe().parent_path());
    if (!root) throw UserError("not inside the lab workbook (no folder with labs/ and common/ above here)");
    bo.root = *root;
  }
  return bo.root;
}

// Picks the preset from the hardware, prints the GPU or the no-GPU notice; returns whether the gates can run.
bool detect_gpu(BuildOptions& bo) {
  // The preset follows the hardware (a GPU that the driver cannot serve still gets the gpu build, whose gates
  // then report the driver's error); whether the gates can run follows the CUDA runtime.
  auto smi = nvidia_smi_gpus();
  CudaInfo cuda = query_cuda();
  const bool usable = cuda.ok;
  bo.have_gpu = !smi.empty() || cuda.ok;
  if (bo.preset.empty() && bo.build_dir.empty()) bo.preset = bo.have_gpu ? "gpu" : "ci";
  if (usable)
    std::cout << "labgrade: GPU: " << cuda.gpus.front().name << "\n";
  else
    print_no_gpu_notice(std::cout, smi.empty() ? cuda.error
                                               : "nvidia-smi lists " + join(smi, ", ") +
                                                     " but CUDA cannot use it: " + cuda.error);
  return usable;
}

// Prints one line per lab (started or not, and why); returns the ids of the started labs.
std::vector<std::string> print_lab_states(const std::vector<LabState>& labs) {
  std::vector<std::string> started;
  std::cout << "\n";
  for (const auto& l : labs) {
    std::string name = l.name;
    name.resize(std::max<std::size_t>(name.size(), 24), ' ');
    std::cout << "  lab " << name << (l.started ? "started      " : "not started  ") << "(" << l.why << ")\n";
    if (l.started) started.push_back(l.id);
  }
  std::cout << "\n";
  return started;
}

// Configures the build if needed; when that fails, prints the error and `labgrade doctor`'s report instead.
std::optional<Build> prepare_build_or_doctor(BuildOptions& bo, const fs::path& root) {
  try {
    Build b = prepare_build(bo);
    bo.build_dir = b.dir;
    return b;
  } catch (const UserError& e) {
    std::cerr << "labgrade: " << e.what() << "\n\nlabgrade doctor:\n";
    DoctorOptions d;
    d.root = root;
    doctor_main(d);
    return std::nullopt;
  }
}

// The started labs that the build has recipes for; says for each of the others how to add it.
std::vector<std::string> gradable_labs(const std::vector<std::string>& started,
                                       const std::vector<std::string>& in_build, const BuildOptions& bo) {
  std::vector<std::string> gradable;
  for (const auto& id : started) {
    if (std::find(in_build.begin(), in_build.end(), id) != in_build.end()) {
      gradable.push_back(id);
      continue;
    }
    std::cout << "lab " << id << " is started but not in " << bo.build_dir.string() << " (LABS_ONLY="
              << cmake_cache_value(bo.build_dir, "LABS_ONLY") << "): add it, e.g. LABS_ONLY=\"...;" << id
              << "\" cmake --workflow --preset " << (bo.preset.empty() ? "gpu" : bo.preset) << "\n";
  }
  return gradable;
}

// Under the results: without a GPU the reminder and the next lab; else the first started lab short of full marks
// and its open gates, or the next lab to start.
void print_next_step(const std::vector<LabState>& labs, const std::vector<std::string>& started,
                     const std::map<std::string, LabScore>& scores, bool usable, const fs::path& root) {
  auto next_unstarted = std::find_if(labs.begin(), labs.end(), [](const LabState& l) { return !l.started; });
  if (!usable) {
    std::cout << kNoGpuReminder << "\n";
    if (next_unstarted != labs.end())
      std::cout << "Next: lab " << next_unstarted->id << " (" << readme_of(*next_unstarted, root)
                << "), or get GPU feedback on the labs above first.\n";
    return;
  }
  for (const auto& id : started) {
    auto it = scores.find(id);
    if (it == scores.end()) continue;
    const LabScore& s = it->second;
    if (s.passed < s.gates || s.score < s.max) {
      std::cout << "Next: finish lab " << id << " (" << format_points(s.score) << "/" << format_points(s.max)
                << " points). Open gates:";
      for (std::size_t k = 0; k < s.open.size() && k < 6; ++k) std::cout << (k ? ", " : " ") << s.open[k];
      if (s.open.size() > 6) std::cout << ", ...";
      std::cout << "\n  `labgrade " << id << "` shows each diagnosis again; the walkthrough is "
                << readme_of(*std::find_if(labs.begin(), labs.end(), [&](const LabState& l) { return l.id == id; }),
                             root)
                << "\n";
      return;
    }
  }
  if (next_unstarted != labs.end())
    std::cout << "Every lab you started has full marks. Next: lab " << next_unstarted->id << ": "
              << readme_of(*next_unstarted, root) << "\n";
  else
    std::cout << "Every lab has full marks.\n";
}

}  // namespace

int first_run_main(GradeOptions grade) {
  BuildOptions& bo = grade.build;
  const fs::path root = resolve_root(bo);
  std::cout << "labgrade: grading the labs you have started (`labgrade 01` grades one lab whatever its state, "
               "`labgrade --help` lists the options)\n";
  const bool usable = detect_gpu(bo);

  auto labs = scan_labs(root);
  if (labs.empty()) throw UserError("no labs/NN_topic/student/ folders in " + root.string());
  std::vector<std::string> started = print_lab_states(labs);

  // The build first, even with nothing to grade: a fresh clone learns now whether its toolchain works.
  const std::optional<Build> b = prepare_build_or_doctor(bo, root);
  if (!b) return 2;

  std::vector<std::string> in_build;  // labs the build has recipes for (LABS_ONLY may leave some out)
  for (const auto& r : load_recipes(b->grading_dirs)) in_build.push_back(r.lab);

  if (started.empty()) {
    const LabState& first = labs.front();
    std::cout << "Nothing to grade yet: no lab has code written. Start with lab " << first.id << ": "
              << readme_of(first, root) << " (write labs/" << first.name << "/student/, then run labgrade again).\n";
    return 0;
  }

  std::vector<std::string> gradable = gradable_labs(started, in_build, bo);
  if (gradable.empty()) return 1;
  started = gradable;
  grade.labs = gradable;
  // grade_main prints the table; the summary below reads the scores back from its Gradescope file.
  // Not in grading/: every lab*.json there is read as a grading recipe.
  grade.outputs.json = (bo.build_dir / "labgrade-last-results.json").string();
  int rc = grade_main(grade);
  auto scores = scores_from_results(grade.outputs.json);

  std::cout << "\n";
  print_next_step(labs, started, scores, usable, root);
  return rc;
}

}  // namespace labgrade
