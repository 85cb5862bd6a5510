// What CUDA sees on this machine. The query runs in a child process (`labgrade __probe-cuda`): the grader itself
// never initialises CUDA, so a wedged driver cannot hang it and its children never inherit a CUDA state.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace labgrade {

struct GpuInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;
  int sm_count = 0;
  double memory_gib = 0;
};

struct CudaInfo {
  bool ok = false;         // the runtime answered and found at least one device
  std::string error;       // why not ("no CUDA device: ...")
  int driver_version = 0;  // e.g. 13000
  int runtime_version = 0;
  std::vector<GpuInfo> gpus;
};

// Runs `<probe_exe> __probe-cuda` (labgrade's own hidden sub-command; default: this executable) in a child
// process, so that a wedged or missing driver cannot take the caller down.
CudaInfo query_cuda(const std::filesystem::path& probe_exe = {});
std::string cuda_version_text(int v);  // 13000 -> "13.0"

// Internal: prints the query as JSON on stdout.
int probe_cuda_main();

}  // namespace labgrade
