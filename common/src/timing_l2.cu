// evict_l2(): the untimed L2 scrub that compare_speed() runs before every timed call (declared in labkit/timing.h).
//
// Why a read and not cudaMemset: a memset leaves the scrub buffer's lines dirty in L2, and writing them back to
// DRAM would then happen during the next timed call, charging it for traffic that is not its own. Reading a buffer
// of twice the L2 size replaces every line (L2 is not fully associative, hence the factor 2), and the lines it
// leaves are clean, so evicting them later costs nothing. At ~3 TB/s the 100 MB of an H100 take ~35 us per call.
#include <algorithm>
#include <cstdint>

#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/timing.h"

namespace labkit {

// extern "C": the name CUPTI reports is this plain one, which a speed gate's recorder leaves out of the step's
// kernels (l2_scrub_kernel_name(), labkit/timing.h).
extern "C" __global__ void labkit_l2_scrub_read(const uint4* buf, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // The buffer is zero, so this never stores; the condition keeps the compiler from dropping the loads.
  if (acc == 0xFFFFFFFFu) *sink = acc;
}

const char* l2_scrub_kernel_name() { return "labkit_l2_scrub_read"; }

namespace {

struct Scrub {
  uint4* buf = nullptr;
  unsigned* sink = nullptr;
  std::size_t n = 0;
  unsigned blocks = 0;
};

Scrub& scrub() {
  // One allocation per process, never freed: a static destructor would run after the CUDA runtime is torn down.
  static Scrub s = [] {
    Scrub r;
    const DeviceInfo d = device_info();  // cudaGetDeviceProperties is slow: queried once
    const std::size_t bytes = 2 * std::max<std::size_t>(d.l2_bytes, std::size_t(1) << 20);
    r.blocks = static_cast<unsigned>(4 * d.sm_count);
    r.n = bytes / sizeof(uint4);
    LABKIT_CUDA(cudaMalloc(&r.buf, r.n * sizeof(uint4)));
    LABKIT_CUDA(cudaMalloc(&r.sink, sizeof(unsigned)));
    LABKIT_CUDA(cudaMemset(r.buf, 0, r.n * sizeof(uint4)));  // initialised: no initcheck reports, no sink store
    LABKIT_CUDA(cudaDeviceSynchronize());
    return r;
  }();
  return s;
}

}  // namespace

void evict_l2() {
  Scrub& s = scrub();
  labkit_l2_scrub_read<<<s.blocks, 256>>>(s.buf, s.n, s.sink);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace labkit
