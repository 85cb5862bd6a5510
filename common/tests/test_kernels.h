// Kernels of the labkit tests' own (test_kernels.cu), launched from the .cpp tests.
#pragma once

namespace labkit_test {
// One warp that spins for `cycles` clock cycles, on the default stream (launch checked): a kernel whose length the
// test sets, for timing what a tool adds per kernel.
void launch_spin(long long cycles);
// out[k] = src[at[k]] for k < count (indices into a HugeDeviceArray, past 2^32 too); then dst[at[k]] = k + 0.5f.
void launch_gather_scatter(const float* src, float* dst, const unsigned long long* at, float* out, int count);
}  // namespace labkit_test
