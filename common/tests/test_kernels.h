// Kernels of the labkit tests' own (test_kernels.cu), launched from the .cpp tests.
#pragma once

namespace labkit_test {
// One warp that spins for `cycles` clock cycles, on the default stream (launch checked): a kernel whose length the
// test sets, for timing what a tool adds per kernel.
void launch_spin(long long cycles);
}  // namespace labkit_test
