// Lab 07 reference, step 3: CSR sparse matrix-vector products, one thread per row (3a) and one warp per row (3b).
#include <cstddef>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

namespace {

constexpr int kThreads = 256;  // every kernel here: 8 warps, a multiple of 32 (the shuffle reductions need it)
unsigned elementwise_grid(long long threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

// Warp shuffles: the 32 lanes of a warp exchange registers directly, no shared memory and no barrier. The full
// mask is correct because every caller reaches this with all 32 lanes of the warp.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;  // complete in lane 0
}
// Step 3a: one thread per row. Good when rows are short (the 5- and 7-point Laplacians): a warp covers 32
// consecutive rows, whose entries are contiguous, so the warp's loads of values/col_idx fall in a few cache
// lines that the L1 keeps for the next k. Long rows make the warp's lanes wait for the longest one.
//
// The row loop is unrolled by 5, the row length of the 2D Poisson matrices the CG gates solve: the five col[k] and
// val[k] loads of a row, and then its five x[col[k]] loads, are issued together instead of one after the other.
// Without the pragma (the compiler's own unrolling) the kernel reached 0.85 of the bytes-moved floor on an H200,
// unrolled by 4 also 0.85 (four entries and a remainder trip), by 5 1.00, not unrolled 0.78 (tools/tuning/tune07.cu,
// two runs each). Longer rows take the unrolled body once per five entries.
#ifndef LAB07_SPMV_UNROLL
#define LAB07_SPMV_UNROLL 5  // tools/tuning/tune07.cu compares other factors
#endif
constexpr int kSpmvUnroll = LAB07_SPMV_UNROLL;
__global__ void spmv_thread_per_row_kernel(int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                                           const double* __restrict__ val, const double* __restrict__ x,
                                           double* __restrict__ y) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::size_t(rows)) return;
  const int end = row_ptr[i + 1];
  double sum = 0;
#pragma unroll kSpmvUnroll
  for (int k = row_ptr[i]; k < end; ++k) sum = fma(val[k], __ldg(&x[col[k]]), sum);
  y[i] = sum;
}

// Step 3b: one warp per row. The 32 lanes read 32 consecutive entries of the row (coalesced), and a shuffle
// tree adds the lanes' sums. Good for long rows; for 5 entries per row 27 lanes idle.
__global__ void spmv_warp_per_row_kernel(int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                                         const double* __restrict__ val, const double* __restrict__ x,
                                         double* __restrict__ y) {
  const std::size_t row = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= std::size_t(rows)) return;  // the whole warp leaves together: the row index is the same for all lanes
  const int begin = row_ptr[row], end = row_ptr[row + 1];
  double sum = 0;
  for (int k = begin + lane; k < end; k += 32) sum = fma(val[k], __ldg(&x[col[k]]), sum);
  sum = warp_sum(sum);
  if (lane == 0) y[row] = sum;
}

}  // namespace

void spmv_thread_per_row(const DeviceCsr& A, const double* x, double* y) {
  args::csr(A, "spmv_thread_per_row");
  args::ptr(x, A.cols, "spmv_thread_per_row");
  args::ptr(y, A.rows, "spmv_thread_per_row");
  if (A.rows == 0) return;
  spmv_thread_per_row_kernel<<<elementwise_grid(A.rows), kThreads>>>(A.rows, A.row_ptr, A.col_idx, A.values, x, y);
  LABKIT_CHECK_LAUNCH();
}

void spmv_warp_per_row(const DeviceCsr& A, const double* x, double* y) {
  args::csr(A, "spmv_warp_per_row");
  args::ptr(x, A.cols, "spmv_warp_per_row");
  args::ptr(y, A.rows, "spmv_warp_per_row");
  if (A.rows == 0) return;
  spmv_warp_per_row_kernel<<<elementwise_grid(32ll * A.rows), kThreads>>>(A.rows, A.row_ptr, A.col_idx, A.values,
                                                                          x, y);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab07
