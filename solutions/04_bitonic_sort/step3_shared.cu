// Lab 04 reference, step 3: shared memory. Chunks that fit in one block's shared memory are sorted there in one
// kernel; for every stage k larger than a chunk only the steps j >= chunk run in global memory (step 2's kernel),
// and one shared-memory kernel finishes all j < chunk.
//
// The network is step 2's "flip" form: the first step of stage k pairs slot i with its mirror image i ^ (k-1), and
// every comparator puts the smaller key at the lower index, so a padding slot (i >= n) would never move and every
// comparator that touches one is skipped.
//
// Integer keys in shared memory. A chunk is converted once on load into labkit::float_sort_key (an unsigned integer
// that orders like float_order_key and converts back exactly) and once on store: the compare-exchanges each key
// then takes (14 in kernel B, 105 in kernel A with 2^14-key chunks) are one integer compare each, where
// float_order_key costs a NaN test and a select per key per compare. That nearly halves kernel A (1.43 ms -> 0.82 ms
// at 2^24 keys on an H100) and takes the whole sort from 2.79x to 3.61x the one-kernel-per-step network
// (tools/tuning/tune04). The global steps keep floats: each moves 8 bytes of DRAM per compare, which hides the
// conversion.
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

// Shared memory. A block owns one chunk of `chunk` consecutive slots (a power of two); every step of distance
// j < chunk pairs slots of the same chunk, so those steps need no global memory at all: the chunk is loaded once,
// all its steps run in shared memory separated by __syncthreads(), and it is stored once.
//
// Padding in shared memory is the largest key, 0xFFFFFFFF: a comparator that touches a padding slot has it as its
// higher slot (mirror form) and never swaps (0xFFFFFFFF is not greater than anything), so the shared steps need no
// "is this slot real" test at all. A real key equal to 0xFFFFFFFF is bit-identical to the padding: a harmless tie.
constexpr std::uint32_t kPadKey = 0xFFFFFFFFu;
//
// Bank conflicts: for j >= 32 a warp's 32 lower slots are 32 consecutive words (32 banks, conflict-free); for
// j < 32 the lower slots of a warp spread over 64 words, a 2-way conflict (one extra shared-memory cycle).
//
// Each thread takes kSharedBatch pairs at a time (t, t + blockDim, ...) and issues all their loads before the first
// compare: within one step the pairs are disjoint, so the reordering is safe, and the loads' latency overlaps
// (the compiler cannot do that itself: it cannot prove that a store to sk[] does not alias the next load).
constexpr std::uint32_t kSharedBatch = 4;

__device__ __forceinline__ void shared_step(std::uint32_t* sk, std::uint32_t chunk, std::uint32_t j, bool flip) {
  const std::uint32_t pairs = chunk / 2;
  for (std::uint32_t t0 = threadIdx.x; t0 < pairs; t0 += kSharedBatch * blockDim.x) {
    std::uint32_t lo[kSharedBatch], hi[kSharedBatch], a[kSharedBatch], b[kSharedBatch];
    bool live[kSharedBatch];
#pragma unroll
    for (std::uint32_t q = 0; q < kSharedBatch; ++q) {
      const std::uint32_t t = t0 + q * blockDim.x;
      lo[q] = pair_low(t, j);
      hi[q] = flip ? (lo[q] ^ (2 * j - 1)) : (lo[q] + j);  // both inside the chunk: 2j <= chunk
      live[q] = t < pairs;  // small chunks have fewer pairs than threads * kSharedBatch; padding needs no test
      if (live[q]) {
        a[q] = sk[lo[q]];
        b[q] = sk[hi[q]];
      }
    }
#pragma unroll
    for (std::uint32_t q = 0; q < kSharedBatch; ++q)
      if (live[q] && a[q] > b[q]) {
        sk[lo[q]] = b[q];
        sk[hi[q]] = a[q];
      }
  }
  // Every pair of the next step may involve slots that another thread just wrote: all writes of this step must
  // be visible before any thread starts the next one. (The loop bounds are the same for every thread, so every
  // thread reaches this barrier.)
  __syncthreads();
}

__device__ __forceinline__ void load_chunk(const float* keys, std::uint32_t* sk, std::uint32_t base,
                                           std::uint32_t n, std::uint32_t chunk, std::uint32_t mask) {
  // Consecutive threads load consecutive words: coalesced. Each key is converted once, here.
  for (std::uint32_t t = threadIdx.x; t < chunk; t += blockDim.x)
    sk[t] = base + t < n ? labkit::float_sort_key(__float_as_uint(keys[base + t]), mask) : kPadKey;
  __syncthreads();  // the whole chunk is in shared memory before the first compare-exchange
}

__device__ __forceinline__ void store_chunk(float* keys, const std::uint32_t* sk, std::uint32_t base,
                                            std::uint32_t n, std::uint32_t chunk, std::uint32_t mask) {
  // No barrier needed before: the last shared_step ended with one. Padding slots are never stored.
  for (std::uint32_t t = threadIdx.x; t < chunk; t += blockDim.x)
    if (base + t < n) keys[base + t] = __uint_as_float(labkit::float_from_sort_key(sk[t], mask));
}

// Kernel A: stages k = 2 .. chunk entirely in shared memory: each chunk comes out sorted (all ascending in key).
__global__ void __launch_bounds__(1024) bitonic_sort_chunks_shared_kernel(float* keys, std::uint32_t n,
                                                                          std::uint32_t chunk, std::uint32_t mask) {
  extern __shared__ std::uint32_t sk[];
  const std::uint32_t base = blockIdx.x * chunk;
  load_chunk(keys, sk, base, n, chunk, mask);
  for (std::uint32_t k = 2; k <= chunk; k <<= 1) {
    shared_step(sk, chunk, k / 2, true);
    for (std::uint32_t j = k / 4; j > 0; j >>= 1) shared_step(sk, chunk, j, false);
  }
  store_chunk(keys, sk, base, n, chunk, mask);
}

// Kernel B: the tail of a stage k > chunk, its steps j = chunk/2 .. 1 (plain half-cleaners, the same for every k).
__global__ void __launch_bounds__(1024) bitonic_merge_chunks_shared_kernel(float* keys, std::uint32_t n,
                                                                           std::uint32_t chunk, std::uint32_t mask) {
  extern __shared__ std::uint32_t sk[];
  const std::uint32_t base = blockIdx.x * chunk;
  load_chunk(keys, sk, base, n, chunk, mask);
  for (std::uint32_t j = chunk / 2; j > 0; j >>= 1) shared_step(sk, chunk, j, false);
  store_chunk(keys, sk, base, n, chunk, mask);
}

constexpr unsigned kThreads = 256;

void global_step(float* keys, std::uint32_t n, std::uint32_t N, std::uint32_t j, bool flip, std::uint32_t mask) {
  const std::uint32_t pairs = N / 2;
  const unsigned per_block = kThreads * kPairsPerThread;
  const unsigned blocks = (pairs + per_block - 1) / per_block;
  bitonic_step_global_kernel<<<blocks, kThreads>>>(keys, n, pairs, j, flip, mask);
  LABKIT_CHECK_LAUNCH();
}

// Tuning knobs, overridable at compile time (tools/tuning/tune04.cu): the log2 of the largest chunk (0: as many keys
// as one block's shared memory holds) and the most threads of a shared-memory block.
// Why 2^14 and not the 2^15 keys an H100's 227 KiB hold: a 128 KiB chunk leaves room for one block (1024 threads)
// per SM, and at every __syncthreads() the SM idles until its slowest warp arrives. With 64 KiB chunks two blocks
// share an SM and one computes while the other waits; that outweighs the extra global passes (54 instead of 45 at
// 2^24 keys). Measured on an H100 at 2^24 keys (tools/tuning/tune04, step 3 / step 1) with integer keys in shared
// memory: 2^15 3.56, 2^14 3.61 (1024 threads per block), 2^14 with 512 threads 3.62. With floats compared through
// float_order_key: 2^15 2.65, 2^14 2.79, 2^13 2.59, 2^12 2.07 (512 threads: 2.77, 2.66, 2.51).
#ifndef LAB04_STEP3_CHUNK_LOG2
#define LAB04_STEP3_CHUNK_LOG2 14
#endif
#ifndef LAB04_STEP3_THREADS
#define LAB04_STEP3_THREADS 1024
#endif
constexpr unsigned kSharedThreads = LAB04_STEP3_THREADS;
static_assert(kSharedThreads >= 32 && kSharedThreads <= 1024 && (kSharedThreads & (kSharedThreads - 1)) == 0,
              "a power of two from 32 to 1024 threads");

// The largest power-of-two chunk whose elements (bytes_per_slot each) fit in one block's shared memory (the
// opt-in maximum: 227 KiB on an H100, so 2^15 keys), capped at 2^LAB04_STEP3_CHUNK_LOG2.
std::uint32_t shared_chunk(std::size_t bytes_per_slot) {
  int dev = 0, optin = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  std::uint32_t c = 2;
  while (std::size_t(c) * 2 * bytes_per_slot <= std::size_t(optin)) c <<= 1;
  if (LAB04_STEP3_CHUNK_LOG2 > 0 && c > (1u << LAB04_STEP3_CHUNK_LOG2)) c = 1u << LAB04_STEP3_CHUNK_LOG2;
  return c;
}
}  // namespace

void sort_shared(float* keys, std::size_t n_in, Order order) {
  check_args(keys, n_in, "step 3 (sort_shared)");
  if (n_in < 2) return;
  const std::uint32_t n = static_cast<std::uint32_t>(n_in), N = next_pow2(n_in), mask = key_mask(order);
  const std::uint32_t max_chunk = shared_chunk(sizeof(float));
  const std::uint32_t chunk = N < max_chunk ? N : max_chunk;  // small arrays: one block sorts everything
  const std::size_t smem = std::size_t(chunk) * sizeof(float);
  const unsigned threads = chunk / 2 < kSharedThreads ? chunk / 2 : kSharedThreads;
  const unsigned blocks = N / chunk;
  // More than 48 KiB of dynamic shared memory must be requested explicitly, per kernel.
  LABKIT_CUDA(cudaFuncSetAttribute(bitonic_sort_chunks_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(smem)));
  LABKIT_CUDA(cudaFuncSetAttribute(bitonic_merge_chunks_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(smem)));

  bitonic_sort_chunks_shared_kernel<<<blocks, threads, smem>>>(keys, n, chunk, mask);
  LABKIT_CHECK_LAUNCH();
  for (std::size_t k = std::size_t(chunk) * 2; k <= N; k <<= 1) {
    // Steps with j >= chunk cross chunks: global memory, one launch each (the first is the mirror step).
    global_step(keys, n, N, std::uint32_t(k / 2), true, mask);
    for (std::size_t j = k / 4; j >= chunk; j >>= 1) global_step(keys, n, N, std::uint32_t(j), false, mask);
    // Steps j < chunk stay inside a chunk: one shared-memory kernel finishes the stage.
    bitonic_merge_chunks_shared_kernel<<<blocks, threads, smem>>>(keys, n, chunk, mask);
    LABKIT_CHECK_LAUNCH();
  }
}

}  // namespace lab04
