// Lab 05, step 6 - your implementation: Thrust and raw CUDA memory together.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
// This file is compiled with nvcc --extended-lambda, so __device__ and __host__ __device__ lambdas work here.
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <stdexcept>

#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

// Step 6a. thrust::device_vector<float> dx(x.begin(), x.end()) copies host -> device; thrust::raw_pointer_cast(
// dx.data()) is the float* your step-1 launcher takes; thrust::copy(dy.begin(), dy.end(), y.begin()) copies back.
// Different sizes of x and y: std::invalid_argument.
void saxpy_device_vector(float a, const std::vector<float>& x, std::vector<float>& y) {
  (void)a, (void)x, (void)y;
  throw labkit::NotImplemented("step 6: saxpy_device_vector");
}

// Step 6b. thrust::count_if on thrust::device_ptr<const float>(x) with a predicate that is true for NaN and
// +-Inf. (Hint: for which float values is v - v not equal to 0?)
std::size_t count_nonfinite(const float* x, std::size_t n) {
  if (n > 0 && x == nullptr) throw std::invalid_argument("lab05: null device pointer with n > 0");
  throw labkit::NotImplemented("step 6: count_nonfinite");
}

}  // namespace lab05
