// Lab 03: how the addresses of a warp decide the bandwidth (offset and strided copies), and partition camping:
// does the order in which blocks visit the tiles of a transpose matter on this GPU?
//
// Every function takes DEVICE pointers and enqueues its work on the default stream without waiting for it (the
// gates synchronize). Impossible arguments throw std::invalid_argument before anything is launched.
#pragma once
#include <cstddef>

namespace lab03 {

constexpr int kMaxOffset = 32;  // offsets 0..32 floats: 0..128 bytes, one full cache line and back to aligned
constexpr int kMaxStride = 32;  // strides 1..32 floats: from contiguous to one element per 128-byte line

// Step 1: out[offset + i] = in[offset + i] for i in [0, n): a copy of n elements whose first element sits `offset`
// floats past a 256-byte-aligned base. Both arrays hold n + offset elements; out[0..offset) is not written.
// Requires n >= 1 and 0 <= offset <= kMaxOffset.
void copy_offset(std::size_t n, int offset, const float* in, float* out);

// Step 2: out[i] = in[i * stride] for i in [0, n): a gather with a constant stride; the reads are strided, the
// writes contiguous. `in` holds (n - 1) * stride + 1 elements, `out` n. Requires n >= 1 and
// 1 <= stride <= kMaxStride.
void copy_strided(std::size_t n, int stride, const float* in, float* out);

// PROVIDED (complete in the skeleton, in step 3's file): lab 02's padded-tile transpose, blocks visiting the tiles
// in row-major order (blockIdx.x along the columns of `in`). `in` is rows x cols row-major, `out` cols x rows. Any
// rows, cols >= 1 up to what the grid covers.
void transpose_rowmajor(int rows, int cols, const float* in, float* out);

// Step 3: the same transpose, but block b (in launch order, b = blockIdx.x + gridDim.x * blockIdx.y) handles the
// tile on a DIAGONAL: consecutive blocks take tiles in different tile-rows and tile-columns. Must be correct for
// every shape, including rectangular matrices whose tile grid is not square.
// tile_log: when not null, gridDim.x * gridDim.y ints; block b writes tile_log[b] = tile_row * gridDim.x + tile_col
// of the tile it moved (the provided transpose_tile does it), so that the gates can see the block order.
void transpose_diagonal(int rows, int cols, const float* in, float* out, int* tile_log = nullptr);

}  // namespace lab03
