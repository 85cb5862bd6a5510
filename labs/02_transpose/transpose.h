// Lab 02: out = in^T for a row-major float matrix of any shape, from a naive kernel to one that runs at the
// speed of a device-to-device cudaMemcpy.
//
// Every function takes DEVICE pointers. `in` is rows x cols, row-major and contiguous (element (r, c) is
// in[r * cols + c]). The transposes write `out` as cols x rows (element (c, r) is out[c * rows + r]); the copy of
// step 1 writes `out` as rows x cols. Any rows, cols >= 1 must work; a size < 1, or one that the kernel's grid
// cannot cover, throws std::invalid_argument. `in` and `out` do not overlap. Work goes on the default stream;
// the functions return without waiting for it (the gates synchronize).
//
// Effective bandwidth of every step = (bytes read + bytes written) / time = 2 * rows * cols * 4 / t.
#pragma once

namespace lab02 {

// Step 1: the ceiling. out = in (no transpose), with the same tiling as the transposes: a block of 32 x 8 threads
// covers a 32 x 32 tile, each thread moves 4 elements, reads and writes both along rows.
void copy_tiled(int rows, int cols, const float* in, float* out);

// Step 2: naive transpose with the same tiling: reads along rows of `in` (coalesced), writes down columns of `out`
// (consecutive threads write addresses `rows` floats apart).
void transpose_naive(int rows, int cols, const float* in, float* out);

// Step 3: a 32 x 32 tile staged in shared memory (block of 32 x 8 threads, 4 elements each), so that both the
// global reads and the global writes run along rows.
void transpose_shared(int rows, int cols, const float* in, float* out);

// Step 4: step 3 without shared-memory bank conflicts (one padding column in the tile).
void transpose_padded(int rows, int cols, const float* in, float* out);

// Step 5 (optional): your best transpose: more work per block, more bytes in flight per thread, wider accesses...
void transpose_tuned(int rows, int cols, const float* in, float* out);

}  // namespace lab02
