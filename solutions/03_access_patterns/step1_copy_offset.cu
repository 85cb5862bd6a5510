// Lab 03 reference, step 1: the copy with an offset (a misaligned start).
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

// Step 1: warp w touches floats [offset + 32w, offset + 32w + 32): 128 bytes that start `offset * 4` bytes into a
// 128-byte line. Aligned (offset % 32 == 0) that is 4 sectors of one line; otherwise 5 sectors over two lines, and
// the neighbouring warp fetches the shared sector again (usually from L2). Expect a small loss, not a cliff.
__global__ void copy_offset_kernel(std::size_t n, int offset, const float* __restrict__ in, float* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[offset + i] = in[offset + i];
}

}  // namespace

void copy_offset(std::size_t n, int offset, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_offset needs n >= 1");
  if (offset < 0 || offset > kMaxOffset) throw std::invalid_argument("lab03: offset must be in [0, 32]");
  copy_offset_kernel<<<blocks_for(n), kThreads>>>(n, offset, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab03
