// Lab 04 reference, step 1: the textbook bitonic network for a power-of-two n, ascending, one kernel launch per
// network step, in global memory.
//
// Notation (all steps). The network sorts N = 2^m slots. Stage k (k = 2, 4, ..., N) merges sorted runs of length
// k/2 into sorted runs of length k; it consists of steps with pair distance j = k/2, k/4, ..., 1. In a step every
// slot belongs to exactly one pair, so the N/2 compare-exchanges of a step are independent (one thread each), but
// consecutive steps depend on each other: a barrier (here: a new kernel launch) separates them.
#include <stdexcept>
#include <string>

#include "bitonic_sort.h"
#include "labkit/labkit.h"

namespace lab04 {

namespace {
void check_args(const void* keys, std::size_t n, const char* step) {
  if (n > kMaxN)
    throw std::invalid_argument(std::string("lab04 ") + step + ": n = " + std::to_string(n) +
                                " exceeds kMaxN = 2^31 (32-bit indices)");
  if (n > 0 && keys == nullptr) throw std::invalid_argument(std::string("lab04 ") + step + ": null keys pointer");
}

// Step 1: the textbook network. One thread per slot; the thread with the lower index of pair (i, i ^ j) does the
// compare-exchange, the other half of the threads return at once. Blocks with (i & k) == 0 sort ascending, the
// others descending, so that each pair of neighbouring runs forms a bitonic sequence for the next stage.
__global__ void bitonic_step_pow2_kernel(float* keys, std::uint32_t n, std::uint32_t k, std::uint32_t j) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t l = i ^ j;
  if (i >= n || l <= i) return;
  const float a = keys[i], b = keys[l];
  const std::uint32_t ka = labkit::float_order_key(a), kb = labkit::float_order_key(b);
  const bool ascending = (i & k) == 0;
  if (ascending ? ka > kb : ka < kb) {  // write only when the pair is out of order
    keys[i] = b;
    keys[l] = a;
  }
}

constexpr unsigned kThreads = 256;
}  // namespace

void sort_global_pow2(float* keys, std::size_t n) {
  check_args(keys, n, "step 1 (sort_global_pow2)");
  if (n & (n - 1))
    throw std::invalid_argument("lab04 step 1 (sort_global_pow2): n = " + std::to_string(n) +
                                " is not a power of two (any n is step 2's job)");
  if (n < 2) return;
  const unsigned threads = n < kThreads ? unsigned(n) : kThreads;
  const unsigned blocks = unsigned((n + threads - 1) / threads);
  for (std::size_t k = 2; k <= n; k <<= 1)
    for (std::size_t j = k / 2; j > 0; j >>= 1) {
      bitonic_step_pow2_kernel<<<blocks, threads>>>(keys, std::uint32_t(n), std::uint32_t(k), std::uint32_t(j));
      LABKIT_CHECK_LAUNCH();
    }
}

}  // namespace lab04
