// `labgrade [LAB...]` on the fake lab's prebuilt gate binaries: the student skeleton and the solution, every output
// format, without a GPU.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "devices.h"
#include "progress.h"
#include "scoring.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

std::map<std::string, std::string> statuses(const nlohmann::json& gradescope) {
  std::map<std::string, std::string> out;
  for (const auto& t : gradescope["tests"]) {
    std::string name = t["name"];  // "lab99 cpu.add: title"
    std::string id = name.substr(6, name.find(':') - 6);
    std::string output = t["output"];
    out[id] = output.substr(8, output.find('\n') - 8);  // "status: X"
  }
  return out;
}

CommandResult grade(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      test::labgrade_exe().string(), "--repo",        test::repo_root().string(),       "--no-build",     "--build-dir",
      test::build_dir().string(),    "--grading-dir", test::fakelab_grading().string(), "--gate-timeout", "60"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv, 600);
}

// A copy of the fake lab's folder under `dir` (its student/ empty, for the test to fill), with a recipe that points at
// it (the compile commands stay the build's). Returns the student folder.
fs::path copy_of_fake_lab(const fs::path& dir) {
  const fs::path lab = dir / "labs/99_fake";
  fs::create_directories(lab / "student");
  auto recipe = nlohmann::json::parse(read_file(test::fakelab_grading() / "lab99.json"));
  recipe["lab_dir"] = lab.string();
  fs::create_directories(dir / "grading");
  write_file_atomic(dir / "grading/lab99.json", recipe.dump(2));
  return lab / "student";
}

// labgrade on that copy's student tree, lab 99, with these options.
CommandResult grade_copy(const fs::path& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {test::labgrade_exe().string(), "--repo", test::repo_root().string(), "--no-build",
                                   "--build-dir", test::build_dir().string(), "--grading-dir",
                                   (dir / "grading").string(), "--gate-timeout", "60", "99"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_command(argv, 600);
}

}  // namespace

TEST_CASE("grading the solutions of the fake lab", "[local]") {
  test::TempDir dir("local");
  auto r =
      grade({"--solutions", "99", "--json", (dir.path / "r.json").string(), "--junit", (dir.path / "r.xml").string(),
             "--csv", (dir.path / "r.csv").string(), "--markdown", (dir.path / "r.md").string()});
  INFO(r.output);
  bool gpu = query_cuda(test::labgrade_exe()).ok;
  CHECK(r.exit_code == (gpu ? 0 : 1));  // without a GPU step1.correct is skipped, so not every gate passed
  CHECK_THAT(r.output, ContainsSubstring("cpu.speed"));
  auto j = nlohmann::json::parse(read_file(dir.path / "r.json"));
  auto st = statuses(j);
  CHECK(st["cpu.add"] == "passed");
  CHECK(st["cpu.sum"] == "passed");
  CHECK(st["cpu.speed"] == "passed");
  CHECK(st["step2.clamp"] == "passed");
  CHECK(st["cpu.negative"] == "passed");  // the hidden gate: graded in the instructor's tree
  CHECK(st["step1.correct"] == (gpu ? "passed" : "skipped"));
  if (!gpu) CHECK_THAT(r.output, ContainsSubstring("no CUDA device"));
  CHECK(j["max_score"] == 23.0);
  REQUIRE(j.contains("leaderboard"));
  CHECK(j["leaderboard"][0]["value"].get<double>() > 2.0);
  CHECK_THAT(read_file(dir.path / "r.xml"), ContainsSubstring("<testsuite name=\"lab99\""));
  CHECK_THAT(read_file(dir.path / "r.csv"), ContainsSubstring("local,99,cpu.speed,passed,5,5,ratio,"));
  CHECK_THAT(read_file(dir.path / "r.md"), ContainsSubstring("| `cpu.add` | passed | 2/2 |"));
  // The lab's own run time is kept for the next run, which starts the longest labs first.
  std::ifstream times(test::build_dir() / "grading" / "logs" / "solution" / "run-times.txt");
  std::string key;
  double secs = 0, lab99 = 0;
  while (times >> key >> secs)
    if (key == "lab99") lab99 = secs;
  CHECK(lab99 > 0);
}

TEST_CASE("grading the skeleton: every step not implemented", "[local]") {
  test::TempDir dir("skeleton");
  auto r = grade({"fake", "--no-hidden", "--json", (dir.path / "r.json").string()});
  INFO(r.output);
  CHECK(r.exit_code == 1);
  auto st = statuses(nlohmann::json::parse(read_file(dir.path / "r.json")));
  CHECK(st.count("cpu.negative") == 0);  // --no-hidden
  CHECK(st["cpu.add"] == "not_implemented");
  CHECK(st["cpu.speed"] == "not_implemented");
  CHECK(st["step2.clamp"] == "not_implemented");
  CHECK_THAT(r.output, ContainsSubstring("not implemented: add"));
}

TEST_CASE("grading one's own tree: a broken step costs that step and a missing one is not submitted", "[local]") {
  // A copy of the fake lab's folder with the solution's files in student/, step 2 broken and step 1 deleted.
  test::TempDir dir("localsteps");
  const fs::path student = copy_of_fake_lab(dir.path);
  fs::copy_file(test::fakelab_root() / "solutions/99_fake/fake.cu", student / "fake.cu");
  std::ofstream(student / "step2_clamp.cu")
      << "#include \"fake.h\"\nnamespace lab99 {\nint clamp(int x, int, int) { return x }  // no semicolon\n}\n";
  auto r = grade_copy(dir.path, {"--json", (dir.path / "r.json").string()});
  INFO(r.output);
  CHECK(r.exit_code == 1);
  auto st = statuses(nlohmann::json::parse(read_file(dir.path / "r.json")));
  CHECK(st["cpu.add"] == "passed");
  CHECK(st["cpu.sum"] == "passed");
  CHECK(st["step2.clamp"] == "build_failed");
  CHECK(st["step1.correct"] == "not_submitted");
  CHECK_THAT(r.output, ContainsSubstring("student/step2_clamp.cu("));
}

TEST_CASE("doctor reports this machine and fails only on missing tools", "[local]") {
  auto r = run_command({test::labgrade_exe().string(), "--repo", test::repo_root().string(), "doctor", "--build-dir",
                        test::build_dir().string()},
                       120);
  INFO(r.output);
  CHECK(r.exit_code == 0);  // nvcc and cmake are installed wherever these tests build
  CHECK_THAT(r.output, ContainsSubstring("nvcc"));
  CHECK_THAT(r.output, ContainsSubstring("cmake"));
  if (!query_cuda(test::labgrade_exe()).ok) CHECK_THAT(r.output, ContainsSubstring("GPU gates will be skipped"));
}

namespace {
// Puts a stand-in nvidia-smi first on PATH for the scope: two GPUs, two compute processes on them (the second with
// no memory figure and a comma in its name, as containers and odd paths give).
struct BusyGpus {
  test::TempDir dir{"busygpus"};
  std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  BusyGpus() {
    const fs::path smi = dir.path / "nvidia-smi";
    {
      std::ofstream f(smi);
      f << "#!/bin/sh\ncase \"$1\" in\n"
           "  --query-compute-apps=*) printf 'GPU-aaaa, 4242, 3120 MiB, /usr/bin/python3\\n"
           "GPU-bbbb, 77, [N/A], /opt/odd,name\\n' ;;\n"
           "  --query-gpu=index,uuid) printf '0, GPU-aaaa\\n1, GPU-bbbb\\n' ;;\n"
           "  --query-gpu=name,driver_version) printf 'NVIDIA Stand-in, 580.00\\n' ;;\n"
           "  *) exit 2 ;;\nesac\n";
    }
    fs::permissions(smi, fs::perms::owner_all);
    setenv("PATH", (dir.path.string() + ":" + saved).c_str(), 1);
  }
  ~BusyGpus() { setenv("PATH", saved.c_str(), 1); }
};
}  // namespace

TEST_CASE("other processes on the GPUs: parsed from nvidia-smi, named by GPU, reported by doctor", "[local]") {
  // The parser alone: rows it cannot read (a message, a blank line, a pid that is not a number) are left out, and a
  // GPU the index list does not name keeps its UUID.
  const auto procs = parse_gpu_processes(
      "GPU-aaaa, 4242, 3120 MiB, /usr/bin/python3\nNo running processes found\n\nGPU-cccc, x, 1 MiB, y\n"
      "GPU-dddd, 9, 5 MiB, z\n",
      "0, GPU-aaaa\n");
  REQUIRE(procs.size() == 2);
  CHECK(describe_gpu_processes(procs) ==
        "pid 4242 (/usr/bin/python3, 3120 MiB) on GPU 0; pid 9 (z, 5 MiB) on GPU-dddd");
  CHECK(parse_gpu_processes("", "0, GPU-aaaa\n").empty());
  // A worker's processes are those on its GPUs' UUIDs (nvidia-smi's key, which the CUDA query gives too).
  CHECK(procs[0].uuid == "GPU-aaaa");
  CHECK(on_gpus(procs, {"GPU-dddd"}).size() == 1);
  CHECK(on_gpus(procs, {"GPU-dddd"})[0].pid == "9");
  CHECK(on_gpus(procs, {"GPU-bbbb"}).empty());
  CHECK(on_gpus(procs, {}).empty());
  BusyGpus busy;
  CHECK(describe_gpu_processes(gpu_processes()) ==
        "pid 4242 (/usr/bin/python3, 3120 MiB) on GPU 0; pid 77 (/opt/odd,name) on GPU 1");
  auto r = run_command({test::labgrade_exe().string(), "--repo", test::repo_root().string(), "doctor", "--build-dir",
                        test::build_dir().string()},
                       120);
  INFO(r.output);
  CHECK(r.exit_code == 0);  // a warning, not a failure
  CHECK_THAT(r.output, ContainsSubstring("other processes compute on the GPUs now: pid 4242"));
}

TEST_CASE("other processes on a GPU that workers share: the batch's own runs are left out", "[local]") {
  // A worker's look at its GPU keeps only processes outside the batch: a child of this process and a grandchild
  // (as a gate binary under bubblewrap is) are the batch's own, pid 1 is someone else's, and a pid that has no /proc
  // entry (ended since nvidia-smi listed it) is left out.
  int hold[2], report[2];
  REQUIRE(pipe(hold) == 0);
  REQUIRE(pipe(report) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child starts a grandchild, reports its pid, and both wait until the parent closes `hold`.
    close(hold[1]);
    close(report[0]);
    char c;
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      (void)!read(hold[0], &c, 1);
      _exit(0);
    }
    (void)!write(report[1], &grandchild, sizeof grandchild);
    (void)!read(hold[0], &c, 1);
    waitpid(grandchild, nullptr, 0);
    _exit(0);
  }
  close(hold[0]);
  close(report[1]);
  pid_t grandchild = 0;
  REQUIRE(read(report[0], &grandchild, sizeof grandchild) == static_cast<ssize_t>(sizeof grandchild));
  close(report[0]);
  REQUIRE(grandchild > 0);
  CHECK(descends_from(getpid(), getpid()));
  CHECK(descends_from(child, getpid()));
  CHECK(descends_from(grandchild, getpid()));
  CHECK(descends_from(grandchild, child));
  CHECK_FALSE(descends_from(getpid(), child));
  CHECK_FALSE(descends_from(1, getpid()));
  const auto procs = parse_gpu_processes(
      "GPU-aaaa, " + std::to_string(grandchild) + ", 100 MiB, gate\nGPU-aaaa, 1, 5 MiB, someone\n"
      "GPU-aaaa, 999999999, 7 MiB, gone\n",
      "0, GPU-aaaa\n");
  REQUIRE(procs.size() == 3);
  const auto others = others_than(procs, getpid());
  REQUIRE(others.size() == 1);
  CHECK(others[0].pid == "1");
  close(hold[1]);  // both wake up and end
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  // The grandchild has ended too (its parent reaped it before exiting): gone from /proc, and left out as well.
  CHECK_FALSE(descends_from(grandchild, getpid()));
  CHECK(others_than(procs, getpid()).size() == 1);
}

TEST_CASE("grading one's own tree with labs side by side: a lab's speed gates are timed as soon as it is built",
          "[local]") {
  // The solution's files in student/, graded with two labs at a time (the default without a GPU is one): the speed
  // process starts once the lab is linked, on the grader's own thread, and the untimed gates after the compile.
  test::TempDir dir("localpipeline");
  const fs::path student = copy_of_fake_lab(dir.path);
  for (const char* f : {"fake.cu", "step1_scale.cu", "step2_clamp.cu"})
    fs::copy_file(test::fakelab_root() / "solutions/99_fake" / f, student / f);
  auto r = grade_copy(dir.path, {"--lab-jobs", "2", "--json", (dir.path / "r.json").string()});
  INFO(r.output);
  const bool gpu = query_cuda(test::labgrade_exe()).ok;
  CHECK(r.exit_code == (gpu ? 0 : 1));  // without a GPU step1.correct is skipped
  auto st = statuses(nlohmann::json::parse(read_file(dir.path / "r.json")));
  CHECK(st["cpu.speed"] == "passed");
  CHECK(st["cpu.add"] == "passed");
  CHECK(st["step2.clamp"] == "passed");
  CHECK(st["step1.correct"] == (gpu ? "passed" : "skipped"));
  const auto at = [&](const std::string& text) { return r.output.find(text); };
  REQUIRE(at("compiled lab 99's 3 student file(s)") != std::string::npos);
  REQUIRE(at("timing the speed gates of lab 99") != std::string::npos);
  REQUIRE(at("running lab 99") != std::string::npos);
  CHECK(at("compiled lab 99's") < at("timing the speed gates of lab 99"));
  CHECK(at("timing the speed gates of lab 99") < at("1 lab(s) compiled in"));
  CHECK(at("1 lab(s) compiled in") < at("running lab 99"));
}
