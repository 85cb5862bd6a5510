// Lab 05 reference, step 1: saxpy (y <- a*x + y) as a hand-written grid-stride kernel.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>

#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

namespace {

void check_args(std::size_t n, const float* x, const float* y) {
  if (n > 0 && (x == nullptr || y == nullptr)) throw std::invalid_argument("lab05: null device pointer with n > 0");
}

// A grid-stride loop. The grid is one full wave of resident blocks, whatever n: each thread walks the array in
// steps of the whole grid, so consecutive threads always touch consecutive addresses (each warp access is one
// contiguous 512-byte run for float4) and no block is ever launched just to find nothing to do.
// saxpy moves 12 bytes per 2 flops: the only thing that matters is keeping enough bytes in flight to cover the
// DRAM latency. So each thread issues the loads of kUnroll float4 of x and of y before it uses any of them
// (16 bytes * 2 * 4 = 128 bytes in flight per thread), and __restrict__ tells the compiler that the stores to y
// cannot change x, which is what lets it keep those loads ahead of the stores.
constexpr int kBlock = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ float4 saxpy4(float a, float4 x, float4 y) {
  // fmaf rounds once: the exact a*x+y rounded to float, and NaN/Inf follow IEEE like any product and sum.
  return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}

// (No __launch_bounds__: with it, ptxas 13.0 squeezes this kernel to 40 registers and spills 8 bytes; without,
// it uses 44 and spills nothing. 5 resident blocks of 256 threads per SM keep ~160 KB per SM in flight.)
template <bool kVec>
__global__ void saxpy_grid_stride_kernel(std::size_t n, float a, const float* __restrict__ x, float* __restrict__ y) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t done = 0;  // elements handled by the vector part; the scalar loop below takes the rest
  if constexpr (kVec) {
    // 16-byte loads: x and y are 16-byte aligned (checked by the caller), so x4[i] is x[4i..4i+3].
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
    const std::size_t n4 = n / 4;
    std::size_t i = tid;
    // Main loop: kUnroll independent float4s per thread per trip, all loads issued before the first store.
    for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
      float4 xv[kUnroll], yv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) xv[u] = x4[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) yv[u] = y4[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) y4[i + u * stride] = saxpy4(a, xv[u], yv[u]);
    }
    for (; i < n4; i += stride) y4[i] = saxpy4(a, x4[i], y4[i]);  // the last < kUnroll strides
    done = n4 * 4;
  }
  // Scalar loop: everything when unaligned, else the last n % 4 elements (taken by threads 0..2 of block 0).
  for (std::size_t i = done + tid; i < n; i += stride) y[i] = fmaf(a, x[i], y[i]);
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// One full wave: as many blocks as can be resident at once on every SM of the CURRENT device. The answer depends
// on the device (SM count, registers per SM), so it is cached per device id, and the cache is shared by every
// host thread, so a mutex guards it (the query runs once per device and kernel variant).
template <bool kVec>
unsigned full_wave_blocks() {
  int dev = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  static std::mutex mutex;
  static std::map<int, unsigned> blocks_of_device;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = blocks_of_device.find(dev);
  if (it != blocks_of_device.end()) return it->second;
  int sms = 0, per_sm = 0;
  LABKIT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  LABKIT_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, saxpy_grid_stride_kernel<kVec>, kBlock, 0));
  const unsigned blocks = static_cast<unsigned>(std::max(1, sms * std::max(1, per_sm)));
  blocks_of_device.emplace(dev, blocks);
  return blocks;
}

}  // namespace

void saxpy_kernel(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return;  // a launch with 0 blocks is an error, and there is nothing to do
  if (aligned16(x) && aligned16(y)) {
    const std::size_t units = std::max<std::size_t>(n / 4, 1);
    const unsigned grid = static_cast<unsigned>(std::min<std::size_t>((units + kBlock - 1) / kBlock,
                                                                      full_wave_blocks<true>()));
    saxpy_grid_stride_kernel<true><<<grid, kBlock>>>(n, a, x, y);
  } else {
    const unsigned grid =
        static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, full_wave_blocks<false>()));
    saxpy_grid_stride_kernel<false><<<grid, kBlock>>>(n, a, x, y);
  }
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab05
