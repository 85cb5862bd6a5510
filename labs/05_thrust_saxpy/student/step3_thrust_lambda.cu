// Lab 05, step 3 - your implementation: saxpy with thrust::transform and a lambda.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
// This file is compiled with nvcc --extended-lambda, so __device__ and __host__ __device__ lambdas work here.
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>

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

// Step 3. The same call with the functor replaced by a lambda that captures a: [a] __host__ __device__ (float xi,
// float yi) { ... }. (Or placeholders: using namespace thrust::placeholders; a * _1 + _2.)
void saxpy_thrust_lambda(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 3: saxpy_thrust_lambda");
}

}  // namespace lab05
