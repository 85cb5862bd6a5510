// Lab 05, step 1 - your implementation: a hand-written grid-stride saxpy kernel.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
#include <stdexcept>

#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

namespace {
// n == 0 is a no-op (null pointers allowed); n > 0 needs real pointers. Refuse before launching anything.
void check_args(std::size_t n, const float* x, const float* y) {
  if (n > 0 && (x == nullptr || y == nullptr)) throw std::invalid_argument("lab05: null device pointer with n > 0");
}
}  // namespace

// Step 1. A __global__ kernel with a grid-stride loop:
//   for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) ...
// Use size_t indices (n may exceed 2^31), return early for n == 0 (a launch of 0 blocks is an error), pick a grid
// that fills the GPU once (SM count x resident blocks per SM), and call LABKIT_CHECK_LAUNCH() after <<<>>>.
// To reach the copy bandwidth, keep several loads in flight per thread: float4 loads when both pointers are
// 16-byte aligned (with a scalar loop for the rest), and __restrict__.
void saxpy_kernel(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 1: saxpy_kernel");
}

}  // namespace lab05
