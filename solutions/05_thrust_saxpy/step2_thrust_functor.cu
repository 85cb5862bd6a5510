// Lab 05 reference, step 2: saxpy with thrust::transform and a __host__ __device__ functor.
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

// Thrust instantiates its own transform kernel with the functor; __host__ __device__ lets the same object be
// called on either side (Thrust also needs its return type on the host, which a functor declares).
struct SaxpyFunctor {
  float a;
  __host__ __device__ float operator()(float xi, float yi) const { return fmaf(a, xi, yi); }
};

}  // namespace

// device_ptr marks raw pointers as device memory, so Thrust dispatches to its CUDA backend. par_nosync: the
// default policy waits for the kernel before returning (a host round trip per call); this one leaves the work
// queued on the default stream like a kernel launch (launch errors still throw thrust::system_error).
void saxpy_thrust_functor(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return;
  thrust::device_ptr<const float> xp(x);
  thrust::device_ptr<float> yp(y);
  thrust::transform(thrust::cuda::par_nosync, xp, xp + n, yp, yp, SaxpyFunctor{a});
}

}  // namespace lab05
