// Lab 02 reference, step 1: the tiled copy (the ceiling every transpose is measured against).
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

}  // namespace

void copy_tiled(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  copy_tiled_kernel<<<grid_for(rows, cols, kTile), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab02
