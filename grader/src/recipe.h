// The build side: finding (and if needed configuring) the CMake build, building the gate binaries, and the
// grading recipes (build/<preset>/grading/labNN.json, written by labkit_add_lab) that say how to compile a
// submission's files against the prebuilt gate objects.
#pragma once
#include <string>
#include <vector>

#include "util.h"

namespace labgrade {

struct Recipe {
  std::string lab, name;  // "01", "01_matmul"
  fs::path lab_dir, rubric;
  std::vector<std::string> student_sources;  // relative to student/ (and solutions/<name>/)
  std::vector<std::string> compile, gate_objects, link, link_libraries;
  std::vector<std::string> launcher;  // how the gate binary is started (lab 09: mpirun -np 4 ...); empty: directly
  fs::path student_gates, solution_gates;
  std::string student_target, solution_target;
  fs::path file;  // the recipe itself

  // Every absolute path the recipe refers to (compiler, objects, libraries, -I/-L/-rpath folders): the sandbox
  // must be able to read them.
  std::vector<fs::path> referenced_paths() const;
};

Recipe load_recipe(const fs::path& json_file);
// All lab*.json of the folders, sorted by lab id; a lab id found twice is an error.
std::vector<Recipe> load_recipes(const std::vector<fs::path>& grading_dirs);
// LAB arguments: "01", "1", "01_matmul" or "matmul". Empty: all.
std::vector<Recipe> select_labs(const std::vector<Recipe>& all, const std::vector<std::string>& wanted);

struct BuildOptions {
  fs::path root;                       // the repository
  fs::path build_dir;                  // empty: build/<preset>
  std::string preset;                  // empty: gpu when a GPU is present, else ci
  std::vector<fs::path> grading_dirs;  // empty: <build>/grading
  bool no_build = false;               // use the build as it is (no configure, no build)
  int jobs = 0;                        // cmake --build -j
  bool have_gpu = false;
};

struct Build {
  fs::path root, dir;
  std::string preset;
  std::vector<fs::path> grading_dirs;
  int jobs = 2;
};

// Configures the build when it has never been configured (or when a lab folder has no recipe yet).
Build prepare_build(const BuildOptions& opts);

// Builds one target; on failure returns the compiler/linker diagnostics (trimmed to what a student needs).
struct BuildOutcome {
  bool ok = false;
  std::string diagnostics;
  double seconds = 0;
};
BuildOutcome build_target(const Build& b, const std::string& target);

// From a compiler's or linker's output, the part worth showing: the error lines with a little context, paths
// made relative, "undefined reference" turned into "missing function".
std::string summarize_build_errors(const std::string& output,
                                   const std::vector<std::pair<std::string, std::string>>& path_rewrites = {});

// The value of a variable in <build>/CMakeCache.txt ("" when absent).
std::string cmake_cache_value(const fs::path& build_dir, const std::string& name);

}  // namespace labgrade
