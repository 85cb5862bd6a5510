// Lab 03, step 2 (copy_strided): your implementation. Replace the `throw labkit::NotImplemented(...)` with the step;
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

// Step 2. Write copy_strided_kernel: out[i] = in[i * stride] (compute i * stride in std::size_t: it exceeds 2^31
// for large n). Predict the GB/s at strides 1, 2, 4, 8, 16, 32 before running the bench.
void copy_strided(std::size_t n, int stride, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_strided needs n >= 1");
  if (stride < 1 || stride > kMaxStride) throw std::invalid_argument("lab03: stride must be in [1, 32]");
  (void)in, (void)out;
  throw labkit::NotImplemented("step 2: copy_strided");
}

}  // namespace lab03
