// Lab 02, step 2 (transpose_naive): your implementation. Replace the `throw labkit::NotImplemented(...)` with the step;
// labs/02_transpose/README.md explains it and what its gates check. Check your step with
//   ctest --preset gpu -L lab02 -L student      (or: build/gpu/labgrade 02)
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
[[maybe_unused]] dim3 grid_for(int rows, int cols, int tile) {
  return dim3(static_cast<unsigned>((cols + tile - 1) / tile), static_cast<unsigned>((rows + tile - 1) / tile));
}
}  // namespace

// Step 2. Start from a copy of your step 1 file: same threads and loop, but write out[c * rows + r]. Which side is
// coalesced now, and how many 32-byte sectors does one warp's store touch?
void transpose_naive(int rows, int cols, const float* in, float* out) {
  check_sizes(rows, cols, kTile);
  (void)in, (void)out;
  throw labkit::NotImplemented("step 2: transpose_naive");
}

}  // namespace lab02
