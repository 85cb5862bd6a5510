// Lab 05, step 5a - your implementation: saxpy and its norm in two passes.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform_reduce.h>

#include <cmath>
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

// Step 5a (unfused). Your step-2 saxpy, then thrust::transform_reduce over y with a squaring functor that returns
// double, init 0.0 and thrust::plus<double>(); return the square root. Count the bytes: 12 per element for the
// saxpy, 4 more for reading y back.
double saxpy_norm_unfused(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 5a: saxpy_norm_unfused");
}

}  // namespace lab05
