// Lab 07 reference, step 2: the vector updates of a CG iteration, and the fused x/r update that returns r^T r.
#include <algorithm>
#include <atomic>
#include <cstddef>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

namespace {

constexpr int kThreads = 256;  // every kernel here: 8 warps, a multiple of 32 (the shuffle reductions need it)

// The SM count of the CURRENT device, remembered per device ordinal: a process may switch devices between calls,
// and host threads may call at the same time (each slot is one atomic int; two racing threads store the same value).
int sm_count() {
  constexpr int kSlots = 64;
  static std::atomic<int> cached[kSlots];  // static storage: zero-initialized, 0 = not asked yet
  int dev = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  if (dev < kSlots)
    if (const int v = cached[dev].load(std::memory_order_relaxed)) return v;
  int v = 0;
  LABKIT_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
  if (dev < kSlots) cached[dev].store(v, std::memory_order_relaxed);
  return v;
}

// Blocks of the first reduction pass: enough to keep every SM busy (bps per SM), never more than there is work
// for, and never more partials than the caller's array holds.
int reduce_grid(int n, int bps) {
  const long long work_blocks = std::max<long long>(1, (static_cast<long long>(n) + kThreads - 1) / kThreads);
  return static_cast<int>(std::min<long long>({static_cast<long long>(bps) * sm_count(), work_blocks, kMaxPartials}));
}
unsigned elementwise_grid(long long threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

// Warp shuffles: the 32 lanes of a warp exchange registers directly, no shared memory and no barrier. The full
// mask is correct because every caller reaches this with all 32 lanes of the warp.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;  // complete in lane 0
}
// One shuffle tree per warp, the warps' sums through 32 shared slots, a last shuffle tree in warp 0. Result in
// thread 0. Must be reached by every thread of the block (it has barriers).
__device__ double block_sum_shuffle(double v) {
  __shared__ double warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // all warps' sums are written before warp 0 reads them
  v = (threadIdx.x < (blockDim.x >> 5)) ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0) v = warp_sum(v);
  __syncthreads();  // nobody rewrites warp_sums (a second call) before warp 0 has read them
  return v;
}

// The second pass: one block adds the partials of the first.
__global__ void sum_partials_shuffle_kernel(int count, const double* __restrict__ partials,
                                            double* __restrict__ result) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) *result = sum;
}

// Step 2: updates. One thread per element, coalesced: a warp reads and writes 256 contiguous bytes per array.
__global__ void axpy_kernel(int n, double a, const double* __restrict__ x, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) y[i] = fma(a, x[i], y[i]);
}
__global__ void xpby_kernel(int n, const double* __restrict__ x, double b, double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < std::size_t(n)) y[i] = fma(b, y[i], x[i]);
}
// Fused x/r update: one pass reads p, Ap, x, r and writes x, r (48 bytes per element) and sums the new r^T r on
// the way, where separate axpy, axpy, dot kernels would move 64 bytes per element in three launches.
__global__ void update_xr_partial_kernel(int n, double alpha, const double* __restrict__ p,
                                         const double* __restrict__ Ap, double* __restrict__ x,
                                         double* __restrict__ r, double* __restrict__ partials) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  double sum = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride) {
    x[i] = fma(alpha, p[i], x[i]);
    const double ri = fma(-alpha, Ap[i], r[i]);
    r[i] = ri;
    sum = fma(ri, ri, sum);
  }
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

}  // namespace

void axpy(int n, double a, const double* x, double* y) {
  args::n(n, "axpy");
  args::ptr(x, n, "axpy");
  args::ptr(y, n, "axpy");
  if (n == 0) return;
  axpy_kernel<<<elementwise_grid(n), kThreads>>>(n, a, x, y);
  LABKIT_CHECK_LAUNCH();
}

void xpby(int n, const double* x, double b, double* y) {
  args::n(n, "xpby");
  args::ptr(x, n, "xpby");
  args::ptr(y, n, "xpby");
  if (n == 0) return;
  xpby_kernel<<<elementwise_grid(n), kThreads>>>(n, x, b, y);
  LABKIT_CHECK_LAUNCH();
}

void update_xr(int n, double alpha, const double* p, const double* Ap, double* x, double* r, double* partials,
               double* rr, int blocks_per_sm) {
  args::n(n, "update_xr");
  args::blocks_per_sm(blocks_per_sm);
  for (const void* v : {static_cast<const void*>(p), static_cast<const void*>(Ap), static_cast<const void*>(x),
                        static_cast<const void*>(r)})
    args::ptr(v, n, "update_xr");
  args::scalar_out(partials, rr, "update_xr");
  const int grid = reduce_grid(n, blocks_per_sm);
  update_xr_partial_kernel<<<grid, kThreads>>>(n, alpha, p, Ap, x, r, partials);
  LABKIT_CHECK_LAUNCH();
  sum_partials_shuffle_kernel<<<1, kThreads>>>(grid, partials, rr);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab07
