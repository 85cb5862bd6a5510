// Lab 03 reference, step 2: the copy with a stride (a gather).
#include <climits>
#include <cstddef>
#include <stdexcept>

#include "access_patterns.h"
#include "labkit/labkit.h"

namespace lab03 {

namespace {

constexpr int kThreads = 256;  // copies: one element per thread, 8 warps per block

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  if (b > std::size_t(INT_MAX)) throw std::invalid_argument("lab03: n too large for a one-dimensional grid");
  return static_cast<unsigned>(b);
}

// Step 2: a warp reads 32 floats `stride` floats apart. The memory system moves whole 32-byte sectors: at stride
// s the warp's 128 useful bytes cost min(32, ceil(32 * s / 8)) sectors, so the read side degrades like 1/s up to
// s = 8 (one float per sector) and then stays flat; the contiguous writes keep their full speed.
__global__ void copy_strided_kernel(std::size_t n, int stride, const float* __restrict__ in, float* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i * stride];
}

}  // namespace

void copy_strided(std::size_t n, int stride, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_strided needs n >= 1");
  if (stride < 1 || stride > kMaxStride) throw std::invalid_argument("lab03: stride must be in [1, 32]");
  copy_strided_kernel<<<blocks_for(n), kThreads>>>(n, stride, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab03
