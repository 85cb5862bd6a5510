// Lab 01 reference, step 5b: step 5a with a thread-to-result layout whose 16-byte shared loads have no bank conflicts.
#include <stdexcept>

#include "labkit/labkit.h"
#include "matmul.h"

namespace lab01 {

namespace {

void check_sizes(int M, int N, int K) {
  if (M < 1 || N < 1 || K < 1) throw std::invalid_argument("lab01: M, N and K must be >= 1");
}

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

void check_grid_y(unsigned y) {
  if (y > 65535) throw std::invalid_argument("lab01: matrix too large for this kernel's grid (gridDim.y > 65535)");
}

// Step 5a's kernel with one change: which results a thread owns. In 5a, the 8 lanes of a warp that share one
// 16-byte load phase read 8 float4s of B that are 32 bytes apart: 256 bytes, two passes over the 32 banks. Here
// each thread owns four 4x4 sub-blocks, 32 rows and 16 columns apart, placed so that the 8 lanes of a phase read
// 2 contiguous float4s of A (32 bytes) and 4 contiguous float4s of B (64 bytes): one pass each, no conflicts.
// The warps tile the 128x128 block as 2x4 warps of 64x32 results; within a warp 8x4 lanes.
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);

__global__ void __launch_bounds__(kThreads) matmul_conflict_free_kernel(int M, int N, int K, const float* A,
                                                                        const float* B, float* C) {
  __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m] = A[row0 + m][k0 + k]
  __shared__ __align__(16) float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int tr = (warp / 4) * 64 + (lane / 4) * 4;  // first row of the upper sub-blocks (+32: the lower ones)
  const int tc = (warp % 4) * 32 + (lane % 4) * 4;  // first column of the left sub-blocks (+16: the right ones)
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = tid; l < BM * BK; l += kThreads) {
      const int r = l / BK, c = l % BK, gr = row0 + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? A[std::size_t(gr) * K + gc] : 0.f;
    }
    for (int l = tid; l < BK * BN; l += kThreads) {
      const int r = l / BN, c = l % BN, gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? B[std::size_t(gr) * N + gc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      // tr and tc are multiples of 4 floats: every float4 below is 16-byte aligned.
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][tr]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][tr + 32]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tc]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][tc + 16]);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
    }
    __syncthreads();
  }
  // acc[m][n]: row tr + m (m < 4) or tr + 32 + m - 4, column tc + n (n < 4) or tc + 16 + n - 4.
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    const int r = row0 + tr + (m < 4 ? m : 32 + m - 4);
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      const int c = col0 + tc + (n < 4 ? n : 16 + n - 4);
      if (r < M && c < N) C[std::size_t(r) * N + c] += acc[m][n];
    }
  }
}

}  // namespace

void matmul_conflict_free(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, BN), blocks(M, BM));
  check_grid_y(grid.y);
  matmul_conflict_free_kernel<<<grid, kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
