// Lab 03 reference, step 3: the transpose with diagonal block ordering (and the provided row-major one).
#include <climits>
#include <stdexcept>

#include "access_patterns.h"
#include "labkit/labkit.h"

namespace lab03 {

namespace {

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

// Moves tile (tile_row, tile_col) of `in` (origin (tile_row * 32, tile_col * 32)) to its transposed place in `out`,
// and, when tile_log is not null, records which tile this block moved (access_patterns.h). Every thread of the
// block must call it (it contains a barrier).
__device__ __forceinline__ void transpose_tile(int rows, int cols, unsigned tile_row, unsigned tile_col,
                                               const float* __restrict__ in, float* __restrict__ out,
                                               float (&tile)[kTile][kTile + 1], int* tile_log) {
  if (tile_log != nullptr && threadIdx.x == 0 && threadIdx.y == 0)
    tile_log[blockIdx.x + static_cast<unsigned long long>(gridDim.x) * blockIdx.y] =
        static_cast<int>(tile_row * static_cast<unsigned long long>(gridDim.x) + tile_col);
  const int row0 = int(tile_row) * kTile, col0 = int(tile_col) * kTile;
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
// consecutive tiles of one tile-row of `in`, and write one tile-COLUMN of `out`: addresses rows * 32 * 4 bytes
// apart, which on GPUs with few, plainly interleaved memory partitions all fell into the same partition when that
// distance was a multiple of the interleave (matrix sizes that are multiples of 512, 256, ...).
__global__ void transpose_rowmajor_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile + 1];
  transpose_tile(rows, cols, blockIdx.y, blockIdx.x, in, out, tile, nullptr);
}
// ============================================ end of PROVIDED ================================================

// Step 3: diagonal order for any tile grid gx x gy. Number the blocks in launch order, b = x + gx * y, and give
// block b tile-row b % gy and tile-column (b / gy + b % gy) % gx. Consecutive blocks then take consecutive
// tile-rows and consecutive tile-columns (a diagonal), so that both their reads and their writes are spread over
// the matrix. It is a bijection for every gx, gy: b <-> (q = b / gy, y = b % gy) covers [0, gx) x [0, gy) once,
// and for each y, q -> (q + y) % gx is a rotation of [0, gx). (The classic x' = y, y' = (x + y) % gx assumes
// gx == gy.)
__global__ void transpose_diagonal_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out,
                                          int* tile_log) {
  __shared__ float tile[kTile][kTile + 1];
  const unsigned long long b = blockIdx.x + static_cast<unsigned long long>(gridDim.x) * blockIdx.y;
  const unsigned tile_row = static_cast<unsigned>(b % gridDim.y);
  const unsigned tile_col = static_cast<unsigned>((b / gridDim.y + tile_row) % gridDim.x);
  transpose_tile(rows, cols, tile_row, tile_col, in, out, tile, tile_log);
}

}  // namespace

// PROVIDED: the baseline.
void transpose_rowmajor(int rows, int cols, const float* in, float* out) {
  check_transpose_sizes(rows, cols);
  transpose_rowmajor_kernel<<<tile_grid(rows, cols), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_diagonal(int rows, int cols, const float* in, float* out, int* tile_log) {
  check_transpose_sizes(rows, cols);
  transpose_diagonal_kernel<<<tile_grid(rows, cols), dim3(kTile, kRows)>>>(rows, cols, in, out, tile_log);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab03
