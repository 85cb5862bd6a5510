// Lab 05, step 4 - your implementation: saxpy with cublasSaxpy.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
#include <stdexcept>

#include "labkit/cublas.h"
#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

namespace {
// n == 0 is a no-op (null pointers allowed); n > 0 needs real pointers. Refuse before launching anything.
void check_args(std::size_t n, const float* x, const float* y) {
  if (n > 0 && (x == nullptr || y == nullptr)) throw std::invalid_argument("lab05: null device pointer with n > 0");
}
}  // namespace

// Step 4. cublasSaxpy(handle, int n, const float* alpha, x, incx, y, incy). Its count is an int: what do you do
// with n > INT_MAX? Wrap the call in LABKIT_CUBLAS(...).
void saxpy_cublas(cublasHandle_t handle, std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)handle, (void)a;
  throw labkit::NotImplemented("step 4: saxpy_cublas");
}

}  // namespace lab05
