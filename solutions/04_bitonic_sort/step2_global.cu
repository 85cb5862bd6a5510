// Lab 04 reference, step 2: any n, both directions, still one global-memory kernel per network step.
//
// The "flip" form of the network (steps 2-5): the first step of stage k pairs slot i with its mirror image in its
// k-block (i ^ (k-1)) instead of i ^ (k/2), and every comparator puts the smaller key at the lower index. That
// sorts too (the mirror comparison turns two ascending runs into a bitonic split), and because every comparator
// points the same way, padding slots i >= n behave like keys larger than everything: they would never move, so
// every comparator that touches one is simply skipped. No padding memory, no sentinel value that could tie with a
// real NaN.
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

std::uint32_t next_pow2(std::size_t n) {  // n in [1, 2^31]
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return static_cast<std::uint32_t>(p);
}

// XOR-ing the order key with all ones reverses the order: a descending sort is an ascending sort of ~key.
std::uint32_t key_mask(Order order) { return order == Order::descending ? 0xFFFFFFFFu : 0u; }

__device__ __forceinline__ std::uint32_t order_key(float x, std::uint32_t mask) {
  return labkit::float_order_key(x) ^ mask;
}

// The lower slot of pair t in a step of distance j: insert a 0 bit at position log2(j) of t. Consecutive t give
// consecutive slots (runs of j), so for j >= 32 a warp touches 32 consecutive words on both sides of its pairs.
__device__ __forceinline__ std::uint32_t pair_low(std::uint32_t t, std::uint32_t j) {
  return ((t & ~(j - 1)) << 1) | (t & (j - 1));
}

// One pair per (thread, q), kPairsPerThread pairs per thread (N/2 pairs in all, none idle by construction). `flip`
// selects the mirror pairing of a stage's first step. A thread first issues the loads of all its pairs, then
// compares and stores: with one pair per thread an SM has only ~16 KB of loads in flight, less than the ~14-20 KB
// per SM that ~3 TB/s at ~600 ns DRAM latency needs; four pairs quadruple it.
// Pair t = block base + q * blockDim + threadIdx: consecutive threads take consecutive pairs, so the two reads of
// a warp are each a run of 32 consecutive words (coalesced) whenever j >= 32, and the mirror partner's run is
// descending, which coalesces just as well. Both slots of a pair are written back only when they swap.
constexpr unsigned kPairsPerThread = 4;

__global__ void bitonic_step_global_kernel(float* keys, std::uint32_t n, std::uint32_t pairs, std::uint32_t j,
                                           bool flip, std::uint32_t mask) {
  const std::uint32_t t0 = blockIdx.x * (blockDim.x * kPairsPerThread) + threadIdx.x;
  std::uint32_t lo[kPairsPerThread], hi[kPairsPerThread];
  float a[kPairsPerThread], b[kPairsPerThread];
  bool live[kPairsPerThread];
#pragma unroll
  for (unsigned q = 0; q < kPairsPerThread; ++q) {
    const std::uint32_t t = t0 + q * blockDim.x;
    lo[q] = pair_low(t, j);
    hi[q] = flip ? (lo[q] ^ (2 * j - 1)) : (lo[q] + j);
    // A padding partner (>= n) is larger than every key: the comparator never swaps, skip it.
    live[q] = t < pairs && hi[q] < n;
    if (live[q]) {
      a[q] = keys[lo[q]];
      b[q] = keys[hi[q]];
    }
  }
#pragma unroll
  for (unsigned q = 0; q < kPairsPerThread; ++q)
    if (live[q] && order_key(a[q], mask) > order_key(b[q], mask)) {
      keys[lo[q]] = b[q];
      keys[hi[q]] = a[q];
    }
}

constexpr unsigned kThreads = 256;

void global_step(float* keys, std::uint32_t n, std::uint32_t N, std::uint32_t j, bool flip, std::uint32_t mask) {
  const std::uint32_t pairs = N / 2;
  const unsigned per_block = kThreads * kPairsPerThread;
  const unsigned blocks = (pairs + per_block - 1) / per_block;
  bitonic_step_global_kernel<<<blocks, kThreads>>>(keys, n, pairs, j, flip, mask);
  LABKIT_CHECK_LAUNCH();
}
}  // namespace

void sort_global(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 2 (sort_global)");
  if (n < 2) return;
  const std::uint32_t N = next_pow2(n), mask = key_mask(order);
  for (std::size_t k = 2; k <= N; k <<= 1) {
    global_step(keys, std::uint32_t(n), N, std::uint32_t(k / 2), true, mask);  // the mirror step
    for (std::size_t j = k / 4; j > 0; j >>= 1) global_step(keys, std::uint32_t(n), N, std::uint32_t(j), false, mask);
  }
}

}  // namespace lab04
