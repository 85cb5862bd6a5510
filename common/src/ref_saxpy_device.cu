// The device twins of ref_saxpy.h's checks: the per-element saxpy rule and the 2-norm over a device array.
#include <algorithm>
#include <cmath>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/random.h"
#include "labkit/ref_saxpy.h"

namespace labkit {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kNormBlocks = 1024;  // fixed: the order of the norm's sum must not depend on n or the GPU

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::size_t>(std::max<std::size_t>(b, 1), 4096));
}

// saxpy_error_bound, written with explicitly rounded operations: the compiler would otherwise fuse a multiply and
// an add into one fma (rounded once instead of twice), and the bound would differ from the host's in its last bit.
__device__ inline double error_bound(double ax, double exact) {
  constexpr double u = 0x1p-24;
  const double p = fabs(ax), e = fabs(exact);
  return __dadd_rn(__dmul_rn(__dmul_rn(u, p), 1 + u), __dmul_rn(u, e));
}

// out[0] += wrong elements, out[1] = the smallest wrong index. Per-thread tallies; atomics only where something
// was found, so a right answer costs one read of y.
__global__ void saxpy_scan_kernel(const float* y, std::size_t n, float a, std::uint64_t sx, std::uint64_t sy,
                                  unsigned long long* out) {
  unsigned long long wrong = 0, first = ~0ull;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float x = uniform_float(sx, i, -1.f, 1.f), y0 = uniform_float(sy, i, -1.f, 1.f);
    const double ax = __dmul_rn(double(a), double(x));  // exact: 24-bit times 24-bit
    const double ex = __dadd_rn(ax, double(y0)), g = y[i];
    const bool bad = isnan(ex)   ? !isnan(g)
                     : isinf(ex) ? g != ex
                                 : !(fabs(__dsub_rn(g, ex)) <= __dmul_rn(2.0, error_bound(ax, ex)));
    if (bad) {
      ++wrong;
      first = min(first, static_cast<unsigned long long>(i));
    }
  }
  if (wrong) {
    atomicAdd(&out[0], wrong);
    atomicMin(&out[1], first);
  }
}

// partial[block] = the sum of double(v[i])^2 over the block's elements: each thread in index order, then a tree
// over the block's threads. Fixed shapes, so the same n gives the same bits every time.
__global__ void sum_squares_kernel(const float* v, std::size_t n, double* partial) {
  __shared__ double s[kThreads];
  double acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const double d = v[i];
    acc = __dadd_rn(acc, __dmul_rn(d, d));
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = kThreads / 2; half; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

}  // namespace

SaxpyScan saxpy_scan_device(const float* y, std::size_t n, float a, std::uint64_t seed_x, std::uint64_t seed_y) {
  SaxpyScan r;
  if (!n) return r;
  DeviceBuffer<unsigned long long> out(std::vector<unsigned long long>{0, ~0ull});
  saxpy_scan_kernel<<<blocks_for(n), kThreads>>>(y, n, a, seed_x, seed_y, out.data());
  LABKIT_CHECK_LAUNCH();
  const auto h = out.download();
  r.wrong = h[0];
  r.first = h[1];
  return r;
}

double norm2_device(const float* v, std::size_t n) {
  if (!n) return 0;
  DeviceBuffer<double> partial(kNormBlocks);
  sum_squares_kernel<<<kNormBlocks, kThreads>>>(v, n, partial.data());
  LABKIT_CHECK_LAUNCH();
  double total = 0;
  for (double p : partial.download()) total += p;  // block order: repeatable
  return std::sqrt(total);
}

}  // namespace labkit
