// Lab 01 reference, step 3: square tiles of A and B staged in shared memory, one element of C per thread.
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

// A 32x32 block computes a 32x32 tile of C. Each step along k stages a 32x32 tile of A and of B in shared memory
// (one coalesced load per thread each), so every global element is read by the block once instead of 32 times.
constexpr int kTile = 32;

__global__ void matmul_tiled_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Out-of-range elements load as 0 so that the partial last tile needs no special case in the product.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[std::size_t(row) * K + k0 + tx] : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[std::size_t(k0 + ty) * N + col] : 0.f;
    __syncthreads();  // the tiles are complete before anyone reads them
    // As[ty][k] is one address for the whole warp (broadcast); Bs[k][tx] are 32 consecutive words, 32 banks.
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // everyone is done reading before the next iteration overwrites the tiles
  }
  if (row < M && col < N) C[std::size_t(row) * N + col] += acc;
}

}  // namespace

void matmul_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 block(kTile, kTile), grid(blocks(N, kTile), blocks(M, kTile));
  check_grid_y(grid.y);
  matmul_tiled_kernel<<<grid, block>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
