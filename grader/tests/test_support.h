// Paths and temporary folders for the grader's tests.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

namespace test {

namespace fs = std::filesystem;

// The real checkout (the build may have been configured from a tree of symbolic links to it).
inline fs::path repo_root() { return fs::canonical(fs::path(LABGRADE_SOURCE_DIR) / "grader").parent_path(); }
inline fs::path fixtures_dir() { return repo_root() / "grader" / "fixtures"; }
inline fs::path fakelab_root() { return repo_root() / "grader" / "tests" / "fakelab"; }
inline fs::path labgrade_exe() { return LABGRADE_EXE; }
inline fs::path build_dir() { return LABGRADE_BUILD_DIR; }
inline fs::path fakelab_grading() { return LABGRADE_FAKELAB_GRADING; }

// A fresh folder, removed with everything in it at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    const char* base = std::getenv("TMPDIR");
    path = fs::path(base ? base : "/tmp") /
           ("labgrade-test-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(rd() % 100000));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    if (!std::getenv("LABGRADE_KEEP_TEST_DIRS")) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace test
