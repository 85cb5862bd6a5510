// What CUDA sees on this machine. The query runs in a child process (`labgrade __probe-cuda`): the grader itself
// never initialises CUDA, so a wedged driver cannot hang it and its children never inherit a CUDA state.
#pragma once
#include <sys/types.h>

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
  std::string uuid;  // "GPU-8f3a...", as nvidia-smi writes it ("" where the runtime gave none)
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
// The same query in a child started with CUDA_VISIBLE_DEVICES=visible (a worker's GPUs, "0" or "2,3"): the UUIDs
// of the GPUs a gate process of that worker sees, in CUDA's order; empty when the query fails.
std::vector<std::string> gpu_uuids(const std::string& visible, const std::filesystem::path& probe_exe = {});
std::string cuda_version_text(int v);  // 13000 -> "13.0"

// Internal: prints the query as JSON on stdout.
int probe_cuda_main();

// A process that nvidia-smi lists as computing on a GPU. Speed gates timed while another process computes on their
// GPU share it by time slices and come out slower, through no fault of the submission: `labgrade doctor` and the
// start of a batch say so before anything is graded.
struct GpuProcess {
  std::string gpu;  // "GPU 0" (nvidia-smi's numbering), or the UUID where the GPU list does not name it
  std::string uuid, pid, name, memory;
};
// Parses `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory,process_name --format=csv,noheader` (the name
// last: it may hold commas) with `--query-gpu=index,uuid --format=csv,noheader` for the GPUs' numbers. Lines it
// cannot read (a message instead of a row, say) are left out.
std::vector<GpuProcess> parse_gpu_processes(const std::string& apps_csv, const std::string& gpus_csv);
// The compute processes on this machine's GPUs now, as nvidia-smi (searched on PATH) lists them; none when it is
// missing, fails or takes longer than `timeout_s`.
std::vector<GpuProcess> gpu_processes(double timeout_s = 20);
// "pid 4242 (python3, 3120 MiB) on GPU 0; pid 77 (...) on GPU 1"
std::string describe_gpu_processes(const std::vector<GpuProcess>& procs);
// The processes of `procs` that compute on one of the GPUs `uuids` names.
std::vector<GpuProcess> on_gpus(const std::vector<GpuProcess>& procs, const std::vector<std::string>& uuids);
// The processes of `procs` that are still there (a /proc entry) and are neither `self` nor its descendants
// (descends_from, progress.h). Where a batch's workers share a GPU, another worker's gate runs are on it: the batch's
// own, not someone else's; and one of them may end between nvidia-smi's list and this look. The cost: a process of
// another PID namespace that /proc does not show (a container's view) is left out too.
std::vector<GpuProcess> others_than(const std::vector<GpuProcess>& procs, pid_t self);

}  // namespace labgrade
