// Lab 05 reference solution: saxpy by hand, with Thrust, with cuBLAS, fused with a norm, interop, sort and reduce.
// Needs nvcc --extended-lambda (step 3).
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

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "labkit/cublas.h"
#include "labkit/labkit.h"
#include "labkit/timing.h"
#include "saxpy.h"

namespace lab05 {

namespace {

void check_args(std::size_t n, const float* x, const float* y) {
  if (n > 0 && (x == nullptr || y == nullptr)) throw std::invalid_argument("lab05: null device pointer with n > 0");
}

// ---------------------------------------------------------------------------------------------------------
// Step 1: a grid-stride loop. The grid is one full wave of resident blocks, whatever n: each thread walks the
// array in steps of the whole grid, so consecutive threads always touch consecutive addresses (each warp access
// is one contiguous 512-byte run for float4) and no block is ever launched just to find nothing to do.
// saxpy moves 12 bytes per 2 flops: the only thing that matters is keeping enough bytes in flight to cover the
// DRAM latency. So each thread issues the loads of kUnroll float4 of x and of y before it uses any of them
// (16 bytes * 2 * 4 = 128 bytes in flight per thread), and __restrict__ tells the compiler that the stores to y
// cannot change x, which is what lets it keep those loads ahead of the stores.
constexpr int kBlock = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ float4 saxpy4(float a, float4 x, float4 y) {
  // fmaf rounds once: the exact a*x+y rounded to float, and NaN/Inf follow IEEE like any product and sum.
  return make_float4(fmaf(a, x.x, y.x), fmaf(a, x.y, y.y), fmaf(a, x.z, y.z), fmaf(a, x.w, y.w));
}

// (No __launch_bounds__: with it, ptxas 13.0 squeezes this kernel to 40 registers and spills 8 bytes; without,
// it uses 44 and spills nothing. 5 resident blocks of 256 threads per SM keep ~160 KB per SM in flight.)
template <bool kVec>
__global__ void saxpy_grid_stride_kernel(std::size_t n, float a, const float* __restrict__ x, float* __restrict__ y) {
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t done = 0;  // elements handled by the vector part; the scalar loop below takes the rest
  if constexpr (kVec) {
    // 16-byte loads: x and y are 16-byte aligned (checked by the caller), so x4[i] is x[4i..4i+3].
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
    const std::size_t n4 = n / 4;
    std::size_t i = tid;
    // Main loop: kUnroll independent float4s per thread per trip, all loads issued before the first store.
    for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
      float4 xv[kUnroll], yv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) xv[u] = x4[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) yv[u] = y4[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) y4[i + u * stride] = saxpy4(a, xv[u], yv[u]);
    }
    for (; i < n4; i += stride) y4[i] = saxpy4(a, x4[i], y4[i]);  // the last < kUnroll strides
    done = n4 * 4;
  }
  // Scalar loop: everything when unaligned, else the last n % 4 elements (taken by threads 0..2 of block 0).
  for (std::size_t i = done + tid; i < n; i += stride) y[i] = fmaf(a, x[i], y[i]);
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// One full wave: as many blocks as can be resident at once on every SM (queried once per kernel variant).
template <bool kVec>
unsigned full_wave_blocks() {
  static const unsigned blocks = [] {
    int dev = 0, sms = 0, per_sm = 0;
    LABKIT_CUDA(cudaGetDevice(&dev));
    LABKIT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    LABKIT_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, saxpy_grid_stride_kernel<kVec>, kBlock, 0));
    return static_cast<unsigned>(std::max(1, sms * std::max(1, per_sm)));
  }();
  return blocks;
}

// ---------------------------------------------------------------------------------------------------------
// Step 2: the functor. Thrust instantiates its own transform kernel with it; __host__ __device__ lets the same
// object be called on either side (Thrust also needs its return type on the host, which a functor declares).
struct SaxpyFunctor {
  float a;
  __host__ __device__ float operator()(float xi, float yi) const { return fmaf(a, xi, yi); }
};

// ---------------------------------------------------------------------------------------------------------
// Step 5: the fused pass. transform_reduce calls this once per index (the reduction reads each input item once):
// it updates y[i] in place and hands v*v to the reduction, so y is read and written once and never re-read.
// Squares are summed in double: one fp64 add per 12 bytes of traffic is free on a memory-bound pass.
struct SaxpySquare {
  float a;
  const float* x;
  float* y;
  __host__ __device__ double operator()(std::size_t i) const {
    const float v = fmaf(a, x[i], y[i]);
    y[i] = v;
    return double(v) * double(v);
  }
};
struct Square {
  __host__ __device__ double operator()(float v) const { return double(v) * double(v); }
};

// Step 6b: x - x is 0 for every finite x and NaN for +-Inf and NaN (IEEE), so this tests "not finite" with two
// instructions and no library call that might differ between host and device.
struct NotFinite {
  __host__ __device__ bool operator()(float v) const { return !(v - v == 0.0f); }
};

// Step 7a: element i of the seeded stream, the same function the host generator calls (labkit/random.h is
// __host__ __device__), so the device fill is bit-identical to labkit::random_floats.
struct UniformAt {
  std::uint64_t seed;
  float lo, hi;
  __host__ __device__ float operator()(std::int64_t i) const {
    return labkit::uniform_float(seed, static_cast<std::uint64_t>(i), lo, hi);
  }
};

}  // namespace

// Step 1 --------------------------------------------------------------------------------------------------
void saxpy_kernel(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return;  // a launch with 0 blocks is an error, and there is nothing to do
  if (aligned16(x) && aligned16(y)) {
    const std::size_t units = std::max<std::size_t>(n / 4, 1);
    const unsigned grid = static_cast<unsigned>(std::min<std::size_t>((units + kBlock - 1) / kBlock,
                                                                      full_wave_blocks<true>()));
    saxpy_grid_stride_kernel<true><<<grid, kBlock>>>(n, a, x, y);
  } else {
    const unsigned grid =
        static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, full_wave_blocks<false>()));
    saxpy_grid_stride_kernel<false><<<grid, kBlock>>>(n, a, x, y);
  }
  LABKIT_CHECK_LAUNCH();
}

// Step 2 --------------------------------------------------------------------------------------------------
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

// Step 3 --------------------------------------------------------------------------------------------------
// An extended lambda (nvcc --extended-lambda). __host__ __device__ rather than plain __device__: the host side
// can then deduce its return type, which Thrust/CUB ask for when they choose a kernel.
void saxpy_thrust_lambda(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return;
  thrust::device_ptr<const float> xp(x);
  thrust::device_ptr<float> yp(y);
  thrust::transform(thrust::cuda::par_nosync, xp, xp + n, yp, yp,
                    [a] __host__ __device__(float xi, float yi) { return fmaf(a, xi, yi); });
}

// Step 4 --------------------------------------------------------------------------------------------------
// cublasSaxpy takes an int count: larger arrays go in chunks (2^30 elements, far beyond where launch overhead
// matters). alpha is read from host memory in the handle's default pointer mode.
void saxpy_cublas(cublasHandle_t handle, std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  constexpr std::size_t kChunk = std::size_t(1) << 30;
  for (std::size_t off = 0; off < n; off += kChunk) {
    const int m = static_cast<int>(std::min(kChunk, n - off));
    LABKIT_CUBLAS(cublasSaxpy(handle, m, &a, x + off, 1, y + off, 1));
  }
}

// Step 5 --------------------------------------------------------------------------------------------------
// Unfused: the saxpy writes y (12 bytes per element), then the reduction reads it back (4 more): 16 bytes.
double saxpy_norm_unfused(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return 0.0;
  saxpy_thrust_functor(n, a, x, y);
  thrust::device_ptr<const float> yp(y);
  const double sum_sq = thrust::transform_reduce(thrust::cuda::par, yp, yp + n, Square{}, 0.0, thrust::plus<double>());
  return std::sqrt(sum_sq);
}

// Fused: one pass over indices; the functor reads x[i], y[i], writes y[i] and returns the square: 12 bytes.
double saxpy_norm_fused(std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  if (n == 0) return 0.0;
  thrust::counting_iterator<std::size_t> first(0);
  const double sum_sq =
      thrust::transform_reduce(thrust::cuda::par, first, first + n, SaxpySquare{a, x, y}, 0.0, thrust::plus<double>());
  return std::sqrt(sum_sq);
}

// Step 6 --------------------------------------------------------------------------------------------------
// (a) Thrust owns the memory (device_vector: cudaMalloc in the constructor, cudaFree in the destructor, copies
// from host iterators); raw_pointer_cast gives the plain float* our own kernel needs.
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

// Step 7 --------------------------------------------------------------------------------------------------
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
