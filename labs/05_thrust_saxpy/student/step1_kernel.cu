// Lab 05 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05      (or: labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
// This file is compiled with nvcc --extended-lambda, so __device__ and __host__ __device__ lambdas work here.
#include <thrust/count.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/tabulate.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "labkit/cublas.h"
#include "labkit/labkit.h"
#include "labkit/timing.h"  // labkit::EventTimer, for step 7
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

// Step 2. Wrap x and y in thrust::device_ptr (so Thrust knows they live on the device) and call
// thrust::transform(first1, last1, first2, result, op) with a struct whose operator() is __host__ __device__.
// Which execution policy lets the call return without waiting for the kernel (see thrust::cuda::par_nosync)?
void saxpy_thrust_functor(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 2: saxpy_thrust_functor");
}

// Step 3. The same call with the functor replaced by a lambda that captures a: [a] __host__ __device__ (float xi,
// float yi) { ... }. (Or placeholders: using namespace thrust::placeholders; a * _1 + _2.)
void saxpy_thrust_lambda(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 3: saxpy_thrust_lambda");
}

// Step 4. cublasSaxpy(handle, int n, const float* alpha, x, incx, y, incy). Its count is an int: what do you do
// with n > INT_MAX? Wrap the call in LABKIT_CUBLAS(...).
void saxpy_cublas(cublasHandle_t handle, std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)handle, (void)a;
  throw labkit::NotImplemented("step 4: saxpy_cublas");
}

// Step 5 (unfused). Your step-2 saxpy, then thrust::transform_reduce over y with a squaring functor that returns
// double, init 0.0 and thrust::plus<double>(); return the square root.
double saxpy_norm_unfused(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 5: saxpy_norm_unfused");
}

// Step 5 (fused). One pass: transform_reduce over thrust::counting_iterator<size_t> indices 0..n-1 with a functor
// holding a, x and y that computes v = a*x[i] + y[i], stores it to y[i] and returns v*v (as double).
double saxpy_norm_fused(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  (void)a;
  throw labkit::NotImplemented("step 5: saxpy_norm_fused");
}

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

// Step 7a. thrust::tabulate(first, last, f) stores f(i) to element i. Make f call labkit::uniform_float(seed, i,
// lo, hi) (labkit/random.h is __host__ __device__), so the device values equal the host generator's bit for bit.
void fill_uniform(float* out, std::size_t n, std::uint64_t seed, float lo, float hi) {
  if (n > 0 && out == nullptr) throw std::invalid_argument("lab05: null device pointer with n > 0");
  (void)seed, (void)lo, (void)hi;
  throw labkit::NotImplemented("step 7: fill_uniform");
}

// Step 7b. Allocate a thrust::device_vector (before timing), then time each phase with its own pair of events
// (labkit::EventTimer: start(), stop(), elapsed_ms()): cudaMemcpy host -> device, thrust::sort, thrust::reduce
// with init 0.0 and thrust::plus<double>(), cudaMemcpy device -> host into `data`. n == 0: all zeros.
SortSumReport sort_and_sum(std::vector<float>& data) {
  (void)data;
  throw labkit::NotImplemented("step 7: sort_and_sum");
}

}  // namespace lab05
