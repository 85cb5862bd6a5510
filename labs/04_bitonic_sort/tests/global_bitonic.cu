#include "global_bitonic.h"

#include <cstdint>
#include <stdexcept>

#include "labkit/check.h"
#include "labkit/ref_sort.h"

namespace lab04::baseline {

namespace {
// One thread per slot i; the thread holding the lower slot of the pair (i, i ^ j) compares and swaps, the other
// returns. Runs with (i & k) == 0 go up and the others down, so two neighbouring runs form a bitonic sequence for
// the next stage. Keys are compared through labkit::float_order_key, like every step of the lab.
__global__ void global_bitonic_step_kernel(float* keys, std::uint32_t n, std::uint32_t k, std::uint32_t j) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t partner = i ^ j;
  if (i >= n || partner <= i) return;
  const float a = keys[i], b = keys[partner];
  const std::uint32_t ka = labkit::float_order_key(a), kb = labkit::float_order_key(b);
  const bool up = (i & k) == 0;
  if (up ? ka > kb : ka < kb) {
    keys[i] = b;
    keys[partner] = a;
  }
}
}  // namespace

void global_bitonic_sort(float* keys, std::size_t n) {
  if (n & (n - 1)) throw std::invalid_argument("global_bitonic_sort: n must be a power of two");
  if (n < 2) return;
  constexpr unsigned kThreads = 256;
  const unsigned threads = n < kThreads ? unsigned(n) : kThreads;
  const unsigned blocks = unsigned((n + threads - 1) / threads);
  for (std::size_t k = 2; k <= n; k <<= 1)
    for (std::size_t j = k / 2; j > 0; j >>= 1) {
      global_bitonic_step_kernel<<<blocks, threads>>>(keys, std::uint32_t(n), std::uint32_t(k), std::uint32_t(j));
      LABKIT_CHECK_LAUNCH();
    }
}

}  // namespace lab04::baseline
