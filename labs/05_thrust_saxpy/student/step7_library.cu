// Lab 05, step 7 - your implementation: a device-side random fill; sort and sum with timed phases.
// Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab05 -L student      (your gates; or: build/gpu/labgrade 05)
// The walkthrough (labs/05_thrust_saxpy/README.md) explains each step and what its gates check.
// This file is compiled with nvcc --extended-lambda, so __device__ and __host__ __device__ lambdas work here.
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/tabulate.h>

#include <cstdint>
#include <stdexcept>

#include "labkit/labkit.h"
#include "labkit/timing.h"  // labkit::EventTimer, for 7b
#include "saxpy.h"

namespace lab05 {

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
