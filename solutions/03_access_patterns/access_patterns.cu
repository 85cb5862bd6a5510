// Lab 03 reference solution: offset and strided copies, and the transpose with row-major and diagonal block
// ordering.
#include <climits>
#include <stdexcept>

#include "access_patterns.h"
#include "labkit/labkit.h"

namespace lab03 {

namespace {

constexpr int kThreads = 256;  // copies: one element per thread, 8 warps per block

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  if (b > std::size_t(INT_MAX)) throw std::invalid_argument("lab03: n too large for a one-dimensional grid");
  return static_cast<unsigned>(b);
}

// ---------------------------------------------------------------------------------------------------------
// Step 1: warp w touches floats [offset + 32w, offset + 32w + 32): 128 bytes that start `offset * 4` bytes into a
// 128-byte line. Aligned (offset % 32 == 0) that is 4 sectors of one line; otherwise 5 sectors over two lines, and
// the neighbouring warp fetches the shared sector again (usually from L2). Expect a small loss, not a cliff.
__global__ void copy_offset_kernel(std::size_t n, int offset, const float* __restrict__ in, float* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[offset + i] = in[offset + i];
}

// ---------------------------------------------------------------------------------------------------------
// Step 2: a warp reads 32 floats `stride` floats apart. The memory system moves whole 32-byte sectors: at stride
// s the warp's 128 useful bytes cost min(32, ceil(32 * s / 8)) sectors, so the read side degrades like 1/s up to
// s = 8 (one float per sector) and then stays flat; the contiguous writes keep their full speed.
__global__ void copy_strided_kernel(std::size_t n, int stride, const float* __restrict__ in, float* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i * stride];
}

// ---------------------------------------------------------------------------------------------------------
// The transposes: lab 02's step 4 (32 x 32 tile padded to 33 columns, 32 x 8 threads, 4 elements per thread).
// They differ only in which tile a block takes.
constexpr int kTile = 32;
constexpr int kRows = 8;

void check_transpose_sizes(int rows, int cols) {
  if (rows < 1 || cols < 1) throw std::invalid_argument("lab03: rows and cols must be >= 1");
  if (rows > INT_MAX - kTile || cols > INT_MAX - kTile)
    throw std::invalid_argument("lab03: rows and cols must be below INT_MAX - 32");
  if ((rows + kTile - 1) / kTile > 65535)
    throw std::invalid_argument("lab03: too many rows for this kernel's grid (gridDim.y > 65535)");
}

dim3 tile_grid(int rows, int cols) {
  return dim3(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
}

// Moves the tile whose origin in `in` is (row0, col0) to (col0, row0) in `out`.
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

// Row-major order: blocks launched together (consecutive blockIdx.x) read consecutive tiles of one tile-row of
// `in` and write one tile-COLUMN of `out`: addresses rows * 32 * 4 bytes apart, which on GPUs with few, plainly
// interleaved memory partitions all fell into the same partition when that distance was a multiple of the
// interleave (matrix sizes that are multiples of 512, 256, ...).
__global__ void transpose_rowmajor_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile + 1];
  transpose_tile(rows, cols, blockIdx.y * kTile, blockIdx.x * kTile, in, out, tile);
}

// Step 3: diagonal order for any tile grid gx x gy. Number the blocks in launch order, b = x + gx * y, and give
// block b tile-row b % gy and tile-column (b / gy + b % gy) % gx. Consecutive blocks then take consecutive
// tile-rows and consecutive tile-columns (a diagonal), so that both their reads and their writes are spread over
// the matrix. It is a bijection for every gx, gy: b <-> (q = b / gy, y = b % gy) covers [0, gx) x [0, gy) once,
// and for each y, q -> (q + y) % gx is a rotation of [0, gx). (The classic x' = y, y' = (x + y) % gx assumes
// gx == gy.)
__global__ void transpose_diagonal_kernel(int rows, int cols, const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile + 1];
  const unsigned long long b = blockIdx.x + static_cast<unsigned long long>(gridDim.x) * blockIdx.y;
  const unsigned tile_row = static_cast<unsigned>(b % gridDim.y);
  const unsigned tile_col = static_cast<unsigned>((b / gridDim.y + tile_row) % gridDim.x);
  transpose_tile(rows, cols, int(tile_row) * kTile, int(tile_col) * kTile, in, out, tile);
}

}  // namespace

void copy_offset(std::size_t n, int offset, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_offset needs n >= 1");
  if (offset < 0 || offset > kMaxOffset) throw std::invalid_argument("lab03: offset must be in [0, 32]");
  copy_offset_kernel<<<blocks_for(n), kThreads>>>(n, offset, in, out);
  LABKIT_CHECK_LAUNCH();
}

void copy_strided(std::size_t n, int stride, const float* in, float* out) {
  if (n < 1) throw std::invalid_argument("lab03: copy_strided needs n >= 1");
  if (stride < 1 || stride > kMaxStride) throw std::invalid_argument("lab03: stride must be in [1, 32]");
  copy_strided_kernel<<<blocks_for(n), kThreads>>>(n, stride, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_rowmajor(int rows, int cols, const float* in, float* out) {
  check_transpose_sizes(rows, cols);
  transpose_rowmajor_kernel<<<tile_grid(rows, cols), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

void transpose_diagonal(int rows, int cols, const float* in, float* out) {
  check_transpose_sizes(rows, cols);
  transpose_diagonal_kernel<<<tile_grid(rows, cols), dim3(kTile, kRows)>>>(rows, cols, in, out);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab03
