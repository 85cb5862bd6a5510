// Lab 06 reference, step 3: square tiles of the two column panels of A in shared memory.
//
// Notation: C(i, j) = sum_k A(k, i) * A(k, j). The rows i of a block's C tile come from the column panel
// P = A[k][I0 .. I0+T) and its columns j from the panel Q = A[k][J0 .. J0+T). Both panels are slices of ROWS of A,
// so a warp loading them reads consecutive addresses: the "transpose" in A^T costs nothing as long as the tiles
// are stored k-major in shared memory, exactly as they lie in A.
#include <cstddef>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

namespace {

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }
void check_grid_y(unsigned y) {
  if (y > 65535) throw std::invalid_argument("lab06: N too large for this kernel's grid (gridDim.y > 65535)");
}


// Step 3: a 32x32 block computes a 32x32 tile of C. Per step along k it stages 32 rows of the panels P and Q in
// shared memory (one coalesced load each per thread); each A element then serves 32 threads from shared memory.
constexpr int kTile = 32;

__global__ void ata_tiled_kernel(int M, int N, const double* __restrict__ A, double* __restrict__ C) {
  __shared__ double sP[kTile][kTile];  // sP[k][r] = A(k0 + k, I0 + r)
  __shared__ double sQ[kTile][kTile];  // sQ[k][c] = A(k0 + k, J0 + c)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int I0 = blockIdx.y * kTile, J0 = blockIdx.x * kTile;
  double acc = 0;
  for (int k0 = 0; k0 < M; k0 += kTile) {
    const int k = k0 + ty;
    // Out-of-range elements load as 0: the partial last tile along k and the edges of C need no special case.
    sP[ty][tx] = (k < M && I0 + tx < N) ? A[std::size_t(k) * N + I0 + tx] : 0.0;
    sQ[ty][tx] = (k < M && J0 + tx < N) ? A[std::size_t(k) * N + J0 + tx] : 0.0;
    __syncthreads();  // both tiles complete before anyone reads them
    // sP[kk][ty]: one address per warp (broadcast); sQ[kk][tx]: 32 consecutive doubles, the minimum 2 wavefronts.
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += sP[kk][ty] * sQ[kk][tx];
    __syncthreads();  // everyone is done reading before the next iteration overwrites the tiles
  }
  const int i = I0 + ty, j = J0 + tx;
  if (i < N && j < N) C[std::size_t(i) * N + j] = acc;
}

}  // namespace

void ata_tiled(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 block(kTile, kTile), grid(blocks(N, kTile), blocks(N, kTile));
  check_grid_y(grid.y);
  ata_tiled_kernel<<<grid, block>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab06
