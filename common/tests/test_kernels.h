// Kernels of the labkit tests' own (test_kernels.cu), launched from the .cpp tests.
#pragma once
#include <cuda_runtime.h>

namespace labkit_test {
// One warp that spins for `cycles` clock cycles, on the default stream (launch checked): a kernel whose length the
// test sets, for timing what a tool adds per kernel.
void launch_spin(long long cycles);
// out[k] = src[at[k]] for k < count (indices into a HugeDeviceArray, past 2^32 too); then dst[at[k]] = k + 0.5f.
void launch_gather_scatter(const float* src, float* dst, const unsigned long long* at, float* out, int count);
// A tile of `words` floats of dynamic shared memory per block that the kernel never writes: out[b] = how many of
// block b's words read as NaN (one block per SM and more, on the default stream, launch checked).
void launch_count_unwritten_shared_nans(int blocks, int words, int* out);
// The same block size and shared memory, every word written with 1.0f first (so the next kernel there sees no NaN).
void launch_write_shared_ones(int blocks, int words);
// out[i] = in[i] for i < n, on `stream` (launch checked): a step's kernel on a stream of its own.
void launch_copy_on(const float* in, float* out, int n, cudaStream_t stream);
}  // namespace labkit_test
