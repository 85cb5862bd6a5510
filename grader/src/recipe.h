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
  std::vector<std::string> student_sources;  // relative to student/ (and solutions/<name>/), one file per step
  // compile[k]: the build's own command for student_sources[k] (from compile_commands.json), with the input and
  // output replaced by the placeholders kSourcePlaceholder and kObjectPlaceholder (compile_argv fills them in).
  std::vector<std::vector<std::string>> compile;
  std::vector<std::string> gate_objects, link, link_libraries;
  // skeleton_objects[k]: the skeleton's object of student_sources[k], linked in place of a student file that does
  // not compile or is missing (built by the grading target, from skeleton_dir).
  std::vector<std::string> skeleton_objects;
  fs::path skeleton_dir;
  std::string grading_target;
  std::vector<std::string> launcher;  // how the gate binary is started (lab 09: mpirun -np 4 ...); empty: directly
  fs::path student_gates, solution_gates;
  std::string student_target, solution_target;
  fs::path file;  // the recipe itself

  static constexpr const char* kSourcePlaceholder = "@LABGRADE_SOURCE@";
  static constexpr const char* kObjectPlaceholder = "@LABGRADE_OBJECT@";
  // The command that compiles student_sources[k] from `source` into `object`.
  std::vector<std::string> compile_argv(std::size_t k, const fs::path& source, const fs::path& object) const;
  // The compiler (nvcc) the compile commands run.
  std::string compiler() const { return compile.empty() || compile[0].empty() ? "" : compile[0][0]; }

  // Every absolute path the recipe refers to (compiler, objects, libraries, -I/-L/-rpath folders): the sandbox
  // must be able to read them.
  std::vector<fs::path> referenced_paths() const;
};

// Reads the recipe and, from the compile_commands.json it names, the build's compile command of each student file
// (the entry of compile_source_dir/<source>: its -c input and -o output become placeholders, a relative
// --options-file or @file is made absolute against the entry's directory, and dependency-file flags are dropped).
Recipe load_recipe(const fs::path& json_file);
// The compile command of `file` in a compile_commands.json text (exposed for the tests).
std::vector<std::string> compile_command_for(const std::string& compile_commands_json, const fs::path& file,
                                             const std::string& where);
// Splits a command line as a POSIX shell would (quotes and backslashes; no expansion).
std::vector<std::string> shell_split(const std::string& command);
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
