#include "labkit/device.h"

#include <cuda_runtime.h>

#include <sstream>

#include "labkit/check.h"

namespace labkit {

namespace {
struct Probe {
  bool ok = false;
  std::string reason;
};
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      r.reason = std::string("no CUDA device: cudaGetDeviceCount failed with ") + cudaGetErrorName(e) + " (" +
                 cudaGetErrorString(e) + ")";
      cudaGetLastError();
    } else if (count == 0) {
      r.reason = "no CUDA device: the driver reports 0 devices";
    } else {
      r.ok = true;
    }
    return r;
  }();
  return p;
}
}  // namespace

bool has_device() { return probe().ok; }
std::string no_device_reason() { return probe().ok ? "" : probe().reason; }

DeviceInfo device_info(int index) {
  if (index < 0) LABKIT_CUDA(cudaGetDevice(&index));
  cudaDeviceProp p{};
  LABKIT_CUDA(cudaGetDeviceProperties(&p, index));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.global_mem = p.totalGlobalMem;
  d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  d.shared_per_block_optin = p.sharedMemPerBlockOptin;
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  int mem_clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, index);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index);
  d.peak_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate
  return d;
}

std::string describe(const DeviceInfo& d) {
  std::ostringstream os;
  os << d.name << " (sm_" << d.major << d.minor << ", " << d.sm_count << " SMs, " << (d.global_mem >> 20)
     << " MiB, driver " << d.driver_version / 1000 << "." << (d.driver_version % 1000) / 10 << ", runtime "
     << d.runtime_version / 1000 << "." << (d.runtime_version % 1000) / 10 << ")";
  return os.str();
}

}  // namespace labkit
