// `labgrade` with no arguments: the first thing a student runs. It configures a build if there is none (the gpu
// preset when a GPU is found, else ci), grades only the labs that have code written (an untouched skeleton is
// "not started", not a row of not_implemented gates), and says which lab to work on next. When the build cannot
// even be configured it prints `labgrade doctor`'s report instead.
#pragma once
#include <string>
#include <vector>

#include "grade.h"
#include "util.h"

namespace labgrade {

// Whether a lab's student files still are the skeleton, and why we think so.
struct LabState {
  std::string id, name;  // "01", "01_matmul"
  fs::path dir;
  bool started = false;
  std::string why;  // "step2_naive.cu differs from the skeleton", "every step still throws NotImplemented", ...
};

// Decides per lab, from the files alone (nothing is built):
//  - a student release has the pristine skeleton in labs/NN_topic/.skeleton/ (written by `labgrade release`): a lab
//    is started when a file of student/ differs from its copy there, or has none;
//  - otherwise (the instructor's tree, or a clone of it) student/ was the skeleton: a lab is started when a .cu
//    file of student/ no longer contains `NotImplemented` (every skeleton step throws it), or git reports a
//    student/ file changed or added since the last commit.
std::vector<LabState> scan_labs(const fs::path& root);

// The GPUs nvidia-smi lists ("NVIDIA H100 80GB HBM3", ...); empty without a driver or a GPU. nvidia-smi rather
// than the CUDA runtime: a driver too old for the toolkit still means "a GPU machine" (the gpu preset, where the
// gates then fail with the driver's error instead of skipping silently).
std::vector<std::string> nvidia_smi_gpus();

// What a student without a GPU must know before reading any result: printed by every grading run without one.
// reason: what the CUDA runtime said ("no CUDA device: ...").
void print_no_gpu_notice(std::ostream& out, const std::string& reason);
// The line repeated under the results table.
extern const char* const kNoGpuReminder;

// `labgrade` without arguments. `grade` carries the shared options (--repo, -j, --preset, --build-dir).
int first_run_main(GradeOptions grade);

}  // namespace labgrade
