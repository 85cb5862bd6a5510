// labgrade: the command line. Each sub-command lives in its own file; this one only parses arguments.
//
//   labgrade                   a student's first command: builds, grades the labs with code written, says what next
//   labgrade LAB... | all [--solutions] [--build-dir DIR] [--json F] [--junit F] [--csv F] [--markdown F] ...
//   labgrade batch SUBMISSIONS --out DIR [--workers N] [--gpus LIST] [--sandbox auto|bwrap|none] ...
//   labgrade merge OUT PART_OUT... [--submissions SUBMISSIONS]
//   labgrade release OUT_DIR
//   labgrade doctor
//   labgrade fixtures materialise|check ...   (the grader's own test fixtures)
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "batch.h"
#include "devices.h"
#include "doctor.h"
#include "firstrun.h"
#include "fixtures.h"
#include "grade.h"
#include "release.h"
#include "sandbox.h"

using namespace labgrade;

namespace {

std::vector<fs::path> solution_roots(const fs::path& root) { return {root, root / "grader" / "tests" / "fakelab"}; }

fs::path g_repo;  // --repo

fs::path repo_root_or_throw() {
  if (!g_repo.empty()) return fs::absolute(g_repo);
  auto root = find_repo_root(fs::current_path());
  if (!root) root = find_repo_root(self_exe().parent_path());
  if (!root) throw UserError("not inside the lab workbook");
  return *root;
}

int fixtures_materialise(const fs::path& dest, fs::path dir, int copies, const std::vector<std::string>& only) {
  fs::path root = repo_root_or_throw();
  if (dir.empty()) dir = root / "grader" / "fixtures";
  auto fixtures = load_fixtures(dir);
  int n = 0;
  for (const auto& f : fixtures) {
    if (!only.empty() && std::find(only.begin(), only.end(), f.name) == only.end()) continue;
    materialise(f, dest / f.name, solution_roots(root));
    ++n;
  }
  for (int i = 1; i <= copies; ++i)
    materialise_solutions(dest / ("solution_" + std::to_string(i)), solution_roots(root));
  std::cout << "materialised " << n << " fixture(s) and " << copies << " solution cop" << (copies == 1 ? "y" : "ies")
            << " in " << dest.string() << "\n";
  return 0;
}

int fixtures_check(const fs::path& out, fs::path dir, const std::string& gpu, const std::vector<std::string>& only) {
  fs::path root = repo_root_or_throw();
  if (dir.empty()) dir = root / "grader" / "fixtures";
  std::vector<Fixture> fixtures;
  for (auto& f : load_fixtures(dir))
    if ((only.empty() || std::find(only.begin(), only.end(), f.name) != only.end()) && fs::exists(out / f.name))
      fixtures.push_back(std::move(f));
  std::vector<std::string> solutions;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (e.is_directory() && starts_with(e.path().filename().string(), "solution_"))
      solutions.push_back(e.path().filename().string());
  std::sort(solutions.begin(), solutions.end());
  bool have_gpu = gpu == "yes" || (gpu == "auto" && query_cuda().ok);
  std::cout << "expectations for a machine " << (have_gpu ? "with" : "without") << " a GPU\n\n";
  return print_checks(std::cout, check_fixtures(out, fixtures, have_gpu, solutions)) ? 0 : 1;
}

// Every value the command line can set; CLI11 writes into these while parsing, so they must outlive app.parse.
struct CliOptions {
  GradeOptions grade;  // the shared options and plain `labgrade [LAB...]`
  std::vector<std::string> grading_dirs;
  std::string build_dir;
  std::string repo;

  BatchOptions batch;
  std::string submissions, out;

  std::string merge_out, merge_submissions;
  std::vector<std::string> merge_parts;

  ReleaseOptions release;
  std::string release_out;

  DoctorOptions doctor;

  std::string fx_dest, fx_dir, fx_out, fx_gpu = "auto";
  int fx_copies = 0;
  std::vector<std::string> fx_only;
};

// The sub-commands, to tell after parsing which one was given.
struct Subcommands {
  CLI::App* batch = nullptr;
  CLI::App* merge = nullptr;
  CLI::App* release = nullptr;
  CLI::App* doctor = nullptr;
  CLI::App* fixtures_materialise = nullptr;
  CLI::App* fixtures_check = nullptr;
};

// The options of plain `labgrade [LAB...]`, shared with the sub-commands (the app falls through).
void add_grade_options(CLI::App& app, CliOptions& o) {
  GradeOptions& grade = o.grade;
  BuildOptions& build = grade.build;
  app.add_option("labs", grade.labs,
                 "labs to grade: 01, 1, 01_matmul or matmul; `all` for every lab (default: the labs with code "
                 "written, then what to do next)");
  app.add_option("--repo", o.repo, "the workbook checkout (default: the one around the current folder)");
  app.add_flag("--solutions", grade.solutions, "grade the reference solutions instead of the student tree");
  app.add_option("--build-dir", o.build_dir, "use this build folder (default: build/gpu with a GPU, else build/ci)");
  app.add_option("--preset", build.preset, "CMake configure preset (default: gpu with a GPU, else ci)");
  app.add_option("--grading-dir", o.grading_dirs, "folders with the grading recipes (default: <build>/grading)");
  app.add_flag("--no-build", build.no_build, "use the build as it is: no configure, no build");
  app.add_option("-j,--jobs", build.jobs, "parallel build (and batch compile) jobs");
  app.add_option("--json", grade.outputs.json, "write Gradescope results.json here");
  app.add_option("--junit", grade.outputs.junit, "write JUnit XML here");
  app.add_option("--csv", grade.outputs.csv, "write the CSV gradebook here");
  app.add_option("--markdown", grade.outputs.markdown, "write a Markdown report here");
  app.add_flag("--no-sanitizer-checks", grade.no_sanitizer_checks,
               "skip the default memory and race checks (compute-sanitizer memcheck and racecheck on the correctness "
               "gates' small shapes; a finding fails its gate)");
  app.add_flag("--sanitize", grade.sanitize,
               "instead of the default checks: compute-sanitizer memcheck and racecheck on every correctness (and "
               "cpu) gate, one process per gate, findings reported");
  app.add_flag("--sanitize-strict", grade.sanitize_strict, "sanitizer findings fail the gate (implies --sanitize)");
  app.add_option("--gate-timeout", grade.gate_timeout, "seconds per gate, overriding the rubrics' gate_time_limit_s");
  app.add_flag("--no-hidden", grade.no_hidden, "leave hidden gates out (what a student release grades)");
  app.add_option("--lab-jobs", grade.lab_jobs,
                 "labs of one submission run at once on its GPU; their speed gates still take turns with the GPU to "
                 "themselves (default: one per 12 GiB of GPU memory and per 2.5 CPUs; 1 without a GPU)")
      ->check(CLI::Range(1, 64));
}

// `labgrade batch SUBMISSIONS --out DIR ...` and its options.
CLI::App* add_batch_command(CLI::App& app, CliOptions& o) {
  BatchOptions& batch = o.batch;
  auto* batch_cmd = app.add_subcommand("batch", "grade every submission (one subfolder per student), isolated");
  batch_cmd->add_option("submissions", o.submissions, "folder with one subfolder per student")->required();
  batch_cmd->add_option("--out", o.out, "output folder (results, gradebook, reports)")->required();
  batch_cmd->add_option("--workers", batch.workers, "run workers (default: one per GPU)");
  batch_cmd->add_option("--gpus", batch.gpus,
                        "GPUs to use, one worker each, e.g. 0,1; 0+1 gives one worker both (labs 08 and 09's "
                        "multi-GPU gates need two) (default: all, one worker each)");
  batch_cmd->add_option("--sandbox", batch.sandbox, "auto | bwrap | none (default auto)")
      ->check(CLI::IsMember({"auto", "bwrap", "none"}));
  batch_cmd->add_option("--lab", batch.labs, "grade only these labs (repeatable)");
  batch_cmd->add_option("--memory-gib", batch.memory_gib,
                        "host memory of one gate binary, GiB (default 16; 0: no limit)");
  batch_cmd->add_option("--disk-gib", batch.disk_gib,
                        "disk one lab's gate binary may fill with files, GiB (default 2; 0: not watched)");
  batch_cmd->add_option("--max-processes", batch.max_processes,
                        "processes+threads of one submission (default 256, more on many-core machines)");
  batch_cmd->add_option("--compile-timeout", batch.compile_timeout, "seconds per compile or link (default 300)");
  batch_cmd->add_option("--busy-retimes", batch.busy_retimes,
                        "with several workers: speed processes per student timed again with the machine quiet when "
                        "a gate lost points, unsteady or not (default 3; 0: only unsteady timings)")
      ->check(CLI::NonNegativeNumber);
  batch_cmd->add_option("--unsteady-retimes", batch.unsteady_retimes,
                        "speed processes per student timed again with the machine quiet when a gate lost points on "
                        "an unsteady timing (default 4)")
      ->check(CLI::NonNegativeNumber);
  batch_cmd->add_flag("--keep-scratch", batch.keep_scratch, "keep OUT/.work/<n>-<student> for debugging");
  return batch_cmd;
}

// `labgrade merge OUT PART_OUT... [--submissions SUBMISSIONS]`.
CLI::App* add_merge_command(CLI::App& app, CliOptions& o) {
  auto* merge_cmd = app.add_subcommand("merge", "one gradebook, JUnit file and report from several batches' --out "
                                                "folders over disjoint students (the parts of a cluster run)");
  merge_cmd->add_option("out", o.merge_out, "folder for the merged gradebook.csv, junit.xml and report.md")
      ->required();
  merge_cmd->add_option("parts", o.merge_parts, "the batches' --out folders")->required();
  merge_cmd->add_option("--submissions", o.merge_submissions, "list the students of this folder that have no result");
  return merge_cmd;
}

// `labgrade release OUT_DIR [--force]`.
CLI::App* add_release_command(CLI::App& app, CliOptions& o) {
  auto* release_cmd = app.add_subcommand("release", "write the student release (no solutions, no hidden gates)");
  release_cmd->add_option("out_dir", o.release_out, "where to write it (outside the repository)")->required();
  release_cmd->add_flag("--force", o.release.force, "replace a non-empty OUT_DIR");
  return release_cmd;
}

// `labgrade fixtures materialise|check ...`: sets cmds.fixtures_materialise and cmds.fixtures_check.
void add_fixtures_commands(CLI::App& app, CliOptions& o, Subcommands& cmds) {
  auto* fixtures_cmd = app.add_subcommand("fixtures", "the grader's fault fixtures (for its own tests)");
  fixtures_cmd->require_subcommand(1);
  auto* mat = fixtures_cmd->add_subcommand("materialise", "write the fixture submissions into a folder");
  mat->add_option("dest", o.fx_dest, "submissions folder to create")->required();
  mat->add_option("--fixtures", o.fx_dir, "fixture folder (default grader/fixtures)");
  mat->add_option("--solution-copies", o.fx_copies, "also add N submissions made of the reference solutions");
  mat->add_option("--only", o.fx_only, "only these fixtures");
  auto* chk = fixtures_cmd->add_subcommand("check", "compare a batch's results with the fixtures' expectations");
  chk->add_option("out", o.fx_out, "the batch's --out folder")->required();
  chk->add_option("--fixtures", o.fx_dir, "fixture folder (default grader/fixtures)");
  chk->add_option("--gpu", o.fx_gpu, "yes | no | auto: which expectations apply")
      ->check(CLI::IsMember({"yes", "no", "auto"}));
  chk->add_option("--only", o.fx_only, "only these fixtures");
  cmds.fixtures_materialise = mat;
  cmds.fixtures_check = chk;
}

// Every option and sub-command, in the order --help lists them.
Subcommands add_command_line(CLI::App& app, CliOptions& o) {
  Subcommands cmds;
  add_grade_options(app, o);
  cmds.batch = add_batch_command(app, o);
  cmds.merge = add_merge_command(app, o);
  cmds.release = add_release_command(app, o);
  cmds.doctor = app.add_subcommand("doctor", "check the toolkit, driver, GPU, CMake and libraries");
  add_fixtures_commands(app, o, cmds);
  return cmds;
}

// Carries the shared options (--repo, --build-dir, --grading-dir, --sanitize-strict) into the options structs.
void apply_shared_options(CliOptions& o) {
  BuildOptions& build = o.grade.build;
  if (!o.repo.empty()) {
    g_repo = fs::absolute(o.repo);
    build.root = g_repo;
    o.release.root = g_repo;
  }
  if (!o.build_dir.empty()) build.build_dir = o.build_dir;
  for (const auto& d : o.grading_dirs) build.grading_dirs.push_back(fs::absolute(d));
  if (o.grade.sanitize_strict) o.grade.sanitize = true;
}

// `labgrade batch`: the batch takes the shared build and grading options too.
int run_batch(CliOptions& o) {
  const GradeOptions& grade = o.grade;
  BatchOptions& batch = o.batch;
  batch.submissions = o.submissions;
  batch.out = o.out;
  batch.build = grade.build;
  batch.jobs = grade.build.jobs;
  batch.sanitize = grade.sanitize;
  batch.sanitize_strict = grade.sanitize_strict;
  batch.no_sanitizer_checks = grade.no_sanitizer_checks;
  batch.gate_timeout = grade.gate_timeout;
  batch.no_hidden = grade.no_hidden;
  batch.lab_jobs = grade.lab_jobs;
  if (batch.labs.empty()) batch.labs = grade.labs;
  return batch_main(batch);
}

// `labgrade doctor`: reports on the build the shared options name.
int run_doctor(CliOptions& o) {
  o.doctor.build_dir = o.grade.build.build_dir;
  o.doctor.preset = o.grade.build.preset;
  o.doctor.root = g_repo;
  return doctor_main(o.doctor);
}

// Plain `labgrade [LAB...]`: the first run when nothing says what to grade, else those labs.
int run_grade(CliOptions& o) {
  GradeOptions& grade = o.grade;
  const BuildOptions& build = grade.build;
  grade.color = isatty(1) && !std::getenv("NO_COLOR");
  // `labgrade` alone is a student's question "where am I?": only the labs with code written, then what next.
  // Anything that names what to grade or where results go (labs, --solutions, reports, recipe folders, a
  // prebuilt tree) is a script or an instructor asking for exactly that, as before.
  const bool first_run = grade.labs.empty() && !grade.solutions && o.grading_dirs.empty() && !build.no_build &&
                         grade.outputs.json.empty() && grade.outputs.junit.empty() && grade.outputs.csv.empty() &&
                         grade.outputs.markdown.empty();
  if (first_run) return first_run_main(grade);
  if (grade.labs.size() == 1 && grade.labs[0] == "all") grade.labs.clear();
  // Without a GPU every GPU gate skips, right or wrong: say so before the results and again under them.
  const CudaInfo cuda = query_cuda();
  const bool no_gpu = !cuda.ok;
  if (no_gpu) print_no_gpu_notice(std::cout, cuda.error);
  int rc = grade_main(grade);
  if (no_gpu) std::cout << "\n" << kNoGpuReminder << "\n";
  return rc;
}

// Runs what the parsed command line asks for; returns the exit status.
int run_parsed(CliOptions& o, const Subcommands& cmds) {
  apply_shared_options(o);
  if (*cmds.batch) return run_batch(o);
  if (*cmds.merge) {
    std::vector<fs::path> parts(o.merge_parts.begin(), o.merge_parts.end());
    return merge_main(o.merge_out, parts, o.merge_submissions);
  }
  if (*cmds.release) {
    o.release.out = o.release_out;
    return release_main(o.release);
  }
  if (*cmds.doctor) return run_doctor(o);
  if (*cmds.fixtures_materialise) return fixtures_materialise(o.fx_dest, o.fx_dir, o.fx_copies, o.fx_only);
  if (*cmds.fixtures_check) return fixtures_check(o.fx_out, o.fx_dir, o.fx_gpu, o.fx_only);
  return run_grade(o);
}

}  // namespace

int main(int argc, char** argv) {
  // Internal entry points, kept out of CLI11: they run inside the sandbox or as a throwaway child.
  if (argc > 1 && std::strcmp(argv[1], "__sandbox-exec") == 0) return sandbox_exec_main(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "__probe-cuda") == 0) return probe_cuda_main();

  // A graded run uses every case of every gate: a LABKIT_SANITIZER left exported in the shell would make the gates
  // leave out their largest cases (labkit::gate::under_sanitizer). The sanitizer runs set it themselves.
  ::unsetenv("LABKIT_SANITIZER");
  ::unsetenv("LABKIT_SANITIZER_SMALL");

  CLI::App app{"labgrade: builds, runs and scores the gates of the CUDA lab workbook"};
  app.fallthrough();  // the shared options may follow a sub-command
  CliOptions opts;
  const Subcommands cmds = add_command_line(app, opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    return run_parsed(opts, cmds);
  } catch (const UserError& e) {
    std::cerr << "labgrade: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "labgrade: internal error: " << e.what() << "\n";
    return 2;
  }
}
