// Building one submission of one lab, step by step: each student file is compiled on its own with the build's
// compile command (Recipe::compile_argv); a step file that does not compile, or that the submission lacks, is
// replaced at link time by the skeleton's object of the same file (Recipe::skeleton_objects: the grader's own,
// never a file the submission names), so that only that step's gates lose their points. Used by `labgrade batch`
// (in the sandbox) and by `labgrade` on one's own tree (directly).
//
// A file is a step's when its name is `stepK_<what>.cu` (K a number with an optional lower-case letter); the
// gates of that step are those whose id starts with `stepK.`. Any other file (and any other gate) belongs to the
// whole lab: when such a file does not compile, or is missing, every gate is build_failed as before.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "labpool.h"
#include "recipe.h"
#include "sandbox.h"
#include "scoring.h"

namespace labgrade {

// "step5a" for "step5a_transposed_a.cu" (also in a subfolder) and for gate "step5a.correct"; "" otherwise.
std::string step_of_source(const std::string& source);
std::string step_of_gate(const std::string& gate_id);

struct StepFile {
  enum class State { compiled, failed, missing };
  std::string source, step;  // student_sources[k] and its step ("" for a file of the whole lab)
  State state = State::compiled;
  std::string message;  // why the skeleton stands in (failed, missing)
  fs::path object;      // what is linked: the student's object or the skeleton's
};

struct LabBuild {
  std::vector<StepFile> files;
  // Set when the lab as a whole has no binary: every gate gets lab_status with this message.
  std::string lab_problem;
  Status lab_status = Status::build_failed;
  fs::path exe;  // the linked gate binary (when lab_problem is empty)
  double seconds = 0;
};

struct LabBuildSpec {
  fs::path src_dir;           // the submission's student files: src_dir/<source>
  std::vector<bool> present;  // per student source: is it in src_dir (false: the skeleton stands in)
  fs::path obj_dir, exe;      // where objects and the binary go
  fs::path log_dir;           // compiler and linker output: <log_prefix>.compileN.log, <log_prefix>.link.log
  std::string log_prefix;
  ProcessSpec process;         // how compilers run (sandbox, uid slot, environment, limits); argv/output set here
  double timeout_s = 300;      // each compile, and each link
  // How many of the lab's files compile at once (each in its own process, in the same uid slot; the slot is swept
  // once they have all ended). The results and messages do not depend on it.
  int jobs = 1;
  // Several labs built side by side share these: each compiler, nm, objdump or linker process holds one token
  // while it runs (null: only `jobs` limits the lab). Labs side by side share the uid slot too, so their caller
  // turns process.sweep_uid off and sweeps the slot once they have all ended.
  JobTokens* tokens = nullptr;
  std::size_t token_order = 0;  // this build's place among the tokens' waiters (the student's, then the lab's)
  std::vector<std::string> extra_compile_flags;  // grader-only flags (batch: NVTX off for the object check)
  // Per student source, the TMPDIR of its compile (a folder the caller made, writable by the slot); empty: the one
  // in process.env. nvcc names its temporary files after its process id and, as it exits, deletes every file of that
  // name's prefix: in a PID namespace (bubblewrap) every compiler has the same id, so compiles side by side in one
  // folder deleted each other's files ("...cudafe1.cpp: No such file or directory", a healthy step build_failed).
  std::vector<fs::path> compile_tmp;
  // Each compile also writes the headers its file included (`-MD -MF <object>.d`), for inspect: which libraries
  // the file brought in cannot be renamed away, unlike the names of the kernels they compile into it.
  bool write_dependencies = false;
  std::vector<std::pair<std::string, std::string>> path_rewrites;  // for the messages students read
  // Called for each student object that compiled: "" or a refusal (the whole lab is then `refused`).
  std::function<std::string(const std::string& source, const fs::path& object)> inspect;
};

LabBuild build_lab(const Recipe& recipe, const LabBuildSpec& spec);

// The gates of failed steps become build_failed and those of missing steps not_submitted, with the file's
// message; with a lab_problem every gate gets lab_status. The other gates stay `missing`, to be run.
void apply_build(LabResult& lab, const LabBuild& build);

// Link-failure attribution (exposed for the tests): the undefined functions an ld output names, and from
// `nm -P -C --defined-only` output the functions an object defines.
// A static library (an archive, "*.a") among a recipe's link libraries: linked in one group with the student's
// objects, after the gates' (link_argv).
bool is_static_library(const std::string& path);

std::vector<std::string> undefined_symbols(const std::string& linker_output);
std::vector<std::string> defined_symbols_demangled(const std::string& nm_output);

}  // namespace labgrade
