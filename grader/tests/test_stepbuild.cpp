// One step, one unit: the grader compiles each student file with the build's own command, links the skeleton's
// object in place of a step that does not compile, does not link or is missing, and attributes the gates; the
// rubric as CMake reads it; run_command's time limit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "recipe.h"
#include "stepbuild.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("files and gates belong to steps by name", "[stepbuild]") {
  CHECK(step_of_source("step5a_transposed_a.cu") == "step5a");
  CHECK(step_of_source("step1_scale.cu") == "step1");
  CHECK(step_of_source("sub/step12_x.cu") == "step12");
  CHECK(step_of_source("fake.cu") == "");
  CHECK(step_of_source("step_x.cu") == "");
  CHECK(step_of_source("steps1_x.cu") == "");
  CHECK(step_of_source("step5A_x.cu") == "");
  CHECK(step_of_gate("step5a.correct") == "step5a");
  CHECK(step_of_gate("step1.speed") == "step1");
  CHECK(step_of_gate("cpu.add") == "");
  CHECK(step_of_gate("step1") == "");
}

TEST_CASE("a failed link names the functions; nm says which skeleton defines them", "[stepbuild]") {
  auto u = undefined_symbols(
      "/usr/bin/ld: obj/lab99/fake.cu.o: in function `f':\n"
      "x.cu:(.text+0x1): undefined reference to `lab99::clamp(int, int, int)'\n"
      "x.cu:(.text+0x9): undefined reference to `lab99::clamp(int, int, int)'\n"
      "y.cu:(.text+0x2): undefined reference to `lab99::scale(float*, int, float)'\n");
  CHECK(u == std::vector<std::string>{"lab99::clamp(int, int, int)", "lab99::scale(float*, int, float)"});
  auto d = defined_symbols_demangled(
      "lab99::clamp(int, int, int) T 0000000000000000 0000000000000015\n"
      "labkit::NotImplemented::~NotImplemented() W 0000000000000000 0000000000000020\n"
      "__cudaRegisterLinkedBinary U\n");
  CHECK(d == std::vector<std::string>{"lab99::clamp(int, int, int)", "labkit::NotImplemented::~NotImplemented()"});
}

TEST_CASE("the compile command comes from compile_commands.json", "[stepbuild][recipe]") {
  CHECK(shell_split(R"(nvcc -DA="x y" 'q r' a\ b "--generate-code=arch=compute_80,code=[compute_80,sm_80]")") ==
        std::vector<std::string>{"nvcc", "-DA=x y", "q r", "a b", "--generate-code=arch=compute_80,code=[compute_80,sm_80]"});
  const std::string db = R"([
    {"directory": "/b/labs/02", "file": "/src/labs/02/student/other.cu", "command": "nvcc -c /src/labs/02/student/other.cu -o o.o"},
    {"directory": "/b/labs/02", "file": "/src/labs/02/student/step1_x.cu",
     "command": "/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler --options-file CMakeFiles/t.dir/includes_CUDA.rsp -O3 -MD -MT a.o -MF a.o.d --generate-code=arch=compute_90,code=[compute_90,sm_90] -x cu -c /src/labs/02/student/step1_x.cu -o CMakeFiles/t.dir/step1_x.cu.o"}])";
  auto argv = compile_command_for(db, "/src/labs/02/student/step1_x.cu", "test");
  CHECK(argv == std::vector<std::string>{"/usr/local/cuda/bin/nvcc", "-forward-unknown-to-host-compiler",
                                         "--options-file", "/b/labs/02/CMakeFiles/t.dir/includes_CUDA.rsp", "-O3",
                                         "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-x", "cu", "-c",
                                         Recipe::kSourcePlaceholder, "-o", Recipe::kObjectPlaceholder});
  CHECK_THROWS_WITH(compile_command_for(db, "/src/labs/02/student/missing.cu", "test"),
                    ContainsSubstring("no entry for /src/labs/02/student/missing.cu"));
}

TEST_CASE("the fake lab's recipe: the build's compile command and a skeleton object per file", "[stepbuild][recipe]") {
  Recipe r = load_recipe(test::fakelab_grading() / "lab99.json");
  REQUIRE(r.student_sources == std::vector<std::string>{"fake.cu", "step1_scale.cu", "step2_clamp.cu"});
  REQUIRE(r.compile.size() == 3);
  REQUIRE(r.skeleton_objects.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK_THAT(r.skeleton_objects[k], ContainsSubstring("/" + r.student_sources[k] + ".o"));
    auto argv = r.compile_argv(k, "/s/" + r.student_sources[k], "/o/x.o");
    CHECK(fs::path(argv[0]).filename() == "nvcc");
    CHECK(std::find(argv.begin(), argv.end(), "/s/" + r.student_sources[k]) != argv.end());
    CHECK(std::find(argv.begin(), argv.end(), "/o/x.o") != argv.end());
  }
  // The include folders inside CMake's options file are referenced paths (the batch masks tests/hidden below them),
  // also when the recipe's lab_dir is elsewhere.
  r.lab_dir = "/nonexistent/labs/99_fake";
  auto refs = r.referenced_paths();
  CHECK(std::find(refs.begin(), refs.end(), test::fakelab_root() / "labs/99_fake") != refs.end());
  // The architectures are the build's (the ci preset: 80 and 90), not a translation of them.
  std::string line = join(r.compile[1], " ");
  const std::string arch = cmake_cache_value(test::build_dir(), "CMAKE_CUDA_ARCHITECTURES");
  if (arch == "80;90") CHECK_THAT(line, ContainsSubstring("code=[compute_90,sm_90]"));
}

TEST_CASE("the rubric as CMake reads it: labkit parser also where regular expressions fail", "[stepbuild][rubric]") {
  auto r = run_command({LABGRADE_RUBRIC_TOOL, (test::repo_root() / "grader/tests/rubric_tricky.toml").string()}, 60);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output == "step1.single cpu visible\nstep2.inline correctness visible\nstep3.speed speed hidden\n");
  test::TempDir dir("rubric");
  std::ofstream(dir.path / "bad.toml") << "lab = \"1\"\n[[gate]]\nid = \"a\"\nkind = \"fast\"\n";
  auto bad = run_command({LABGRADE_RUBRIC_TOOL, (dir.path / "bad.toml").string()}, 60);
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.output, ContainsSubstring("kind must be cpu, correctness or speed"));
}

TEST_CASE("run_command times out a child that closed its output and keeps running", "[util]") {
  auto start = std::chrono::steady_clock::now();
  auto r = run_command({"/bin/sh", "-c", "echo before; exec >&- 2>&-; sleep 30"}, 2);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(r.timed_out);
  CHECK(r.exit_code == -1);
  CHECK(s < 10);
  CHECK_THAT(r.output, ContainsSubstring("before"));
  // A child that exits while something it started holds the output open is not waited for.
  start = std::chrono::steady_clock::now();
  auto q = run_command({"/bin/sh", "-c", "sleep 30 & echo done"}, 20);
  s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK_FALSE(q.timed_out);
  CHECK(q.exit_code == 0);
  CHECK(s < 10);
  CHECK_THAT(q.output, ContainsSubstring("done"));
}

TEST_CASE("what run_command started ends when the process that started it is killed", "[util]") {
  // The child has a process group of its own, so neither a terminal's Ctrl-C nor a kill of the caller's group
  // reaches it: a killed grader test left its labgrade batch running beside every later test.
  test::TempDir dir("orphan");
  const fs::path pid_file = dir.path / "pid";
  const pid_t caller = fork();
  if (caller == 0) {
    run_command({"/bin/sh", "-c", "echo $$ > " + pid_file.string() + ".tmp && mv " + pid_file.string() + ".tmp " +
                                      pid_file.string() + " && exec sleep 60"});
    _exit(0);
  }
  pid_t child = 0;
  for (int i = 0; i < 500 && !child; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> child)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(child > 0);
  kill(caller, SIGKILL);
  waitpid(caller, nullptr, 0);
  // The orphan is reparented and reaped; until then it may show as a zombie.
  auto alive = [&] {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid, comm, state;
    return stat >> pid >> comm >> state && state != "Z";
  };
  for (int i = 0; i < 500 && alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_FALSE(alive());
  if (alive()) kill(child, SIGKILL);
}

namespace {

// A submission of the fake lab built directly (no sandbox), from the solution with `edit` applied.
struct Built {
  LabBuild build;
  LabResult lab;
};
Built build_fake(const fs::path& dir, const std::map<std::string, std::string>& files, const Recipe& r,
                 int jobs = 1, JobTokens* tokens = nullptr) {
  LabBuildSpec spec;
  spec.jobs = jobs;
  spec.tokens = tokens;
  fs::create_directories(dir / "src");
  for (const auto& s : r.student_sources) {
    auto it = files.find(s);
    if (it == files.end()) {
      spec.present.push_back(false);
      continue;
    }
    write_file_atomic(dir / "src" / s, it->second);
    spec.present.push_back(true);
  }
  spec.src_dir = dir / "src";
  spec.obj_dir = dir / "obj";
  spec.exe = dir / "gates";
  spec.log_dir = dir / "logs";
  spec.log_prefix = "lab99";
  spec.process.inherit_env = true;
  spec.process.cwd = dir;
  spec.path_rewrites = {{(dir / "src" / "").string(), "student/"}};
  Built b;
  b.build = build_lab(r, spec);
  b.lab = make_lab_result(labkit::load_rubric(r.rubric.string()), r.name, true);
  apply_build(b.lab, b.build);
  return b;
}
std::string status_of(const LabResult& lab, const std::string& id) {
  for (const auto& g : lab.gates)
    if (g.id == id) return to_string(g.status);
  return "?";
}

}  // namespace

TEST_CASE("a step that does not compile or link or is missing costs that step only", "[stepbuild]") {
  Recipe r = load_recipe(test::fakelab_grading() / "lab99.json");
  const fs::path sol = test::fakelab_root() / "solutions/99_fake";
  std::map<std::string, std::string> good;
  for (const auto& s : r.student_sources) good[s] = read_file(sol / s);
  test::TempDir dir("stepbuild");
  // One file after the other, or side by side: the same outcome file by file.
  const int jobs = GENERATE(1, 3);
  INFO("compile jobs: " << jobs);

  SECTION("step 2 does not compile, step 1 is missing") {
    auto files = good;
    files.erase("step1_scale.cu");
    files["step2_clamp.cu"] = "#include \"fake.h\"\nnamespace lab99 { int clamp(int x, int, int) { return x } }\n";
    auto b = build_fake(dir.path, files, r, jobs);
    INFO(b.build.lab_problem);
    REQUIRE(b.build.lab_problem.empty());
    CHECK(fs::exists(b.build.exe));
    CHECK(b.build.files[0].state == StepFile::State::compiled);
    CHECK(b.build.files[1].state == StepFile::State::missing);
    CHECK(b.build.files[1].object == r.skeleton_objects[1]);
    CHECK(b.build.files[2].state == StepFile::State::failed);
    CHECK(b.build.files[2].object == r.skeleton_objects[2]);
    CHECK(status_of(b.lab, "step2.clamp") == "build_failed");
    CHECK(status_of(b.lab, "step1.correct") == "not_submitted");
    CHECK(status_of(b.lab, "cpu.add") == "missing");  // to be run
    for (const auto& g : b.lab.gates)
      if (g.id == "step2.clamp") CHECK_THAT(g.message, ContainsSubstring("student/step2_clamp.cu("));
  }
  SECTION("step 2 compiles but lacks the function the gates call: the link failure is step 2's") {
    auto files = good;
    files["step2_clamp.cu"] = "#include \"fake.h\"\nnamespace lab99 { int clamp2(int x, int, int) { return x; } }\n";
    auto b = build_fake(dir.path, files, r, jobs);
    INFO(b.build.lab_problem);
    REQUIRE(b.build.lab_problem.empty());
    CHECK(b.build.files[2].state == StepFile::State::failed);
    CHECK_THAT(b.build.files[2].message, ContainsSubstring("lab99::clamp(int, int, int)"));
    CHECK(status_of(b.lab, "step2.clamp") == "build_failed");
    CHECK(status_of(b.lab, "cpu.sum") == "missing");
  }
  SECTION("a file of the whole lab that does not compile fails the lab") {
    auto files = good;
    files["fake.cu"] = "this is not C++\n";
    auto b = build_fake(dir.path, files, r, jobs);
    CHECK_THAT(b.build.lab_problem, ContainsSubstring("student/fake.cu does not compile"));
    CHECK(status_of(b.lab, "cpu.add") == "build_failed");
    CHECK(status_of(b.lab, "step2.clamp") == "build_failed");
  }
  SECTION("nothing submitted") {
    auto b = build_fake(dir.path, {}, r, jobs);
    CHECK(b.build.lab_status == Status::not_submitted);
    CHECK(status_of(b.lab, "cpu.add") == "not_submitted");
  }
}

TEST_CASE("labs built side by side share the compile jobs and get the outcome each gets alone", "[stepbuild]") {
  Recipe r = load_recipe(test::fakelab_grading() / "lab99.json");
  const fs::path sol = test::fakelab_root() / "solutions/99_fake";
  std::map<std::string, std::string> good;
  for (const auto& s : r.student_sources) good[s] = read_file(sol / s);
  auto broken = good;
  broken["step2_clamp.cu"] = "#include \"fake.h\"\nnamespace lab99 { int clamp(int x, int, int) { return x } }\n";
  test::TempDir dir("stepbuild_side");
  // Four builds (as batch.cpp's labs of one student) on two tokens, each build with three file jobs.
  JobTokens tokens(2);
  std::vector<Built> built(4);
  for_each_concurrently(built.size(), 4, [&](std::size_t i) {
    built[i] = build_fake(dir.path / std::to_string(i), i % 2 ? broken : good, r, 3, &tokens);
  });
  for (std::size_t i = 0; i < built.size(); ++i) {
    INFO("build " << i << ": " << built[i].build.lab_problem);
    REQUIRE(built[i].build.lab_problem.empty());
    CHECK(fs::exists(built[i].build.exe));
    CHECK(status_of(built[i].lab, "step2.clamp") == (i % 2 ? "build_failed" : "missing"));
    CHECK(status_of(built[i].lab, "step1.correct") == "missing");
  }
}
