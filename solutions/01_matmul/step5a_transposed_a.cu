// Lab 01 reference, step 5a: step 4 with the A tile stored transposed, so that shared memory is read in 16 bytes.
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

// Step 4's tile and 8x8 block per thread, but the A tile is stored TRANSPOSED (As[k][m]): a thread's 8 values of
// A for one k are then contiguous, like its 8 values of B, and each set is read with two 16-byte (float4) shared
// loads instead of eight 4-byte ones: 4 shared-load instructions feed 64 FMAs (step 4: 16). The transposed stores
// of the A tile conflict (8 lanes per bank), but they happen once per tile, the loads BK times.
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);

__global__ void __launch_bounds__(kThreads) matmul_transposed_a_kernel(int M, int N, int K, const float* A,
                                                                       const float* B, float* C) {
  __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m] = A[row0 + m][k0 + k]
  __shared__ __align__(16) float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
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
      // trow * TM floats = a multiple of 32 bytes: every float4 below is 16-byte aligned.
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][trow * TM]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][trow * TM + 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tcol * TN]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][tcol * TN + 4]);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    const int r = row0 + trow * TM + m;
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      const int c = col0 + tcol * TN + n;
      if (r < M && c < N) C[std::size_t(r) * N + c] += acc[m][n];
    }
  }
}

}  // namespace

void matmul_transposed_a(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, BN), blocks(M, BM));
  check_grid_y(grid.y);
  matmul_transposed_a_kernel<<<grid, kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
