// Lab 02 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab02      (or: labgrade 02)
// The walkthrough (labs/02_transpose/README.md) explains each step and what its gates check.
#include <climits>
#include <stdexcept>

#include "labkit/labkit.h"
#include "transpose.h"

namespace lab02 {

namespace {
// 32 x 32 tiles, blocks of 32 x 8 threads: each thread moves 32 / 8 = 4 elements of its tile.
constexpr int kTile = 32;
[[maybe_unused]] constexpr int kRows = 8;  // threads per block along y

// Refuse sizes that have no meaning, or that the 2D grid cannot cover, before launching anything.
void check_sizes(int rows, int cols, int tile) {
  if (rows < 1 || cols < 1) throw std::invalid_argument("lab02: rows and cols must be >= 1");
  if (rows > INT_MAX - tile || cols > INT_MAX - tile)
    throw std::invalid_argument("lab02: rows and cols must be below INT_MAX - tile size");
  if ((rows + tile - 1) / tile > 65535)
    throw std::invalid_argument("lab02: too many rows for this kernel's grid (gridDim.y > 65535)");
}

// Blocks covering a rows x cols matrix with tile x tile tiles: x along columns, y along rows.
dim3 grid_for(int rows, int cols, int tile) {
  return dim3(static_cast<unsigned>((cols + tile - 1) / tile), static_cast<unsigned>((rows + tile - 1) / tile));
}
}  // namespace

// Step 1. Write copy_tiled_kernel: block (bx, by) copies the 32 x 32 tile whose top-left element is
// (by*32, bx*32); thread (tx, ty) handles column bx*32 + tx and rows by*32 + ty + {0, 8, 16, 24}. Guard every
// access (r < rows, c < cols). Launch it with grid_for(rows, cols, kTile) and dim3(kTile, kRows), then
// LABKIT_CHECK_LAUNCH().
void copy_tiled(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  (void)in, (void)out, (void)grid_for;
  throw labkit::NotImplemented("step 1: copy_tiled");
}

// Step 2. Same threads and loop as step 1, but write out[c * rows + r]. Which side is coalesced now, and how many
// 32-byte sectors does one warp's store touch?
void transpose_naive(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  (void)in, (void)out;
  throw labkit::NotImplemented("step 2: transpose_naive");
}

// Step 3. __shared__ float tile[32][32]. Read the input tile row-wise into tile[ty + k][tx]; __syncthreads();
// then write the OUTPUT tile row-wise: its origin is (bx*32, by*32) in `out` (the block indices swap roles), and
// thread tx writes the element it reads from tile[tx][ty + k]. Check both bounds on both sides.
void transpose_shared(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  (void)in, (void)out;
  throw labkit::NotImplemented("step 3: transpose_shared");
}

// Step 4. In which bank is tile[tx][y] for tx = 0..31 (bank = word index % 32)? Change one number in the
// declaration so that the 32 words of a column fall in 32 different banks.
void transpose_padded(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  (void)in, (void)out;
  throw labkit::NotImplemented("step 4: transpose_padded");
}

// Step 5 (optional). Your fastest transpose. Ideas: a 64 x 64 tile per block (16 elements per thread, loads
// issued into registers before the shared stores, so more bytes are in flight), or wider (float2/float4) accesses
// where the shape allows. Keep the tile padded and every access guarded. Use check_sizes with your tile size.
void transpose_tuned(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  (void)in, (void)out;
  throw labkit::NotImplemented("step 5: transpose_tuned");
}

}  // namespace lab02
