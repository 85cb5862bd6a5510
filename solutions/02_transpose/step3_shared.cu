// Lab 02 reference, step 3: the transpose through a shared-memory tile.
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

// Step 3: the block reads its 32 x 32 tile of `in` row by row into shared memory, waits, and writes the tile of
// `out` row by row, reading the shared tile by COLUMNS. Both global sides are now coalesced.
// The price: tile[tx][y] for tx = 0..31 are 32 words 32 floats apart, all in the same bank (bank = word % 32):
// a 32-way bank conflict, the read is serialized into 32 shared-memory transactions.
__global__ void transpose_shared_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile];
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

void transpose_shared(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  transpose_shared_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab02
