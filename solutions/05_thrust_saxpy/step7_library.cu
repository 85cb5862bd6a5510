// Lab 05 reference, step 7: library algorithms around the data: a device-side random fill (thrust::tabulate) and
// the round trip host -> device -> sort -> sum -> host with each phase timed.
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
#include "labkit/timing.h"
#include "saxpy.h"

namespace lab05 {

namespace {

// (a) Element i of the seeded stream, the same function the host generator calls (labkit/random.h is
// __host__ __device__), so the device fill is bit-identical to labkit::random_floats.
struct UniformAt {
  std::uint64_t seed;
  float lo, hi;
  __host__ __device__ float operator()(std::int64_t i) const {
    return labkit::uniform_float(seed, static_cast<std::uint64_t>(i), lo, hi);
  }
};

}  // namespace

// (a) tabulate calls the functor with each index: a counter-based generator needs nothing else (no state,
// no sequence to advance), so every element is computed independently and in parallel.
void fill_uniform(float* out, std::size_t n, std::uint64_t seed, float lo, float hi) {
  if (n > 0 && out == nullptr) throw std::invalid_argument("lab05: null device pointer with n > 0");
  if (n == 0) return;
  thrust::device_ptr<float> p(out);
  thrust::tabulate(thrust::cuda::par_nosync, p, p + n, UniformAt{seed, lo, hi});
}

// (b) Each phase between its own pair of events on the default stream. The device buffer is allocated before
// the first event so that cudaMalloc is not counted as transfer time; the copies are from pageable host memory
// (std::vector), so they run at the staged rate, below what pinned memory reaches.
SortSumReport sort_and_sum(std::vector<float>& data) {
  SortSumReport r;
  const std::size_t n = data.size();
  if (n == 0) return r;
  thrust::device_vector<float> d(n);
  float* raw = thrust::raw_pointer_cast(d.data());
  labkit::EventTimer timer;

  timer.start();
  LABKIT_CUDA(cudaMemcpy(raw, data.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  timer.stop();
  r.h2d_ms = timer.elapsed_ms();

  timer.start();
  thrust::sort(thrust::cuda::par, d.begin(), d.end());  // radix sort for float keys; its temp storage included
  timer.stop();
  r.sort_ms = timer.elapsed_ms();

  timer.start();
  r.sum = thrust::reduce(thrust::cuda::par, d.begin(), d.end(), 0.0, thrust::plus<double>());
  timer.stop();
  r.reduce_ms = timer.elapsed_ms();

  timer.start();
  LABKIT_CUDA(cudaMemcpy(data.data(), raw, n * sizeof(float), cudaMemcpyDeviceToHost));
  timer.stop();
  r.d2h_ms = timer.elapsed_ms();
  return r;
}

}  // namespace lab05
