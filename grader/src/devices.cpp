#include "devices.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "progress.h"
#include "util.h"

namespace labgrade {

std::string cuda_version_text(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

int probe_cuda_main() {
  nlohmann::json j;
  int driver = 0, runtime = 0, count = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  j["driver_version"] = driver;
  j["runtime_version"] = runtime;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    std::string why = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    // With no driver at all the runtime says "insufficient driver": say what it means.
    if (e == cudaErrorInsufficientDriver && driver == 0) why = "no NVIDIA driver is loaded (" + why + ")";
    j["error"] = "no CUDA device: " + why;
    count = 0;
  } else if (count == 0) {
    j["error"] = "no CUDA device: the driver reports 0 devices";
  }
  j["gpus"] = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    // The 16 bytes nvidia-smi prints as GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx: the key between the two views.
    const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    j["gpus"].push_back({{"index", i},
                         {"name", p.name},
                         {"major", p.major},
                         {"minor", p.minor},
                         {"sm_count", p.multiProcessorCount},
                         {"memory_gib", static_cast<double>(p.totalGlobalMem) / (1u << 30)},
                         {"uuid", uuid}});
  }
  std::cout << j.dump() << std::endl;
  return 0;
}

namespace {
CudaInfo run_probe(const std::vector<std::string>& argv) {
  CudaInfo info;
  auto r = run_command(argv, 60);
  if (r.timed_out) {
    info.error = "the CUDA query did not answer within 60 s (a wedged driver? try nvidia-smi)";
    return info;
  }
  auto start = r.output.find('{');
  auto j =
      start == std::string::npos ? nlohmann::json() : nlohmann::json::parse(r.output.substr(start), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.error = "the CUDA runtime could not be queried: " + trim(r.output);
    return info;
  }
  info.driver_version = j.value("driver_version", 0);
  info.runtime_version = j.value("runtime_version", 0);
  info.error = j.value("error", "");
  for (const auto& g : j.value("gpus", nlohmann::json::array()))
    info.gpus.push_back({g.value("index", 0), g.value("name", ""), g.value("major", 0), g.value("minor", 0),
                         g.value("sm_count", 0), g.value("memory_gib", 0.0), g.value("uuid", "")});
  info.ok = !info.gpus.empty();
  if (!info.ok && info.error.empty()) info.error = "no CUDA device";
  return info;
}
}  // namespace

CudaInfo query_cuda(const std::filesystem::path& probe_exe) {
  return run_probe({(probe_exe.empty() ? self_exe() : probe_exe).string(), "__probe-cuda"});
}

std::vector<std::string> gpu_uuids(const std::string& visible, const std::filesystem::path& probe_exe) {
  const auto env = find_program("env");
  if (!env) return {};
  const CudaInfo info = run_probe({env->string(), "CUDA_VISIBLE_DEVICES=" + visible,
                                   (probe_exe.empty() ? self_exe() : probe_exe).string(), "__probe-cuda"});
  std::vector<std::string> out;
  for (const auto& g : info.gpus)
    if (!g.uuid.empty()) out.push_back(g.uuid);
  return out;
}

std::vector<GpuProcess> parse_gpu_processes(const std::string& apps_csv, const std::string& gpus_csv) {
  std::map<std::string, std::string> index_of;  // UUID -> "0"
  for (const auto& line : split_lines(gpus_csv)) {
    const auto fields = split(line, ',');
    if (fields.size() == 2 && !trim(fields[0]).empty()) index_of[trim(fields[1])] = trim(fields[0]);
  }
  std::vector<GpuProcess> out;
  for (const auto& line : split_lines(apps_csv)) {
    const auto fields = split(line, ',');
    if (fields.size() < 4) continue;
    GpuProcess p;
    const std::string uuid = trim(fields[0]);
    p.pid = trim(fields[1]);
    if (uuid.empty() || p.pid.empty() || p.pid.find_first_not_of("0123456789") != std::string::npos) continue;
    p.uuid = uuid;
    p.gpu = index_of.count(uuid) ? "GPU " + index_of[uuid] : uuid;
    p.memory = trim(fields[2]);
    std::string name = fields[3];
    for (std::size_t i = 4; i < fields.size(); ++i) name += "," + fields[i];
    p.name = trim(name);
    out.push_back(p);
  }
  return out;
}

std::vector<GpuProcess> gpu_processes(double timeout_s) {
  const auto smi = find_program("nvidia-smi");
  if (!smi) return {};
  const auto apps = run_command({smi->string(), "--query-compute-apps=gpu_uuid,pid,used_memory,process_name",
                                 "--format=csv,noheader"},
                                timeout_s);
  if (apps.exit_code != 0 || trim(apps.output).empty()) return {};
  const auto gpus = run_command({smi->string(), "--query-gpu=index,uuid", "--format=csv,noheader"}, timeout_s);
  return parse_gpu_processes(apps.output, gpus.exit_code == 0 ? gpus.output : "");
}

std::string describe_gpu_processes(const std::vector<GpuProcess>& procs) {
  std::string out;
  for (const auto& p : procs) {
    std::string what = p.name.empty() ? "?" : p.name;
    if (!p.memory.empty() && p.memory.find("N/A") == std::string::npos) what += ", " + p.memory;
    out += (out.empty() ? "" : "; ") + std::string("pid ") + p.pid + " (" + what + ") on " + p.gpu;
  }
  return out;
}

std::vector<GpuProcess> on_gpus(const std::vector<GpuProcess>& procs, const std::vector<std::string>& uuids) {
  std::vector<GpuProcess> out;
  for (const auto& p : procs)
    if (std::find(uuids.begin(), uuids.end(), p.uuid) != uuids.end()) out.push_back(p);
  return out;
}

std::vector<GpuProcess> others_than(const std::vector<GpuProcess>& procs, pid_t self) {
  std::vector<GpuProcess> out;
  for (const auto& p : procs) {
    const pid_t pid = static_cast<pid_t>(std::atol(p.pid.c_str()));  // parse_gpu_processes kept digits only
    std::error_code ec;
    if (pid <= 0 || !std::filesystem::exists("/proc/" + p.pid, ec)) continue;
    if (!descends_from(pid, self)) out.push_back(p);
  }
  return out;
}

}  // namespace labgrade
