// Lab 05 reference, step 6: Thrust-owned memory with your own kernel, and raw CUDA memory with a Thrust algorithm.
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <stdexcept>

#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

namespace {

// x - x is 0 for every finite x and NaN for +-Inf and NaN (IEEE), so this tests "not finite" with two
// instructions and no library call that might differ between host and device.
struct NotFinite {
  __host__ __device__ bool operator()(float v) const { return !(v - v == 0.0f); }
};

}  // namespace

// (a) Thrust owns the memory (device_vector: cudaMalloc in the constructor, cudaFree in the destructor, copies
// from host iterators); raw_pointer_cast gives the plain float* step 1's launcher takes.
void saxpy_device_vector(float a, const std::vector<float>& x, std::vector<float>& y) {
  if (x.size() != y.size()) throw std::invalid_argument("lab05: saxpy_device_vector needs x and y of equal size");
  thrust::device_vector<float> dx(x.begin(), x.end()), dy(y.begin(), y.end());
  saxpy_kernel(x.size(), a, thrust::raw_pointer_cast(dx.data()), thrust::raw_pointer_cast(dy.data()));
  thrust::copy(dy.begin(), dy.end(), y.begin());  // device -> host; waits for the kernel (same stream)
}

// (b) The caller owns the memory (cudaMalloc); device_ptr lets Thrust algorithms run on it. count_if returns a
// number to the host, so it waits for its own kernel.
std::size_t count_nonfinite(const float* x, std::size_t n) {
  if (n > 0 && x == nullptr) throw std::invalid_argument("lab05: null device pointer with n > 0");
  if (n == 0) return 0;
  thrust::device_ptr<const float> xp(x);
  return static_cast<std::size_t>(thrust::count_if(thrust::cuda::par, xp, xp + n, NotFinite{}));
}

}  // namespace lab05
