// Lab 01 reference, step 2: one thread per element of C, consecutive threads walk ALONG a row.
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

// Consecutive threads take consecutive COLUMNS j of one row i. Now the warp reads B[k][j..j+31]: 128 contiguous
// bytes, one transaction; A[i][k] is a broadcast; C is updated with one coalesced access.
__global__ void matmul_naive_row_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
  C[std::size_t(i) * N + j] += acc;
}

}  // namespace

void matmul_naive_row(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 block(32, 8), grid(blocks(N, 32), blocks(M, 8));
  check_grid_y(grid.y);
  matmul_naive_row_kernel<<<grid, block>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
