// Lab 03 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab03      (or: labgrade 03)
// The walkthrough (labs/03_access_patterns/README.md) explains each step and what its gates check.
#include <climits>
#include <stdexcept>

#include "access_patterns.h"
#include "labkit/labkit.h"

namespace lab03 {

namespace {

constexpr int kThreads = 256;  // copies: one element per thread, 8 warps per block

// Blocks of kThreads covering n elements; refuses n that a one-dimensional grid cannot cover.
unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  if (b > std::size_t(INT_MAX)) throw std::invalid_argument("lab03: n too large for a one-dimensional grid");
  return static_cast<unsigned>(b);
}

// ============================== PROVIDED: do not change (the baseline of step 3) ==============================
// Lab 02's padded-tile transpose: 32 x 32 tile padded to 33 columns, 32 x 8 threads, 4 elements per thread.
constexpr int kTile = 32;
constexpr int kRows = 8;

void check_transpose_sizes(int rows, int cols) {
  if (rows < 1 || cols < 1) throw std::invalid_argument("lab03: rows and cols must be >= 1");
  if (rows > INT_MAX - kTile || cols > INT_MAX - kTile)
    throw std::invalid_argument("lab03: rows and cols must be below INT_MAX - 32");
  if ((rows + kTile - 1) / kTile > 65535)
    throw std::invalid_argument("lab03: too many rows for this kernel's grid (gridDim.y > 65535)");
}

// gridDim.x = tiles along the columns of `in`, gridDim.y = tiles along its rows.
dim3 tile_grid(int rows, int cols) {
  return dim3(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
}

// Moves the tile whose origin in `in` is (row0, col0) to (col0, row0) in `out`. Every thread of the block must
// call it (it contains a barrier). Use it in your diagonal kernel too: only the choice of (row0, col0) differs.
__device__ __forceinline__ void transpose_tile(int rows, int cols, int row0, int col0, const float* __restrict__ in,
                                               float* __restrict__ out, float (&tile)[kTile][kTile + 1]) {
  const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
  for (int k = 0; k < kTile; k += kRows) {
    const int r = row0 + ty + k, c = col0 + tx;
    if (r < rows && c < cols) tile[ty + k][tx] = in[std::size_t(r) * cols + c];
  }
  __syncthreads();  // the whole tile is loaded before the transposed reads
#pragma unroll
  for (int k = 0; k < kTile; k += kRows) {
    const int r = col0 + ty + k, c = row0 + tx;  // row of out = column of in, and vice versa
    if (r < cols && c < rows) out[std::size_t(r) * rows + c] = tile[tx][ty + k];  // [tx][y]: bank (tx + y) % 32
  }
}

// Row-major order: block (x, y) takes tile-column x and tile-row y. Blocks launched together (consecutive x) read
// consecutive tiles of one tile-row of `in`, and write one tile-COLUMN of `out`.
__global__ void transpose_rowmajor_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile + 1];
  transpose_tile(rows, cols, blockIdx.y * kTile, blockIdx.x * kTile, in, out, tile);
}
// ============================================ end of PROVIDED ================================================

}  // namespace

// Step 1. Write copy_offset_kernel: thread i (i = blockIdx.x * blockDim.x + threadIdx.x, as std::size_t) copies
// element offset + i when i < n. Launch blocks_for(n) blocks of kThreads threads, then LABKIT_CHECK_LAUNCH().
// Before you measure: how many 32-byte sectors does a warp touch at offset 0, 1, 8, 32?
void copy_offset(std::size_t n, int offset, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_offset needs n >= 1");
  if (offset < 0 || offset > kMaxOffset) throw std::invalid_argument("lab03: offset must be in [0, 32]");
  (void)in, (void)out, (void)blocks_for;
  throw labkit::NotImplemented("step 1: copy_offset");
}

// Step 2. Write copy_strided_kernel: out[i] = in[i * stride] (compute i * stride in std::size_t: it exceeds 2^31
// for large n). Predict the GB/s at strides 1, 2, 4, 8, 16, 32 before running the bench.
void copy_strided(std::size_t n, int stride, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_strided needs n >= 1");
  if (stride < 1 || stride > kMaxStride) throw std::invalid_argument("lab03: stride must be in [1, 32]");
  (void)in, (void)out;
  throw labkit::NotImplemented("step 2: copy_strided");
}

// PROVIDED: the baseline.
void transpose_rowmajor(int rows, int cols, const float* in, float* out) {
  check_transpose_sizes(rows, cols);
  transpose_rowmajor_kernel<<<tile_grid(rows, cols), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

// Step 3. Write transpose_diagonal_kernel: same grid and block as the row-major one, but each block first computes
// WHICH tile it takes, then calls transpose_tile. Hints: number the blocks in launch order,
// b = blockIdx.x + gridDim.x * blockIdx.y (in 64 bits). Give consecutive b consecutive tile-rows (b % gridDim.y),
// and shift the tile-column with the tile-row so that no two blocks of one "round" share a tile-column. Prove that
// every tile is taken exactly once when gridDim.x != gridDim.y (the classic square-grid formula is not).
void transpose_diagonal(int rows, int cols, const float* in, float* out) {
  check_transpose_sizes(rows, cols);
  (void)in, (void)out;
  throw labkit::NotImplemented("step 3: transpose_diagonal");
}

}  // namespace lab03
