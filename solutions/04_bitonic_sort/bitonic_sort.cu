// Lab 04 reference solution: bitonic sort of float keys (and key-value pairs), any n, both directions.
//
// Notation. The network sorts N = 2^m slots. Stage k (k = 2, 4, ..., N) merges sorted runs of length k/2 into
// sorted runs of length k; it consists of steps with pair distance j = k/2, k/4, ..., 1. In a step every slot
// belongs to exactly one pair, so the N/2 compare-exchanges of a step are independent (one thread each), but
// consecutive steps depend on each other: a barrier (a new kernel launch, or __syncthreads()) separates them.
//
// Steps 2-4 use the "flip" form of the network: the first step of stage k pairs slot i with its mirror image in
// its k-block (i ^ (k-1)) instead of i ^ (k/2), and every comparator puts the smaller key at the lower index.
// That sorts too (the mirror comparison turns two ascending runs into a bitonic split), and because every
// comparator points the same way, padding slots i >= n behave like keys larger than everything: they would never
// move, so every comparator that touches one is simply skipped. No padding memory, no sentinel value that could
// tie with a real NaN.
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

// ---------------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------------
// Steps 2-4, global memory: one thread per pair (N/2 threads, none idle by construction). `flip` selects the
// mirror pairing of a stage's first step. Both slots of a pair are read by the same thread and written back
// only when they swap; the two reads of a warp are each a run of 32 consecutive words (coalesced) whenever
// j >= 32, and the mirror partner's run is descending, which coalesces just as well.
template <bool kValues>
__global__ void bitonic_step_global_kernel(float* keys, std::uint32_t* values, std::uint32_t n, std::uint32_t pairs,
                                           std::uint32_t j, bool flip, std::uint32_t mask) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= pairs) return;
  const std::uint32_t i = pair_low(t, j);
  const std::uint32_t l = flip ? (i ^ (2 * j - 1)) : (i + j);
  if (l >= n) return;  // the partner is a padding slot (larger than every key): the comparator never swaps
  const float a = keys[i], b = keys[l];
  if (order_key(a, mask) > order_key(b, mask)) {
    keys[i] = b;
    keys[l] = a;
    if constexpr (kValues) {  // values are read only when they move
      const std::uint32_t va = values[i], vb = values[l];
      values[i] = vb;
      values[l] = va;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Steps 3-4, shared memory. A block owns one chunk of `chunk` consecutive slots (a power of two); every step of
// distance j < chunk pairs slots of the same chunk, so those steps need no global memory at all: the chunk is
// loaded once, all its steps run in shared memory separated by __syncthreads(), and it is stored once.
//
// Bank conflicts: for j >= 32 a warp's 32 lower slots are 32 consecutive words (32 banks, conflict-free); for
// j < 32 the lower slots of a warp spread over 64 words, a 2-way conflict (one extra shared-memory cycle).
template <bool kValues>
__device__ __forceinline__ void shared_step(float* sk, std::uint32_t* sv, std::uint32_t base, std::uint32_t n,
                                            std::uint32_t chunk, std::uint32_t j, bool flip, std::uint32_t mask) {
  for (std::uint32_t t = threadIdx.x; t < chunk / 2; t += blockDim.x) {
    const std::uint32_t i = pair_low(t, j);
    const std::uint32_t l = flip ? (i ^ (2 * j - 1)) : (i + j);  // both inside the chunk: 2j <= chunk
    if (base + l >= n) continue;                                    // padding partner: no-op (see the top)
    const float a = sk[i], b = sk[l];
    if (order_key(a, mask) > order_key(b, mask)) {
      sk[i] = b;
      sk[l] = a;
      if constexpr (kValues) {
        const std::uint32_t va = sv[i];
        sv[i] = sv[l];
        sv[l] = va;
      }
    }
  }
  // Every pair of the next step may involve slots that another thread just wrote: all writes of this step must
  // be visible before any thread starts the next one. (The loop bounds are the same for every thread, so every
  // thread reaches this barrier.)
  __syncthreads();
}

template <bool kValues>
__device__ __forceinline__ void load_chunk(const float* keys, const std::uint32_t* values, float* sk,
                                           std::uint32_t* sv, std::uint32_t base, std::uint32_t n,
                                           std::uint32_t chunk) {
  // Consecutive threads load consecutive words: coalesced. Padding slots are left unset; no comparator reads them.
  for (std::uint32_t t = threadIdx.x; t < chunk; t += blockDim.x)
    if (base + t < n) {
      sk[t] = keys[base + t];
      if constexpr (kValues) sv[t] = values[base + t];
    }
  __syncthreads();  // the whole chunk is in shared memory before the first compare-exchange
}

template <bool kValues>
__device__ __forceinline__ void store_chunk(float* keys, std::uint32_t* values, const float* sk,
                                            const std::uint32_t* sv, std::uint32_t base, std::uint32_t n,
                                            std::uint32_t chunk) {
  // No barrier needed before: the last shared_step ended with one.
  for (std::uint32_t t = threadIdx.x; t < chunk; t += blockDim.x)
    if (base + t < n) {
      keys[base + t] = sk[t];
      if constexpr (kValues) values[base + t] = sv[t];
    }
}

// Stages k = 2 .. chunk entirely in shared memory: each chunk comes out sorted (all in the same direction).
template <bool kValues>
__global__ void __launch_bounds__(1024) bitonic_sort_chunks_shared_kernel(float* keys, std::uint32_t* values,
                                                                          std::uint32_t n, std::uint32_t chunk,
                                                                          std::uint32_t mask) {
  extern __shared__ std::uint32_t smem[];
  float* sk = reinterpret_cast<float*>(smem);
  std::uint32_t* sv = smem + chunk;  // values after the keys (only touched when kValues)
  const std::uint32_t base = blockIdx.x * chunk;
  load_chunk<kValues>(keys, values, sk, sv, base, n, chunk);
  for (std::uint32_t k = 2; k <= chunk; k <<= 1) {
    shared_step<kValues>(sk, sv, base, n, chunk, k / 2, true, mask);
    for (std::uint32_t j = k / 4; j > 0; j >>= 1) shared_step<kValues>(sk, sv, base, n, chunk, j, false, mask);
  }
  store_chunk<kValues>(keys, values, sk, sv, base, n, chunk);
}

// The tail of a stage k > chunk: its steps j = chunk/2 .. 1 (plain half-cleaners, the same for every k).
template <bool kValues>
__global__ void __launch_bounds__(1024) bitonic_merge_chunks_shared_kernel(float* keys, std::uint32_t* values,
                                                                           std::uint32_t n, std::uint32_t chunk,
                                                                           std::uint32_t mask) {
  extern __shared__ std::uint32_t smem[];
  float* sk = reinterpret_cast<float*>(smem);
  std::uint32_t* sv = smem + chunk;
  const std::uint32_t base = blockIdx.x * chunk;
  load_chunk<kValues>(keys, values, sk, sv, base, n, chunk);
  for (std::uint32_t j = chunk / 2; j > 0; j >>= 1) shared_step<kValues>(sk, sv, base, n, chunk, j, false, mask);
  store_chunk<kValues>(keys, values, sk, sv, base, n, chunk);
}

// ---------------------------------------------------------------------------------------------------------
// Host side.
constexpr unsigned kThreads = 256;

template <bool kValues>
void global_step(float* keys, std::uint32_t* values, std::uint32_t n, std::uint32_t N, std::uint32_t j, bool flip,
                 std::uint32_t mask) {
  const std::uint32_t pairs = N / 2;
  const unsigned blocks = (pairs + kThreads - 1) / kThreads;
  bitonic_step_global_kernel<kValues><<<blocks, kThreads>>>(keys, values, n, pairs, j, flip, mask);
  LABKIT_CHECK_LAUNCH();
}

// The largest power-of-two chunk whose elements (bytes_per_slot each) fit in one block's shared memory (the
// opt-in maximum: 227 KiB on an H100, so 2^15 keys or 2^14 key-value pairs).
std::uint32_t shared_chunk(std::size_t bytes_per_slot) {
  int dev = 0, optin = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  std::uint32_t c = 2;
  while (std::size_t(c) * 2 * bytes_per_slot <= std::size_t(optin)) c <<= 1;
  return c;
}

template <bool kValues>
void sort_with_shared_chunks(float* keys, std::uint32_t* values, std::size_t n_in, Order order) {
  const std::uint32_t n = static_cast<std::uint32_t>(n_in), N = next_pow2(n_in), mask = key_mask(order);
  const std::size_t bytes_per_slot = sizeof(float) + (kValues ? sizeof(std::uint32_t) : 0);
  const std::uint32_t max_chunk = shared_chunk(bytes_per_slot);
  const std::uint32_t chunk = N < max_chunk ? N : max_chunk;  // small arrays: one block sorts everything
  const std::size_t smem = std::size_t(chunk) * bytes_per_slot;
  const unsigned threads = chunk / 2 < 1024 ? chunk / 2 : 1024;
  const unsigned blocks = N / chunk;
  // More than 48 KiB of dynamic shared memory must be requested explicitly, per kernel.
  LABKIT_CUDA(cudaFuncSetAttribute(bitonic_sort_chunks_shared_kernel<kValues>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  LABKIT_CUDA(cudaFuncSetAttribute(bitonic_merge_chunks_shared_kernel<kValues>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));

  bitonic_sort_chunks_shared_kernel<kValues><<<blocks, threads, smem>>>(keys, values, n, chunk, mask);
  LABKIT_CHECK_LAUNCH();
  for (std::size_t k = std::size_t(chunk) * 2; k <= N; k <<= 1) {
    // Steps with j >= chunk cross chunks: global memory, one launch each (the first is the mirror step).
    global_step<kValues>(keys, values, n, N, std::uint32_t(k / 2), true, mask);
    for (std::size_t j = k / 4; j >= chunk; j >>= 1)
      global_step<kValues>(keys, values, n, N, std::uint32_t(j), false, mask);
    // Steps j < chunk stay inside a chunk: one shared-memory kernel finishes the stage.
    bitonic_merge_chunks_shared_kernel<kValues><<<blocks, threads, smem>>>(keys, values, n, chunk, mask);
    LABKIT_CHECK_LAUNCH();
  }
}

}  // namespace

// Step 1 -----------------------------------------------------------------------------------------------------
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

// Step 2 -----------------------------------------------------------------------------------------------------
void sort_global(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 2 (sort_global)");
  if (n < 2) return;
  const std::uint32_t N = next_pow2(n), mask = key_mask(order);
  for (std::size_t k = 2; k <= N; k <<= 1) {
    global_step<false>(keys, nullptr, std::uint32_t(n), N, std::uint32_t(k / 2), true, mask);
    for (std::size_t j = k / 4; j > 0; j >>= 1)
      global_step<false>(keys, nullptr, std::uint32_t(n), N, std::uint32_t(j), false, mask);
  }
}

// Step 3 -----------------------------------------------------------------------------------------------------
void sort_shared(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 3 (sort_shared)");
  if (n < 2) return;
  sort_with_shared_chunks<false>(keys, nullptr, n, order);
}

// Step 4 -----------------------------------------------------------------------------------------------------
void sort_pairs(float* keys, std::uint32_t* values, std::size_t n, Order order) {
  check_args(keys, n, "step 4 (sort_pairs)");
  if (n > 0 && values == nullptr) throw std::invalid_argument("lab04 step 4 (sort_pairs): null values pointer");
  if (n < 2) return;
  sort_with_shared_chunks<true>(keys, values, n, order);
}

}  // namespace lab04
