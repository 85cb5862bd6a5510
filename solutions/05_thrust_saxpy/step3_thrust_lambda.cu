// Lab 05 reference, step 3: saxpy with thrust::transform and an extended lambda (nvcc --extended-lambda).
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>

#include <stdexcept>

#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

namespace {

void check_args(std::size_t n, const float* x, const float* y) {
  if (n > 0 && (x == nullptr || y == nullptr)) throw std::invalid_argument("lab05: null device pointer with n > 0");
}

}  // namespace

// __host__ __device__ rather than plain __device__: the host side can then deduce the lambda's return type, which
// Thrust/CUB ask for when they choose a kernel. par_nosync as in step 2: no wait after the kernel.
void saxpy_thrust_lambda(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return;
  thrust::device_ptr<const float> xp(x);
  thrust::device_ptr<float> yp(y);
  thrust::transform(thrust::cuda::par_nosync, xp, xp + n, yp, yp,
                    [a] __host__ __device__(float xi, float yi) { return fmaf(a, xi, yi); });
}

}  // namespace lab05
