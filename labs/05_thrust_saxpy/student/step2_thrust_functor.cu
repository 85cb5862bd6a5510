// Lab 05, step 2 - your implementation: saxpy with thrust::transform and a functor.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
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

// Step 2. Wrap x and y in thrust::device_ptr (so Thrust knows they live on the device) and call
// thrust::transform(first1, last1, first2, result, op) with a struct whose operator() is __host__ __device__.
// Which execution policy lets the call return without waiting for the kernel (see thrust::cuda::par_nosync)?
void saxpy_thrust_functor(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 2: saxpy_thrust_functor");
}

}  // namespace lab05
