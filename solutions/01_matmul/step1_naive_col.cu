// Lab 01 reference, step 1: one thread per element of C, consecutive threads walk DOWN a column.
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

// Consecutive threads take consecutive ROWS i of one column j. In the k loop a warp reads A[i][k] for 32
// different rows: 32 addresses K floats apart, 32 separate memory transactions per load. B[k][j] is the same
// address for the whole warp (a broadcast), and the final C update is strided again.
__global__ void matmul_naive_col_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
  C[std::size_t(i) * N + j] += acc;
}

}  // namespace

void matmul_naive_col(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 block(32, 8), grid(blocks(M, 32), blocks(N, 8));
  check_grid_y(grid.y);
  matmul_naive_col_kernel<<<grid, block>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
