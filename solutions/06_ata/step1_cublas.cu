// Lab 06 reference, step 1: A^T A with cublasDgemm (1a), and with cublasDsyrk plus a mirror kernel (1b).
#include <cstddef>

#include "ata.h"
#include "labkit/cublas.h"
#include "labkit/labkit.h"

namespace lab06 {

namespace {

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }
void check_grid_y(unsigned y) {
  if (y > 65535) throw std::invalid_argument("lab06: N too large for this kernel's grid (gridDim.y > 65535)");
}


// Step 1b helper: cublasDsyrk filled the upper triangle of row-major C (col >= row); copy it into the lower one.
// A 32x32 tile of the lower part is the transpose of a tile of the upper part: read the upper tile row by row
// (coalesced), write the lower tile row by row (coalesced), and transpose through shared memory in between.
// The row of 33 doubles (264 bytes) shifts consecutive rows by 8 bytes across the banks, so reading a column
// s[tx][r] hits 32 different 8-byte slots; with 32 doubles per row every lane would hit the same bank pair.
constexpr int kMirrorTile = 32;

__global__ void mirror_upper_to_lower_kernel(int N, double* __restrict__ C) {
  __shared__ double s[kMirrorTile][kMirrorTile + 1];
  const int bx = blockIdx.x, by = blockIdx.y;  // destination tile: rows by*32.., cols bx*32..
  if (bx > by) return;                         // entirely above the diagonal: nothing to write
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int R0 = by * kMirrorTile, C0 = bx * kMirrorTile;
  // Source tile: rows C0.., cols R0.. (the transpose position, on or above the diagonal).
  for (int r = ty; r < kMirrorTile; r += blockDim.y) {
    const int row = C0 + r, col = R0 + tx;
    if (row < N && col < N) s[r][tx] = C[std::size_t(row) * N + col];
  }
  __syncthreads();  // the whole source tile is in shared memory before anyone reads a column of it
  for (int r = ty; r < kMirrorTile; r += blockDim.y) {
    const int row = R0 + r, col = C0 + tx;
    // Only strictly-lower elements: on a diagonal tile the upper half is the source and stays as it is.
    if (row < N && col < N && row > col) C[std::size_t(row) * N + col] = s[tx][r];
  }
}

}  // namespace

void ata_cublas_gemm(cublasHandle_t handle, int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  // Column-major eyes see the row-major M x N array A as A' = A^T, N x M with leading dimension N. Then
  // A^T A = A' A'^T: the first operand is A' untransposed, the second A' transposed, both with ld N; m = n = N,
  // k = M. C is symmetric, so its row-/column-major readings agree. beta = 0: C is not read (it may hold NaN).
  const double one = 1.0, zero = 0.0;
  LABKIT_CUBLAS(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, N, N, M, &one, A, N, A, N, &zero, C, N));
}

void ata_cublas_syrk(cublasHandle_t handle, int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  // syrk with trans = N computes C = A' A'^T for A' (n x k) = A^T (N x M, ld N): the product we want. It writes
  // one triangle only: LOWER in column-major (element (r, c), r >= c, at C[r + c*N]) is row-major (c, r) with
  // c <= r: the row-major UPPER triangle. The mirror kernel copies it into the lower one.
  const double one = 1.0, zero = 0.0;
  LABKIT_CUBLAS(cublasDsyrk(handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, N, M, &one, A, N, &zero, C, N));
  const dim3 block(kMirrorTile, 8), grid(blocks(N, kMirrorTile), blocks(N, kMirrorTile));
  check_grid_y(grid.y);
  mirror_upper_to_lower_kernel<<<grid, block>>>(N, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab06
