// Lab 07 reference, step 1: the two-pass dot product, with a shared-memory tree (1a) and with warp shuffles (1b).
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

// ---- reductions inside a block ----------------------------------------------------------------------------------
// Tree in shared memory: each level halves the active threads; the barrier after each level makes the sums of
// that level visible before the next reads them. Result in thread 0.
__device__ double block_sum_shared(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  return s[0];
}

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

// Step 1a: two-pass dot product with a shared-memory tree. Grid-stride loop: consecutive threads read
// consecutive elements (each warp: one 256-byte segment per array per trip), and a fixed grid does all of n.
__global__ void dot_partial_shared_kernel(int n, const double* __restrict__ x, const double* __restrict__ y,
                                          double* __restrict__ partials) {
  double sum = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n); i += stride)
    sum = fma(x[i], y[i], sum);
  sum = block_sum_shared(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void sum_partials_shared_kernel(int count, const double* __restrict__ partials,
                                           double* __restrict__ result) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shared(sum);
  if (threadIdx.x == 0) *result = sum;
}

// Step 1b: the same with shuffles, and two independent accumulators per thread so that each trip of the loop has
// four loads in flight instead of two (more bytes in flight per SM is what a bandwidth-bound loop needs).
//
// It walks the arrays from the end to the start. In a CG iteration it runs right after the SpMV that wrote y = Ap
// from the first row to the last, so the last tens of MB of p and Ap are still in the L2 cache when it starts
// (50 MB on an H100): a forward walk would start at the cold end and push them out before reaching them.
#ifndef LAB07_L2_ORDER
#define LAB07_L2_ORDER 1  // 0: front to back (tools/tuning/tune07.cu compares)
#endif
__device__ __forceinline__ std::size_t walk(std::size_t i, std::size_t N) { return LAB07_L2_ORDER ? N - 1 - i : i; }
__global__ void dot_partial_shuffle_kernel(int n, const double* __restrict__ x, const double* __restrict__ y,
                                           double* __restrict__ partials) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x, N = std::size_t(n);
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double a0 = 0, a1 = 0;
  for (; i + stride < N; i += 2 * stride) {
    const std::size_t k0 = walk(i, N), k1 = walk(i + stride, N);
    a0 = fma(x[k0], y[k0], a0);
    a1 = fma(x[k1], y[k1], a1);
  }
  if (i < N) a0 = fma(x[walk(i, N)], y[walk(i, N)], a0);
  const double sum = block_sum_shuffle(a0 + a1);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}
__global__ void sum_partials_shuffle_kernel(int count, const double* __restrict__ partials,
                                            double* __restrict__ result) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum_shuffle(sum);
  if (threadIdx.x == 0) *result = sum;
}

}  // namespace

void dot_twopass(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  args::n(n, "dot_twopass");
  args::blocks_per_sm(blocks_per_sm);
  args::ptr(x, n, "dot_twopass");
  args::ptr(y, n, "dot_twopass");
  args::scalar_out(partials, result, "dot_twopass");
  const int grid = reduce_grid(n, blocks_per_sm);
  dot_partial_shared_kernel<<<grid, kThreads>>>(n, x, y, partials);
  LABKIT_CHECK_LAUNCH();
  sum_partials_shared_kernel<<<1, kThreads>>>(grid, partials, result);
  LABKIT_CHECK_LAUNCH();
}

void dot_shuffle(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  args::n(n, "dot_shuffle");
  args::blocks_per_sm(blocks_per_sm);
  args::ptr(x, n, "dot_shuffle");
  args::ptr(y, n, "dot_shuffle");
  args::scalar_out(partials, result, "dot_shuffle");
  const int grid = reduce_grid(n, blocks_per_sm);
  dot_partial_shuffle_kernel<<<grid, kThreads>>>(n, x, y, partials);
  LABKIT_CHECK_LAUNCH();
  sum_partials_shuffle_kernel<<<1, kThreads>>>(grid, partials, result);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab07
