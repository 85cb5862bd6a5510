// Lab 06 reference, step 4: register blocking, a 3 x 3 block of C per thread.
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


// The seed's geometry: a 48x48 tile of C per block of 16x16 threads, each thread a 3x3
// block of C in registers, rows ty + 16a and columns tx + 16b (a, b = 0..2), panels of BK = 16 rows of A.
// Why strided rows/columns and not a contiguous 3x3: a warp is two values of ty and sixteen of tx, so per k it
// reads sP[k][ty + 16a] (2 addresses: broadcast) and sQ[k][tx + 16b] (16 consecutive doubles = 128 bytes: one
// wavefront, no conflict). A contiguous 3x3 per thread would read sQ with a stride of 3 doubles: 2-way conflicts.
// No padding is needed: both tiles are read along their rows. (Stored transposed, [column][k], a warp would read
// down a column of 16-double rows, all in the same bank pair; that layout would need a row of 17 doubles.)
// Per k a thread does 6 shared loads for 9 FMAs (step 3: 2 loads per FMA).
namespace rb {
constexpr int BT = 48, BK = 16, TT = 3, TX = 16;
constexpr int kThreads = TX * TX;                       // 256
constexpr int kLoads = BK * BT / kThreads;              // 3 elements of each panel per thread and tile
static_assert(BK * BT % kThreads == 0, "panel tile must split evenly over the threads");
static_assert(TT * TX == BT, "a thread's 3x3 block strides over the whole tile");
}  // namespace rb

__global__ void __launch_bounds__(rb::kThreads) ata_regblock_kernel(int M, int N, const double* __restrict__ A,
                                                                    double* __restrict__ C) {
  using namespace rb;
  __shared__ double sP[BK][BT];
  __shared__ double sQ[BK][BT];
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int I0 = blockIdx.y * BT, J0 = blockIdx.x * BT;
  double acc[TT][TT] = {};
  for (int k0 = 0; k0 < M; k0 += BK) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int e = tid + l * kThreads, r = e / BT, c = e % BT, k = k0 + r;  // a warp: 32 consecutive c
      sP[r][c] = (k < M && I0 + c < N) ? A[std::size_t(k) * N + I0 + c] : 0.0;
      sQ[r][c] = (k < M && J0 + c < N) ? A[std::size_t(k) * N + J0 + c] : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      double p[TT], q[TT];
#pragma unroll
      for (int a = 0; a < TT; ++a) p[a] = sP[kk][ty + TX * a];
#pragma unroll
      for (int b = 0; b < TT; ++b) q[b] = sQ[kk][tx + TX * b];
#pragma unroll
      for (int a = 0; a < TT; ++a)
#pragma unroll
        for (int b = 0; b < TT; ++b) acc[a][b] += p[a] * q[b];
    }
    __syncthreads();
  }
#pragma unroll
  for (int a = 0; a < TT; ++a) {
    const int i = I0 + ty + TX * a;
#pragma unroll
    for (int b = 0; b < TT; ++b) {
      const int j = J0 + tx + TX * b;
      if (i < N && j < N) C[std::size_t(i) * N + j] = acc[a][b];  // a warp: 16 consecutive doubles per row
    }
  }
}

}  // namespace

void ata_regblock(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 grid(blocks(N, rb::BT), blocks(N, rb::BT));
  check_grid_y(grid.y);
  ata_regblock_kernel<<<grid, rb::kThreads>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab06
