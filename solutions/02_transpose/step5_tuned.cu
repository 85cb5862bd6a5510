// Lab 02 reference, step 5: the tuned transpose (64 x 64 tiles, 16 loads in flight per thread).
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

// Step 5: a 64 x 64 tile per block of 32 x 8 threads, 16 elements per thread. All 16 loads of a thread are issued
// into registers before the first shared store: 16 independent loads per thread, 16 KB per block in flight (128 KB
// per SM at 8 resident blocks, against 32 KB for step 4), and one barrier per 16 KB moved instead of per 4 KB.
// Padding: a row of 65 floats puts [x][y] in bank (x + y) % 32 (65 = 2 * 32 + 1), conflict-free for column reads;
// row-wise stores [y][x + 32h] are consecutive words, conflict-free too.
constexpr int kBigTile = 64;

__global__ void __launch_bounds__(kTile * kRows) transpose_tuned_kernel(int rows, int cols,
                                                                      const float* __restrict__ in,
                                                                      float* __restrict__ out) {
  __shared__ float tile[kBigTile][kBigTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col0 = blockIdx.x * kBigTile, row0 = blockIdx.y * kBigTile;
  constexpr int kSteps = kBigTile / kRows;  // 8 rows per thread and half-tile
  float v[2][kSteps];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int c = col0 + tx + 32 * h;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int r = row0 + ty + kRows * k;
      v[h][k] = (r < rows && c < cols) ? in[std::size_t(r) * cols + c] : 0.f;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int k = 0; k < kSteps; ++k) tile[ty + kRows * k][tx + 32 * h] = v[h][k];
  __syncthreads();  // the tile is complete before the transposed reads
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    const int r = col0 + ty + kRows * k;  // row of `out` = column of `in`
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = row0 + tx + 32 * h;  // column of `out` = row of `in`
      if (r < cols && c < rows) out[std::size_t(r) * rows + c] = tile[tx + 32 * h][ty + kRows * k];
    }
  }
}

}  // namespace

void transpose_tuned(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kBigTile);
  transpose_tuned_kernel<<<grid_for(rows, cols, kBigTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab02
