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
// xpby walks from the end to the start (block 0 takes the last elements; blocks start roughly in index order). In a
// CG iteration it follows update_xr, which wrote r front to back, so the end of r is still in the L2 cache, and the
// SpMV that follows starts where xpby ended, at the front of p (50 MB of L2 on an H100: a quarter of p and r).
#ifndef LAB07_L2_ORDER
#define LAB07_L2_ORDER 1  // 0: front to back (tools/tuning/tune07.cu compares)
#endif
__global__ void xpby_kernel(int n, const double* __restrict__ x, double b, double* __restrict__ y) {
  const std::size_t t = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, N = std::size_t(n);
  if (t >= N) return;
  const std::size_t i = LAB07_L2_ORDER ? N - 1 - t : t;
  y[i] = fma(b, y[i], x[i]);
}
// Fused x/r update: one pass reads p, Ap, x, r and writes x, r (48 bytes per element) and sums the new r^T r on
// the way, where separate axpy, axpy, dot kernels would move 64 bytes per element in three launches. Two elements
// per trip (a stride apart) with two accumulators, as in step 1b: eight independent loads in flight per thread
// instead of four, which is what keeps a fixed grid's few threads per SM at the memory's speed.
__global__ void update_xr_partial_kernel(int n, double alpha, const double* __restrict__ p,
                                         const double* __restrict__ Ap, double* __restrict__ x,
                                         double* __restrict__ r, double* __restrict__ partials) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x, N = std::size_t(n);
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double s0 = 0, s1 = 0;
  for (; i + stride < N; i += 2 * stride) {
    const std::size_t j = i + stride;
    // All eight loads before any store: the compiler cannot tell that x[j] is not x[i], so it would not move a load
    // of x[j] above the store to x[i] by itself.
    const double p0 = p[i], p1 = p[j], a0 = Ap[i], a1 = Ap[j], x0 = x[i], x1 = x[j], r0 = r[i], r1 = r[j];
    x[i] = fma(alpha, p0, x0);
    x[j] = fma(alpha, p1, x1);
    const double q0 = fma(-alpha, a0, r0), q1 = fma(-alpha, a1, r1);
    r[i] = q0;
    r[j] = q1;
    s0 = fma(q0, q0, s0);
    s1 = fma(q1, q1, s1);
  }
  if (i < N) {
    x[i] = fma(alpha, p[i], x[i]);
    const double q = fma(-alpha, Ap[i], r[i]);
    r[i] = q;
    s0 = fma(q, q, s0);
  }
  const double sum = block_sum_shuffle(s0 + s1);
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
