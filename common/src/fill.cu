// Device-side fills: seeded random values (bit-identical to the host generator) and poison patterns.
#include <cstdint>

#include "labkit/check.h"
#include "labkit/guard.h"
#include "labkit/random.h"

namespace labkit {
namespace {

template <class T>
__global__ void fill_random_kernel(T* out, std::size_t n, std::uint64_t seed, T lo, T hi) {
  // Grid-stride loop: any n with a fixed, modest grid.
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 4)
      out[i] = uniform_float(seed, i, lo, hi);
    else
      out[i] = uniform_double(seed, i, lo, hi);
  }
}

template <class W>
__global__ void fill_pattern_kernel(W* out, std::size_t n, W pattern) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = pattern;
}

unsigned grid_for(std::size_t n) {
  std::size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

}  // namespace

void fill_random_device(float* dev, std::size_t n, std::uint64_t seed, float lo, float hi) {
  if (!n) return;
  fill_random_kernel<<<grid_for(n), 256>>>(dev, n, seed, lo, hi);
  LABKIT_CHECK_LAUNCH();
}

void fill_random_device(double* dev, std::size_t n, std::uint64_t seed, double lo, double hi) {
  if (!n) return;
  fill_random_kernel<<<grid_for(n), 256>>>(dev, n, seed, lo, hi);
  LABKIT_CHECK_LAUNCH();
}

void fill_pattern_device(void* dev, std::size_t count, std::size_t elem_size, std::uint64_t pattern) {
  if (!count) return;
  if (elem_size == 4)
    fill_pattern_kernel<<<grid_for(count), 256>>>(static_cast<std::uint32_t*>(dev), count,
                                                  static_cast<std::uint32_t>(pattern));
  else
    fill_pattern_kernel<<<grid_for(count), 256>>>(static_cast<std::uint64_t*>(dev), count, pattern);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace labkit
