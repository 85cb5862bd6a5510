// `labgrade` without arguments grades only the labs with code written: which labs count as started.
#include <catch2/catch_test_macros.hpp>
#include <fstream>

#include "firstrun.h"
#include "test_support.h"
#include "util.h"

using namespace labgrade;

namespace {

const char* kSkeletonStep =
    "#include \"topic.h\"\nnamespace lab01 {\nvoid step1(float*, int) { throw labkit::NotImplemented(\"step 1\"); }\n}\n";
const char* kWrittenStep = "#include \"topic.h\"\nnamespace lab01 {\nvoid step1(float* x, int n) { launch(x, n); }\n}\n";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

const LabState& find(const std::vector<LabState>& labs, const std::string& id) {
  for (const auto& l : labs)
    if (l.id == id) return l;
  FAIL("no lab " << id);
  return labs.front();
}

// A tree with two labs of two step files each; lab 02 has no student/ folder contents beyond the skeleton.
void make_tree(const fs::path& root, bool with_skeleton_copies) {
  for (const char* lab : {"01_one", "02_two"}) {
    for (const char* f : {"step1_a.cu", "step2_b.cu"}) {
      write(root / "labs" / lab / "student" / f, kSkeletonStep);
      if (with_skeleton_copies) write(root / "labs" / lab / ".skeleton" / f, kSkeletonStep);
    }
  }
  write(root / "labs" / "README.md", "not a lab folder\n");
}

}  // namespace

TEST_CASE("a student release: a lab is started when a file differs from labs/NN/.skeleton/", "[firstrun]") {
  test::TempDir dir("firstrun-release");
  make_tree(dir.path, true);
  auto labs = scan_labs(dir.path);
  REQUIRE(labs.size() == 2);
  CHECK_FALSE(find(labs, "01").started);
  CHECK_FALSE(find(labs, "02").started);

  // A comment is enough: the student touched the lab (a file still throwing NotImplemented elsewhere does not
  // hide it, as the marker rule alone would).
  write(dir.path / "labs/01_one/student/step2_b.cu", std::string(kSkeletonStep) + "// started on step 2\n");
  labs = scan_labs(dir.path);
  CHECK(find(labs, "01").started);
  CHECK(find(labs, "01").why == "step2_b.cu differs from the skeleton");
  CHECK_FALSE(find(labs, "02").started);

  // A file the skeleton does not have (a helper the student added) also counts.
  write(dir.path / "labs/02_two/student/helpers.cuh", "#pragma once\n");
  CHECK(find(scan_labs(dir.path), "02").started);
}

TEST_CASE("the instructor's tree: a lab is started when a .cu file no longer throws NotImplemented", "[firstrun]") {
  test::TempDir dir("firstrun-tree");
  make_tree(dir.path, false);
  auto labs = scan_labs(dir.path);  // not a git checkout: the marker decides alone
  CHECK_FALSE(find(labs, "01").started);
  CHECK(find(labs, "01").why == "every step still throws NotImplemented");

  write(dir.path / "labs/02_two/student/step1_a.cu", kWrittenStep);
  labs = scan_labs(dir.path);
  CHECK_FALSE(find(labs, "01").started);
  CHECK(find(labs, "02").started);
  CHECK(find(labs, "02").why == "step1_a.cu throws NotImplemented nowhere");
}

TEST_CASE("the instructor's tree under git: an uncommitted change starts a lab", "[firstrun]") {
  if (!find_program("git")) SKIP("git is not installed");
  test::TempDir dir("firstrun-git");
  make_tree(dir.path, false);
  const std::string root = dir.path.string();
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@localhost"});
    auto r = run_command(args, 60);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
  };
  git({"init", "-q"});
  git({"add", "-A"});
  git({"commit", "-q", "-m", "skeleton"});
  CHECK_FALSE(find(scan_labs(dir.path), "01").started);

  // Work in progress: the step still throws at its end, but the file changed since the commit.
  write(dir.path / "labs/01_one/student/step1_a.cu", std::string(kSkeletonStep) + "__global__ void k() {}\n");
  auto labs = scan_labs(dir.path);
  CHECK(find(labs, "01").started);
  CHECK(find(labs, "01").why == "step1_a.cu changed since the last commit");
  CHECK_FALSE(find(labs, "02").started);
}
