// The student release: rubric rewriting, and a release of this repository that configures as it is.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "labkit/rubric.h"
#include "release.h"
#include "test_support.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("hidden gates are removed from a rubric with their comments - the rest is kept", "[release]") {
  std::string text = read_file(test::fakelab_root() / "labs/99_fake/rubric.toml");
  int dropped = 0;
  std::string out = strip_hidden_gates(text, "rubric.toml", &dropped);
  CHECK(dropped == 1);
  auto r = labkit::parse_rubric(out, "out");
  CHECK(r.gates.size() == 5);
  CHECK(r.find("cpu.negative") == nullptr);
  CHECK(r.leaderboard_gate == "cpu.speed");
  CHECK_THAT(out, ContainsSubstring("# Rubric of the grader's fake lab"));
  CHECK(out.find("# Hidden: negative numbers") == std::string::npos);
}

TEST_CASE("a hidden gate in the middle - multi-line strings and the comments of the next gate", "[release]") {
  std::string text = R"(lab = "05"
# gate a
[[gate]]
id = "a"
hint = """
[[gate]] inside a string
"""
# gate h (hidden)
[[gate]]
id = "h"
hidden = true

# gate b: keep this comment
[[gate]]
id = "b"
)";
  std::string out = strip_hidden_gates(text, "r.toml");
  auto r = labkit::parse_rubric(out, "out");
  REQUIRE(r.gates.size() == 2);
  CHECK(r.gates[0].id == "a");
  CHECK(r.gates[1].id == "b");
  CHECK_THAT(out, ContainsSubstring("# gate b: keep this comment"));
  CHECK_THAT(out, ContainsSubstring("[[gate]] inside a string"));
  CHECK(out.find("gate h") == std::string::npos);
  CHECK_THROWS(
      strip_hidden_gates("lab = \"1\"\n[leaderboard]\ngate = \"h\"\n[[gate]]\nid = \"h\"\nhidden = true\n"
                         "[[gate]]\nid = \"v\"\n",
                         "lb.toml"));
}

TEST_CASE("the release reads the rubric's tables through toml++ - quoting and indentation and sub-tables", "[release]") {
  std::string text = read_file(test::repo_root() / "grader/tests/rubric_tricky.toml");
  int dropped = 0;
  std::string out = strip_hidden_gates(text, "rubric_tricky.toml", &dropped);
  CHECK(dropped == 1);
  auto r = labkit::parse_rubric(out, "out");
  REQUIRE(r.gates.size() == 2);
  CHECK(r.gates[0].id == "step1.single");
  CHECK(r.gates[1].id == "step2.inline");
  CHECK_THAT(out, ContainsSubstring("[gate.notes]"));  // step 2's sub-table stays with step 2
  CHECK(out.find("step3.speed") == std::string::npos);
}

TEST_CASE("labgrade release writes a tree without solutions or hidden gates that configures", "[release]") {
  test::TempDir dir("release");
  fs::path rel = dir.path / "rel";
  auto r =
      run_command({test::labgrade_exe().string(), "--repo", test::repo_root().string(), "release", rel.string()}, 300);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(rel / "CMakeLists.txt"));
  CHECK(fs::exists(rel / "grader/CMakeLists.txt"));
  CHECK(fs::exists(rel / "grader/fixtures/EXPECTED.md"));
  CHECK_FALSE(fs::exists(rel / "solutions"));
  CHECK_FALSE(fs::exists(rel / "grader/fixtures/planted"));
  CHECK_FALSE(fs::exists(rel / "build"));
  std::error_code ec;
  for (const auto& lab : fs::directory_iterator(rel / "labs", ec)) {
    INFO(lab.path().string());
    CHECK_FALSE(fs::exists(lab.path() / "tests/hidden"));
    if (!fs::exists(lab.path() / "rubric.toml")) continue;
    auto rubric = labkit::load_rubric((lab.path() / "rubric.toml").string());
    for (const auto& g : rubric.gates) CHECK_FALSE(g.hidden);
    // The pristine skeleton beside student/: what labgrade links in place of a step that does not compile.
    for (const auto& f : fs::directory_iterator(lab.path() / "student", ec)) {
      INFO(f.path().string());
      CHECK(read_file(lab.path() / ".skeleton" / f.path().filename()) == read_file(f.path()));
    }
  }
  // The release must configure as it is (no solutions/, no hidden tests).
  auto cfg = run_command({"cmake", "--preset", "ci"}, 600, rel);
  INFO(cfg.output);
  CHECK(cfg.exit_code == 0);
  // ... and its build compiles the skeleton from .skeleton/, not from the student's own files.
  for (const auto& f : fs::directory_iterator(rel / "build/ci/grading", ec)) {
    if (f.path().extension() != ".json") continue;
    INFO(f.path().string());
    CHECK_THAT(read_file(f.path()), ContainsSubstring("/.skeleton\""));
  }
}

TEST_CASE("labgrade release refuses links that would ship a solution or a file the students lack", "[release]") {
  // A small workbook (a git work tree of its own, so that the release lists its files with git as in a checkout,
  // wherever TMPDIR is): a lab's student file, a solution, a hidden test.
  test::TempDir dir("release-links");
  const fs::path root = dir.path / "wb";
  fs::create_directories(root);
  REQUIRE(run_command({"git", "init", "-q", root.string()}, 60).exit_code == 0);
  write_file_atomic(root / "labs/01_x/student/step1.cu", "// skeleton\n");
  write_file_atomic(root / "solutions/01_x/step1.cu", "// the answer\n");
  write_file_atomic(root / "labs/01_x/tests/hidden/case.cpp", "// hidden\n");
  write_file_atomic(root / "docs/notes.md", "notes\n");
  ReleaseOptions opts;
  opts.root = root;
  opts.out = dir.path / "rel";
  SECTION("a plain workbook is released, links inside it that a release keeps included") {
    fs::create_symlink("notes.md", root / "docs/same-notes.md");
    CHECK(release_main(opts) == 0);
    CHECK(read_file(opts.out / "labs/01_x/.skeleton/step1.cu") == "// skeleton\n");
    CHECK(fs::is_symlink(opts.out / "docs/same-notes.md"));
  }
  SECTION("a student file that links to its solution") {
    fs::remove(root / "labs/01_x/student/step1.cu");
    fs::create_symlink("../../../solutions/01_x/step1.cu", root / "labs/01_x/student/step1.cu");
    CHECK_THROWS_WITH(release_main(opts), ContainsSubstring("labs/01_x/student/step1.cu is a symbolic link"));
    CHECK_FALSE(fs::exists(opts.out));  // refused before anything was written
  }
  SECTION("a link elsewhere to what a release leaves out, or out of the workbook") {
    fs::create_symlink("../labs/01_x/tests/hidden/case.cpp", root / "docs/case.cpp");
    CHECK_THROWS_WITH(release_main(opts), ContainsSubstring("which a release leaves out"));
    fs::remove(root / "docs/case.cpp");
    fs::create_symlink("../../outside.md", root / "docs/host");
    CHECK_THROWS_WITH(release_main(opts), ContainsSubstring("out of the workbook"));
    fs::remove(root / "docs/host");
    fs::create_symlink(root / "docs/notes.md", root / "docs/abs");  // inside, but absolute: this machine's copy
    CHECK_THROWS_WITH(release_main(opts), ContainsSubstring("absolute path"));
    fs::remove(root / "docs/abs");
    fs::create_symlink("missing.md", root / "docs/gone");
    CHECK_THROWS_WITH(release_main(opts), ContainsSubstring("which does not exist"));
    CHECK_FALSE(fs::exists(opts.out));
  }
  SECTION("a lab's student folder that is itself a link") {
    fs::remove_all(root / "labs/01_x/student");
    fs::create_directories(root / "elsewhere");
    write_file_atomic(root / "elsewhere/step1.cu", "// moved\n");
    fs::create_directory_symlink("../../elsewhere", root / "labs/01_x/student");
    CHECK_THROWS_WITH(release_main(opts), ContainsSubstring("labs/01_x/student is a symbolic link"));
  }
}
