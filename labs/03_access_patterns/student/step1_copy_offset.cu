// Lab 03, step 1 (copy_offset): your implementation. Replace the `throw labkit::NotImplemented(...)` with the step;
// labs/03_access_patterns/README.md explains it and what its gates check. Check your step with
//   ctest --preset gpu -L lab03 -L student      (or: build/gpu/labgrade 03)
#include <climits>
#include <cstddef>
#include <stdexcept>

#include "access_patterns.h"
#include "labkit/labkit.h"

namespace lab03 {

namespace {

constexpr int kThreads = 256;  // copies: one element per thread, 8 warps per block

// Blocks of kThreads covering n elements; refuses n that a one-dimensional grid cannot cover.
[[maybe_unused]] unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  if (b > std::size_t(INT_MAX)) throw std::invalid_argument("lab03: n too large for a one-dimensional grid");
  return static_cast<unsigned>(b);
}

}  // namespace

// Step 1. Write copy_offset_kernel: thread i (i = blockIdx.x * blockDim.x + threadIdx.x, as std::size_t) copies
// element offset + i when i < n. Launch blocks_for(n) blocks of kThreads threads, then LABKIT_CHECK_LAUNCH().
// Before you measure: how many 32-byte sectors does a warp touch at offset 0, 1, 8, 32?
void copy_offset(std::size_t n, int offset, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_offset needs n >= 1");
  if (offset < 0 || offset > kMaxOffset) throw std::invalid_argument("lab03: offset must be in [0, 32]");
  (void)in, (void)out;
  throw labkit::NotImplemented("step 1: copy_offset");
}

}  // namespace lab03
