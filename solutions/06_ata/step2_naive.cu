// Lab 06 reference, step 2: one thread per element of C, straight from global memory.
#include <cstddef>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

namespace {

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }
void check_grid_y(unsigned y) {
  if (y > 65535) throw std::invalid_argument("lab06: N too large for this kernel's grid (gridDim.y > 65535)");
}


// Step 2: thread (i, j) walks down columns i and j of A. Consecutive threads (threadIdx.x) take consecutive j,
// so the warp's load of A[k][j..j+31] is one 256-byte coalesced access and A[k][i] is a broadcast. Every element
// of A is nevertheless read from L2/DRAM about N times over the grid: memory bound.
__global__ void ata_naive_kernel(int M, int N, const double* __restrict__ A, double* __restrict__ C) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= N || j >= N) return;
  double acc = 0;
  for (int k = 0; k < M; ++k) acc += A[std::size_t(k) * N + i] * A[std::size_t(k) * N + j];
  C[std::size_t(i) * N + j] = acc;
}

}  // namespace

void ata_naive(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 block(32, 8), grid(blocks(N, 32), blocks(N, 8));
  check_grid_y(grid.y);
  ata_naive_kernel<<<grid, block>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab06
