// The fixture builder (plain folders and patch.toml), the expectation rules, and taking only the student's files
// from a submission.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fstream>

#include "batch.h"
#include "fixtures.h"
#include "recipe.h"
#include "test_support.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("every fixture in grader/fixtures loads and materialises", "[fixtures]") {
  auto fixtures = load_fixtures(test::fixtures_dir());
  REQUIRE(fixtures.size() >= 16);
  test::TempDir dir("fixtures");
  std::vector<fs::path> roots = {test::repo_root(), test::fakelab_root()};
  for (const auto& f : fixtures) {
    INFO(f.name);
    CHECK_FALSE(f.expect.empty());
    CHECK_FALSE(f.lab.empty());
    materialise(f, dir.path / f.name, roots);  // every replacement matches exactly once
    // A fixture that hands in nothing for its lab (not_submitted) has no student folder, by design.
    const bool hands_in_nothing =
        f.expect.count("*") && f.expect.at("*") == std::vector<Status>{Status::not_submitted};
    CHECK(fs::exists(dir.path / f.name / "labs" / f.lab / "student") != hands_in_nothing);
    CHECK_FALSE(fs::exists(dir.path / f.name / "expect.toml"));
  }
  // A patch fixture starts from the solution and changes only what it says.
  std::string segv = read_file(dir.path / "host_segfault" / "labs/99_fake/student/fake.cu");
  CHECK_THAT(segv, ContainsSubstring("volatile int* p = nullptr"));
  CHECK_THAT(segv, ContainsSubstring("long long sum_fast"));
  // ... and the lab's other files (its other steps) are the solution's, unchanged.
  CHECK(read_file(dir.path / "host_segfault" / "labs/99_fake/student/step1_scale.cu") ==
        read_file(test::fakelab_root() / "solutions/99_fake/step1_scale.cu"));
  CHECK(fs::exists(dir.path / "host_segfault" / "labs/99_fake/student/step2_clamp.cu"));
}

TEST_CASE("a replacement must match exactly once", "[fixtures]") {
  test::TempDir dir("patch");
  auto write_patch = [&](const std::string& name, const std::string& from) {
    fs::create_directories(dir.path / name);
    std::ofstream(dir.path / name / "patch.toml")
        << "expect = { \"*\" = \"passed\" }\n[[replace]]\nfile = \"labs/99_fake/student/fake.cu\"\nfrom = \"" << from
        << "\"\nto = \"X\"\n";
    return load_fixture(dir.path / name);
  };
  std::vector<fs::path> roots = {test::fakelab_root()};
  CHECK_THROWS_WITH(materialise(write_patch("none", "no such text"), dir.path / "out1", roots),
                    ContainsSubstring("occurs 0 times"));
  CHECK_THROWS_WITH(materialise(write_patch("twice", "long long s = 0;"), dir.path / "out2", roots),
                    ContainsSubstring("occurs 2 times"));
  materialise(write_patch("once", "int add(int a, int b)"), dir.path / "out3", roots);
  CHECK_THAT(read_file(dir.path / "out3/labs/99_fake/student/fake.cu"), ContainsSubstring("X { return a + b; }"));
  // `expect` written after [[replace]] (inside that table in TOML) is accepted too.
  fs::create_directories(dir.path / "late");
  std::ofstream(dir.path / "late" / "patch.toml")
      << "[[replace]]\nfile = \"labs/99_fake/student/fake.cu\"\n"
         "from = \"a\"\nto = \"b\"\nexpect = { \"cpu.add\" = \"failed\" }\n";
  CHECK(load_fixture(dir.path / "late").expect.at("cpu.add") == std::vector<Status>{Status::failed});
}

TEST_CASE("without a GPU - GPU gates are expected to be skipped", "[fixtures]") {
  Fixture f;
  f.expect["step1.correct"] = {Status::crashed};
  f.expect["*"] = {Status::passed};
  GateResult gpu, cpu;
  gpu.id = "step1.correct";
  gpu.kind = "correctness";
  cpu.id = "cpu.add";
  cpu.kind = "cpu";
  CHECK(expected_statuses(f, gpu, true) == std::vector<Status>{Status::crashed});
  CHECK(expected_statuses(f, gpu, false) == std::vector<Status>{Status::skipped});
  CHECK(expected_statuses(f, cpu, false) == std::vector<Status>{Status::passed});
  Fixture broken;
  broken.expect["*"] = {Status::build_failed};
  CHECK(expected_statuses(broken, gpu, false) == std::vector<Status>{Status::build_failed});
  Fixture startup;
  startup.expect["*"] = {Status::crashed};
  startup.expect_nogpu["*"] = {Status::crashed};
  CHECK(expected_statuses(startup, gpu, false) == std::vector<Status>{Status::crashed});
}

TEST_CASE("on a GPU machine a multi-GPU gate skipped for want of GPUs is no failure; any other skip is",
          "[fixtures]") {
  test::TempDir dir("fewgpus");
  SubmissionResult r;
  r.student = "solution_1";
  LabResult lab;
  lab.lab = "08";
  lab.name = "08_multi_gpu_cg";
  auto gate = [](const std::string& id, Status st, const std::string& message) {
    GateResult g;
    g.id = id;
    g.kind = "correctness";
    g.status = st;
    g.message = message;
    return g;
  };
  lab.gates = {gate("step1.correct", Status::passed, ""),
               gate("step2.multi_gpu", Status::skipped, "this gate needs at least 2 GPUs; 1 found (...)"),
               gate("step3.speed", Status::skipped, "this gate needs 2 processes on 2 GPUs; this machine has 1 GPU"),
               gate("step4.correct", Status::skipped, "no CUDA device")};
  r.labs.push_back(lab);
  write_file_atomic(dir.path / "solution_1" / "result.json", to_json(r).dump());
  auto checks = check_fixtures(dir.path, {}, true, {"solution_1"});
  REQUIRE(checks.size() == 4);
  CHECK(checks[0].ok);
  CHECK(checks[1].ok);
  CHECK(checks[1].got == "skipped (fewer GPUs)");
  CHECK(checks[2].ok);
  CHECK_FALSE(checks[3].ok);  // a GPU machine where CUDA saw none: that is a failure
}

TEST_CASE("a fixture's expected diagnosis is asked of the gates that ran, not of one skipped for want of GPUs",
          "[fixtures]") {
  // lab08_stall_short_runs on a one-GPU worker: its step3.speed may fail (with the message) or skip (without it).
  test::TempDir dir("skipmsg");
  Fixture f;
  f.name = "planted-stall";
  f.lab = "08";
  f.expect["step3.speed"] = {Status::failed, Status::skipped};
  f.expect_message["step3.speed"] = "allowed for its fixed cost";
  auto result = [&](Status st, const std::string& message) {
    SubmissionResult r;
    r.student = f.name;
    LabResult lab;
    lab.lab = "08";
    lab.name = "08_multi_gpu_cg";
    GateResult g;
    g.id = "step3.speed";
    g.kind = "speed";
    g.status = st;
    g.message = message;
    lab.gates = {g};
    r.labs.push_back(lab);
    write_file_atomic(dir.path / f.name / "result.json", to_json(r).dump());
    return check_fixtures(dir.path, {f}, true, {});
  };
  auto skipped = result(Status::skipped, "this gate needs 2 GPUs and the lab sees 1 here, so it was not run");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].ok);
  auto failed_elsewhere = result(Status::failed, "ratio 0.5 < 0.7");
  REQUIRE(failed_elsewhere.size() == 1);
  CHECK_FALSE(failed_elsewhere[0].ok);  // it ran and failed, but not for the reason the fixture plants
  auto failed_so = result(Status::failed, "ratio 0.5 after what was allowed for its fixed cost");
  REQUIRE(failed_so.size() == 1);
  CHECK(failed_so[0].ok);
}

TEST_CASE("only the recipe's student files are taken - never through a symbolic link", "[fixtures][batch]") {
  test::TempDir dir("copy");
  Recipe r;
  r.name = "99_fake";
  r.student_sources = {"fake.cu"};
  fs::path sub = dir.path / "sub";
  fs::create_directories(sub / "labs/99_fake/student");
  fs::create_directories(sub / "labs/99_fake/tests");
  std::ofstream(sub / "labs/99_fake/student/fake.cu") << "int x;\n";
  std::ofstream(sub / "labs/99_fake/student/junk.cu") << "junk\n";
  std::ofstream(sub / "labs/99_fake/tests/gates.cpp") << "fake tests\n";
  CHECK(copy_student_sources(sub, r, dir.path / "dest") == "");
  CHECK(read_file(dir.path / "dest/fake.cu") == "int x;\n");
  CHECK_FALSE(fs::exists(dir.path / "dest/junk.cu"));

  CHECK_THAT(copy_student_sources(dir.path / "nobody", r, dir.path / "d2"), ContainsSubstring("not submitted"));

  fs::path link_file = dir.path / "link_file";
  fs::create_directories(link_file / "labs/99_fake/student");
  fs::create_symlink(test::fakelab_root() / "solutions/99_fake/fake.cu", link_file / "labs/99_fake/student/fake.cu");
  CHECK_THAT(copy_student_sources(link_file, r, dir.path / "d3"), ContainsSubstring("symbolic link"));

  fs::path link_dir = dir.path / "link_dir";
  fs::create_directories(link_dir / "labs/99_fake");
  fs::create_directory_symlink(test::fakelab_root() / "solutions/99_fake", link_dir / "labs/99_fake/student");
  CHECK_THAT(copy_student_sources(link_dir, r, dir.path / "d4"), ContainsSubstring("symbolic link"));
  CHECK_FALSE(fs::exists(dir.path / "d4/fake.cu"));
}

TEST_CASE("a missing step file is left to the skeleton; names come from the recipe only", "[fixtures][batch]") {
  test::TempDir dir("copysteps");
  Recipe r;
  r.name = "99_fake";
  r.student_sources = {"fake.cu", "step1_scale.cu", "step2_clamp.cu"};
  fs::path sub = dir.path / "sub";
  fs::create_directories(sub / "labs/99_fake/student");
  std::ofstream(sub / "labs/99_fake/student/fake.cu") << "int x;\n";
  std::ofstream(sub / "labs/99_fake/student/step2_clamp.cu") << "int y;\n";
  // A file named like another lab's or with a path in it is never taken: only the recipe's names are looked up.
  std::ofstream(sub / "labs/99_fake/student/step1_scale.cu.bak") << "int z;\n";
  fs::create_directories(sub / "labs/01_matmul/student");
  std::ofstream(sub / "labs/01_matmul/student/step1_scale.cu") << "int w;\n";
  std::vector<bool> present;
  bool absent = true;
  CHECK(copy_student_sources(sub, r, dir.path / "dest", &absent, &present) == "");
  CHECK_FALSE(absent);
  CHECK(present == std::vector<bool>{true, false, true});
  CHECK_FALSE(fs::exists(dir.path / "dest/step1_scale.cu"));
  CHECK(read_file(dir.path / "dest/step2_clamp.cu") == "int y;\n");
  // Without `present` (and for a file that is no step's) a missing file is still the lab's problem.
  CHECK_THAT(copy_student_sources(sub, r, dir.path / "d2"), ContainsSubstring("step1_scale.cu is missing"));
  fs::remove(sub / "labs/99_fake/student/fake.cu");
  CHECK_THAT(copy_student_sources(sub, r, dir.path / "d3", &absent, &present),
             ContainsSubstring("student/fake.cu is missing"));
}

TEST_CASE("build errors are summarised for students", "[fixtures]") {
  std::string link =
      "/usr/bin/ld: /tmp/x/obj/lab99/fake.cu.o: in function `f':\n"
      "fake.cu:(.text+0x1): undefined reference to `lab99::sum(std::vector<int, std::allocator<int> > const&)'\n"
      "collect2: error: ld returned 1 exit status\n";
  std::string s = summarize_build_errors(link, {{"/tmp/x/", ""}});
  CHECK_THAT(s, ContainsSubstring("missing function"));
  CHECK_THAT(s, ContainsSubstring("lab99::sum(std::vector"));
  std::string nvcc =
      "/tmp/x/src/labs/99_fake/student/fake.cu(7): error: expected a \";\"\n"
      "  int add(int a, int b) { return a + b }\n"
      "                                      ^\n\n"
      "1 error detected in the compilation of \"/tmp/x/src/labs/99_fake/student/fake.cu\".\n";
  std::string c = summarize_build_errors(nvcc, {{"/tmp/x/src/labs/99_fake/student/", "student/"}});
  CHECK_THAT(c, ContainsSubstring("student/fake.cu(7): error: expected a \";\""));
  CHECK_THAT(c, ContainsSubstring("^"));
}
