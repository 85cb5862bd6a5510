// Lab 02 reference solution: out = in^T, row-major float, any rows x cols >= 1.
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

// ---------------------------------------------------------------------------------------------------------
// Step 1: a plain copy with the transposes' tiling. Reads and writes are both row-wise, so this is the best any
// kernel with this tiling can do: the ceiling the transposes are measured against.
__global__ void copy_tiled_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  const int c = blockIdx.x * kTile + threadIdx.x;
  const int r0 = blockIdx.y * kTile + threadIdx.y;
  if (c >= cols) return;  // no barrier in this kernel: leaving early is safe
#pragma unroll
  for (int k = 0; k < kTile; k += kRows) {
    const int r = r0 + k;
    if (r < rows) out[std::size_t(r) * cols + c] = in[std::size_t(r) * cols + c];
  }
}

// ---------------------------------------------------------------------------------------------------------
// Step 2: the reads are the copy's (a warp reads 128 contiguous bytes), but thread c writes out[c][r]: the 32
// threads of a warp write 32 addresses `rows` floats apart, 32 different 32-byte sectors of which 4 bytes each are
// used. The write side moves 8x the bytes it needs (L2 merges part of it back, which is why it is not 8x slower).
__global__ void transpose_naive_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  const int c = blockIdx.x * kTile + threadIdx.x;
  const int r0 = blockIdx.y * kTile + threadIdx.y;
  if (c >= cols) return;
#pragma unroll
  for (int k = 0; k < kTile; k += kRows) {
    const int r = r0 + k;
    if (r < rows) out[std::size_t(c) * rows + r] = in[std::size_t(r) * cols + c];
  }
}

// ---------------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------------
// Step 4: step 3 with a row of 33 floats. Element [tx][y] is then word tx * 33 + y, in bank (tx + y) % 32: the 32
// threads of a warp hit 32 different banks when reading a column. The row-wise stores stay conflict-free.
__global__ void transpose_padded_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile + 1];  // +1: the padding column that spreads a tile column over all banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col0 = blockIdx.x * kTile, row0 = blockIdx.y * kTile;
  {
    const int c = col0 + tx;
#pragma unroll
    for (int k = 0; k < kTile; k += kRows) {
      const int r = row0 + ty + k;
      if (r < rows && c < cols) tile[ty + k][tx] = in[std::size_t(r) * cols + c];
    }
  }
  __syncthreads();
  {
    const int c = row0 + tx;
#pragma unroll
    for (int k = 0; k < kTile; k += kRows) {
      const int r = col0 + ty + k;
      if (r < cols && c < rows) out[std::size_t(r) * rows + c] = tile[tx][ty + k];
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
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

void copy_tiled(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  copy_tiled_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_naive(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  transpose_naive_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_shared(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  transpose_shared_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_padded(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  transpose_padded_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_tuned(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kBigTile);
  transpose_tuned_kernel<<<grid_for(rows, cols, kBigTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab02
