// Lab 01 reference, step 4: register blocking, each thread computes an 8x8 block of C.
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

// A block of 256 threads computes a 128x128 tile of C; each thread an 8x8 block of it, held in 64 registers. For
// each k of the 128x8 A tile and 8x128 B tile in shared memory, a thread loads 8 values of A's column and 8 of B's
// row into registers and does the 64 FMAs of their outer product: 16 shared loads feed 64 FMAs (step 3: 2 loads
// per FMA).
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);

__global__ void __launch_bounds__(kThreads) matmul_regblock_kernel(int M, int N, int K, const float* A,
                                                                   const float* B, float* C) {
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = tid; l < BM * BK; l += kThreads) {
      const int r = l / BK, c = l % BK, gr = row0 + r, gc = k0 + c;
      As[r][c] = (gr < M && gc < K) ? A[std::size_t(gr) * K + gc] : 0.f;
    }
    for (int l = tid; l < BK * BN; l += kThreads) {
      const int r = l / BN, c = l % BN, gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? B[std::size_t(gr) * N + gc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int m = 0; m < TM; ++m) a[m] = As[trow * TM + m][kk];
#pragma unroll
      for (int n = 0; n < TN; ++n) b[n] = Bs[kk][tcol * TN + n];
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

void matmul_regblock(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, BN), blocks(M, BM));
  check_grid_y(grid.y);
  matmul_regblock_kernel<<<grid, kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
