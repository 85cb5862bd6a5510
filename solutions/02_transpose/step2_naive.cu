// Lab 02 reference, step 2: the naive transpose (coalesced reads, strided writes).
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

}  // namespace

void transpose_naive(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  transpose_naive_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab02
