// `labgrade doctor`: is this machine ready to build and grade the labs? One line per check, and for each
// problem one line saying what to do. Exit status 1 only for problems that stop grading (no nvcc, no cmake);
// no GPU is reported as "GPU gates will be skipped".
#pragma once
#include "util.h"

namespace labgrade {

struct DoctorOptions {
  fs::path build_dir;  // empty: every configured build/<preset> of the repository
  fs::path root;       // empty: the repository around the current folder
  std::string preset;  // the preset its "next" line names (empty: gpu with a GPU, else ci)
};

int doctor_main(const DoctorOptions& opts);

}  // namespace labgrade
