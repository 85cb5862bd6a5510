// Kernels of the labkit tests' own (test_kernels.h).
#include "labkit/check.h"
#include "test_kernels.h"

namespace labkit_test {
namespace {
__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
}  // namespace

void launch_spin(long long cycles) {
  spin_kernel<<<1, 32>>>(cycles);
  LABKIT_CHECK_LAUNCH();
}
}  // namespace labkit_test
