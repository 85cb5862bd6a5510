// Device query. has_device() is what every GPU gate asks first; without a device the gate is skipped with
// no_device_reason() (CPU-only machines still build everything and run the CPU tests).
#pragma once
#include <string>

namespace labkit {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;
  int sm_count = 0;
  std::size_t global_mem = 0;
  std::size_t l2_bytes = 0;
  std::size_t shared_per_block_optin = 0;
  int driver_version = 0, runtime_version = 0;
  double peak_bandwidth_gbs = 0;  // from memory clock and bus width (datasheet figure; measured figures differ)
};

bool has_device();
std::string no_device_reason();   // "no CUDA device: cudaGetDeviceCount returned ..."
DeviceInfo device_info(int index = -1);  // -1: the current device
std::string describe(const DeviceInfo& info);  // one line for banners and reports

}  // namespace labkit
