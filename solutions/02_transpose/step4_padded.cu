// Lab 02 reference, step 4: the shared-memory tile padded against bank conflicts.
#include <climits>
#include <stdexcept>

#include "labkit/labkit.h"
#include "transpose.h"

namespace lab02 {

namespace {

// A 32 x 32 tile per block, 32 x 8 threads: a warp is one row of 32 threads, so each of its global accesses is
// 32 consecutive floats = 128 bytes = one fully used transaction, and each thread moves kTile / kRows = 4
// elements (4 independent loads in flight per thread instead of 1).
constexpr int kTile = 32;
constexpr int kRows = 8;

void check_sizes(int rows, int cols, int tile) {
  if (rows < 1 || cols < 1) throw std::invalid_argument("lab02: rows and cols must be >= 1");
  // Tile origins are computed in int: keep origin + tile below INT_MAX.
  if (rows > INT_MAX - tile || cols > INT_MAX - tile)
    throw std::invalid_argument("lab02: rows and cols must be below INT_MAX - tile size");
  if ((rows + tile - 1) / tile > 65535)
    throw std::invalid_argument("lab02: too many rows for this kernel's grid (gridDim.y > 65535)");
}

dim3 grid_for(int rows, int cols, int tile) {
  return dim3(static_cast<unsigned>((cols + tile - 1) / tile), static_cast<unsigned>((rows + tile - 1) / tile));
}

// Step 4: step 3 with a row of 33 floats. Element [tx][y] is then word tx * 33 + y, in bank (tx + y) % 32: the 32
// threads of a warp hit 32 different banks when reading a column. The row-wise stores stay conflict-free.
__global__ void transpose_padded_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile + 1];  // +1: the padding column that spreads a tile column over all banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col0 = blockIdx.x * kTile, row0 = blockIdx.y * kTile;  // the tile's origin in `in`
  {
    const int c = col0 + tx;
#pragma unroll
    for (int k = 0; k < kTile; k += kRows) {
      const int r = row0 + ty + k;
      if (r < rows && c < cols) tile[ty + k][tx] = in[std::size_t(r) * cols + c];
    }
  }
  __syncthreads();  // the whole tile is in shared memory before any thread reads another thread's element
  {
    // In `out` the tile's origin is (col0, row0): row index = column of `in`, column index = row of `in`.
    const int c = row0 + tx;
#pragma unroll
    for (int k = 0; k < kTile; k += kRows) {
      const int r = col0 + ty + k;
      if (r < cols && c < rows) out[std::size_t(r) * rows + c] = tile[tx][ty + k];
    }
  }
}

}  // namespace

void transpose_padded(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  transpose_padded_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab02
