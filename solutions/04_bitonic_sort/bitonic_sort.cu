// Lab 04 reference solution: bitonic sort of float keys (and key-value pairs), any n, both directions; step 5 does
// several network steps per pass over memory, in registers (keys only).
//
// Notation. The network sorts N = 2^m slots. Stage k (k = 2, 4, ..., N) merges sorted runs of length k/2 into
// sorted runs of length k; it consists of steps with pair distance j = k/2, k/4, ..., 1. In a step every slot
// belongs to exactly one pair, so the N/2 compare-exchanges of a step are independent (one thread each), but
// consecutive steps depend on each other: a barrier (a new kernel launch, or __syncthreads()) separates them.
//
// Steps 2-5 use the "flip" form of the network: the first step of stage k pairs slot i with its mirror image in
// its k-block (i ^ (k-1)) instead of i ^ (k/2), and every comparator puts the smaller key at the lower index.
// That sorts too (the mirror comparison turns two ascending runs into a bitonic split), and because every
// comparator points the same way, padding slots i >= n behave like keys larger than everything: they would never
// move, so every comparator that touches one is simply skipped. No padding memory, no sentinel value that could
// tie with a real NaN. (Step 5 gets the same effect without a branch, from integer keys; see its section.)
#include <stdexcept>
#include <string>
#include <vector>

#include "bitonic_sort.h"
#include "labkit/labkit.h"

namespace lab04 {

namespace {
// Step 5's pass sizes (steps per fused pass, 1..5): overridable at compile time for tuning (.snap/tune04.cu).
#ifndef LAB04_FUSE_GLOBAL
#define LAB04_FUSE_GLOBAL 5
#endif
#ifndef LAB04_FUSE_SHARED
#define LAB04_FUSE_SHARED 4  // 5 spills: 32 keys + their 32 shared addresses exceed 64 registers (1024 threads)
#endif
constexpr int kFuseGlobal = LAB04_FUSE_GLOBAL, kFuseShared = LAB04_FUSE_SHARED;
static_assert(kFuseGlobal >= 1 && kFuseGlobal <= 5 && kFuseShared >= 1 && kFuseShared <= 5, "1..5 steps per pass");


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
// Steps 2-4, global memory: one pair per (thread, q), kPairsPerThread pairs per thread (N/2 pairs in all, none
// idle by construction). `flip` selects the mirror pairing of a stage's first step. A thread first issues the
// loads of all its pairs, then compares and stores: with one pair per thread an SM has only ~16 KB of loads in
// flight, less than the ~14-20 KB per SM that ~3 TB/s at ~600 ns DRAM latency needs; four pairs quadruple it.
// Pair t = block base + q * blockDim + threadIdx: consecutive threads take consecutive pairs, so the two reads of
// a warp are each a run of 32 consecutive words (coalesced) whenever j >= 32, and the mirror partner's run is
// descending, which coalesces just as well. Both slots of a pair are written back only when they swap.
constexpr unsigned kPairsPerThread = 4;

template <bool kValues>
__global__ void bitonic_step_global_kernel(float* keys, std::uint32_t* values, std::uint32_t n, std::uint32_t pairs,
                                           std::uint32_t j, bool flip, std::uint32_t mask) {
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
      if constexpr (kValues) {  // values are read only when they move
        const std::uint32_t va = values[lo[q]], vb = values[hi[q]];
        values[lo[q]] = vb;
        values[hi[q]] = va;
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
//
// Each thread takes kSharedBatch pairs at a time (t, t + blockDim, ...) and issues all their loads before the first
// compare: within one step the pairs are disjoint, so the reordering is safe, and the loads' latency overlaps
// (the compiler cannot do that itself: it cannot prove that a store to sk[] does not alias the next load).
constexpr std::uint32_t kSharedBatch = 4;

template <bool kValues>
__device__ __forceinline__ void shared_step(float* sk, std::uint32_t* sv, std::uint32_t base, std::uint32_t n,
                                            std::uint32_t chunk, std::uint32_t j, bool flip, std::uint32_t mask) {
  const std::uint32_t pairs = chunk / 2;
  for (std::uint32_t t0 = threadIdx.x; t0 < pairs; t0 += kSharedBatch * blockDim.x) {
    std::uint32_t lo[kSharedBatch], hi[kSharedBatch];
    float a[kSharedBatch], b[kSharedBatch];
    bool live[kSharedBatch];
#pragma unroll
    for (std::uint32_t q = 0; q < kSharedBatch; ++q) {
      const std::uint32_t t = t0 + q * blockDim.x;
      lo[q] = pair_low(t, j);
      hi[q] = flip ? (lo[q] ^ (2 * j - 1)) : (lo[q] + j);  // both inside the chunk: 2j <= chunk
      live[q] = t < pairs && base + hi[q] < n;               // padding partner: no-op (see the top)
      if (live[q]) {
        a[q] = sk[lo[q]];
        b[q] = sk[hi[q]];
      }
    }
#pragma unroll
    for (std::uint32_t q = 0; q < kSharedBatch; ++q)
      if (live[q] && order_key(a[q], mask) > order_key(b[q], mask)) {
        sk[lo[q]] = b[q];
        sk[hi[q]] = a[q];
        if constexpr (kValues) {
          const std::uint32_t va = sv[lo[q]];
          sv[lo[q]] = sv[hi[q]];
          sv[hi[q]] = va;
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
// Step 5: several network steps per pass, in registers (keys only).
//
// Keys as bijective integers. Step 5 converts each float ONCE when it is loaded from global memory into a 32-bit
// integer key, sorts the integers (in registers and shared memory), and converts back when it stores. That needs
// a key that is a bijection (float_order_key maps every NaN to one key, so the float could not be recovered):
// the usual radix-sort transform (flip all bits of negatives, set the sign bit of positives) is one, but it puts
// the negative NaNs below -inf; subtracting 0x7FFFFF (mod 2^32) rotates exactly those 2^23 - 1 keys to the top,
// above +inf and the positive NaNs. The result refines float_order_key (a < b there implies a < b here; NaNs are
// merely ordered among themselves by payload, which the unstable sort is free to do). Descending: XOR all ones.
// With a bijection, equal keys mean identical floats, so a compare-exchange is just (min, max): branch-free.
//
// Padding. Slots >= n hold the largest key 0xFFFFFFFF. A comparator always puts the max at its higher slot and,
// in the mirror form, a comparator that touches a padding slot has it as its higher slot (or both are padding),
// so a padding slot receives max(x, 0xFFFFFFFF) = 0xFFFFFFFF again: padding never changes, and a global pass may
// load it as 0xFFFFFFFF and drop its store. A real key equal to 0xFFFFFFFF (one NaN bit pattern) ties with the
// padding, and a tie of identical bits changes nothing. This is exactly step 2's "skip every comparator that
// touches a padding slot", without a branch.
constexpr std::uint32_t kKeyRotate = 0x007FFFFFu;
constexpr std::uint32_t kPadKey = 0xFFFFFFFFu;

__host__ __device__ __forceinline__ std::uint32_t to_key(std::uint32_t bits, std::uint32_t mask) {
  const std::uint32_t k = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (k - kKeyRotate) ^ mask;
}
__host__ __device__ __forceinline__ std::uint32_t from_key(std::uint32_t key, std::uint32_t mask) {
  const std::uint32_t k = (key ^ mask) + kKeyRotate;
  return (k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k;
}

// One comparator: the smaller key to the lower slot (umin / umax on the device).
__host__ __device__ __forceinline__ void cmpx(std::uint32_t& a, std::uint32_t& b) {
  const std::uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
  a = lo;
  b = hi;
}

// A fused pass does R consecutive steps of one stage, with distances 2^(lj+R-1), ..., 2^lj. The 2^R slots that
// interact across those steps differ only in the R bits lj .. lj+R-1 of their index: group g is the other bits
// (x = the bits below lj, g >> lj the bits above lj+R-1), element m of the group is slot base + x + m * 2^lj.
// If the first step is a stage's mirror step (flip: slot i meets i ^ (k-1), k = 2^(lj+R)), the mirror of
// slot (m, x) is (m ^ (2^R-1), x ^ (2^lj-1)): its low bits change too. So with flip the upper half of the group
// (m >= 2^(R-1)) takes the mirrored low bits x ^ (2^lj - 1): then the mirror step pairs m with m ^ (2^R-1), and
// the remaining plain steps (i with i + j, j < k/2) never mix the halves, each of which has one set of low bits.
// For a fixed group base both x -> x and x -> x ^ (2^lj - 1) are bijections, so every slot is in exactly one
// group. Consecutive g give consecutive x (ascending in the lower half, descending in the upper): a warp reads
// 32 consecutive words per element whenever 2^lj >= 32.
template <int R>
__host__ __device__ __forceinline__ std::uint32_t group_slot(std::uint32_t g, int m, std::uint32_t lj, bool flip) {
  const std::uint32_t low_mask = (1u << lj) - 1;
  const std::uint32_t x = g & low_mask;
  const std::uint32_t base = (g >> lj) << (lj + R);  // < N <= 2^31: lj + R <= log2(N) <= 31
  const std::uint32_t low = (flip && m >= (1 << (R - 1))) ? (x ^ low_mask) : x;
  return base + low + (std::uint32_t(m) << lj);
}

// The R steps of a fused pass on the 2^R keys of one group (fully unrolled: the array stays in registers).
template <int R>
__host__ __device__ __forceinline__ void network_steps(std::uint32_t (&v)[1 << R], bool flip) {
  constexpr int M = 1 << R, H = M / 2;
  if (flip) {
#pragma unroll
    for (int m = 0; m < H; ++m) cmpx(v[m], v[m ^ (M - 1)]);
  } else {
#pragma unroll
    for (int m = 0; m < H; ++m) cmpx(v[m], v[m + H]);
  }
#pragma unroll
  for (int d = H / 2; d > 0; d >>= 1)
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (!(m & d)) cmpx(v[m], v[m + d]);
}

// A row is 32 consecutive slots (an aligned segment) held by one thread. Steps with j < 32 never leave a row, so
// stages k = 2..32 and the last five steps (j = 16..1) of every later stage run in registers: no barrier at all.
constexpr int kRow = 32;

__host__ __device__ __forceinline__ void row_sort(std::uint32_t (&v)[kRow]) {  // stages k = 2 .. 32
#pragma unroll
  for (int k = 2; k <= kRow; k <<= 1) {
#pragma unroll
    for (int m = 0; m < kRow; ++m)
      if (!(m & (k / 2))) cmpx(v[m], v[m ^ (k - 1)]);  // mirror step
#pragma unroll
    for (int d = k / 4; d > 0; d >>= 1)
#pragma unroll
      for (int m = 0; m < kRow; ++m)
        if (!(m & d)) cmpx(v[m], v[m + d]);
  }
}

__host__ __device__ __forceinline__ void row_merge(std::uint32_t (&v)[kRow]) {  // steps j = 16 .. 1 of a stage
#pragma unroll
  for (int d = kRow / 2; d > 0; d >>= 1)
#pragma unroll
    for (int m = 0; m < kRow; ++m)
      if (!(m & d)) cmpx(v[m], v[m + d]);
}

// Shared-memory layout with one padding word per 32: slot s lives at s + s/32. A thread's row (s = 32t + e) is at
// 33t + e, bank (t + e) % 32: a warp reading element e of its 32 rows hits 32 different banks. An aligned run of
// 32 slots stays 32 consecutive words, so the coalesced chunk load/store and the fused passes (a warp touches an
// aligned run of 32 slots per element when 2^lj >= 32) are conflict-free too.
__host__ __device__ __forceinline__ std::uint32_t pad(std::uint32_t s) { return s + (s >> 5); }

// The largest pass of up to max_r steps from distance 2^hi down to (at least) 2^lo: the number of steps.
__host__ __device__ __forceinline__ int pass_steps(int hi, int lo, int max_r) {
  return hi - lo + 1 < max_r ? hi - lo + 1 : max_r;
}

// Fused passes on a chunk in shared memory: every group of 2^R slots once (chunk / 2^R groups, chunk / 32
// threads: 32 / 2^R groups per thread), then a barrier.
template <int R>
__device__ __forceinline__ void shared_pass(std::uint32_t* s, std::uint32_t chunk, std::uint32_t lj, bool flip) {
  const std::uint32_t groups = chunk >> R;
  for (std::uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {  // same trip count for every thread
    std::uint32_t v[1 << R];
#pragma unroll
    for (int m = 0; m < (1 << R); ++m) v[m] = s[pad(group_slot<R>(g, m, lj, flip))];
    network_steps<R>(v, flip);
#pragma unroll
    for (int m = 0; m < (1 << R); ++m) s[pad(group_slot<R>(g, m, lj, flip))] = v[m];
  }
  __syncthreads();  // the next pass (or the rows) may read any slot written here
}

// Steps j = 2^hi .. 2^lo (lo >= 5) of one stage on a chunk in shared memory, in passes of up to kFuseShared steps.
__device__ __forceinline__ void shared_steps(std::uint32_t* s, std::uint32_t chunk, int hi, int lo, bool flip) {
  while (hi >= lo) {  // hi, lo are the same in every thread: every thread reaches every barrier
    const int r = pass_steps(hi, lo, kFuseShared), lj = hi - r + 1;
    switch (r) {
      case 1: shared_pass<1>(s, chunk, lj, flip); break;
      case 2: if constexpr (kFuseShared >= 2) shared_pass<2>(s, chunk, lj, flip); break;
      case 3: if constexpr (kFuseShared >= 3) shared_pass<3>(s, chunk, lj, flip); break;
      case 4: if constexpr (kFuseShared >= 4) shared_pass<4>(s, chunk, lj, flip); break;
      default: if constexpr (kFuseShared >= 5) shared_pass<5>(s, chunk, lj, flip); break;
    }
    flip = false;
    hi = lj - 1;
  }
}

__device__ __forceinline__ void row_load(const std::uint32_t* s, std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int e = 0; e < kRow; ++e) v[e] = s[threadIdx.x * (kRow + 1) + e];
}
__device__ __forceinline__ void row_store(std::uint32_t* s, const std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int e = 0; e < kRow; ++e) s[threadIdx.x * (kRow + 1) + e] = v[e];
  __syncthreads();
}

// Coalesced chunk load / store through shared memory (consecutive threads, consecutive words), converting keys.
__device__ __forceinline__ void fused_load_chunk(const float* keys, std::uint32_t* s, std::uint32_t base,
                                                 std::uint32_t n, std::uint32_t chunk, std::uint32_t mask) {
  for (std::uint32_t i = threadIdx.x; i < chunk; i += blockDim.x)
    s[pad(i)] = base + i < n ? to_key(__float_as_uint(keys[base + i]), mask) : kPadKey;
  __syncthreads();
}
__device__ __forceinline__ void fused_store_chunk(float* keys, const std::uint32_t* s, std::uint32_t base,
                                                  std::uint32_t n, std::uint32_t chunk, std::uint32_t mask) {
  for (std::uint32_t i = threadIdx.x; i < chunk; i += blockDim.x)
    if (base + i < n) keys[base + i] = __uint_as_float(from_key(s[pad(i)], mask));
}

// Kernel A of step 5: sort each chunk (chunk / 32 threads, one row each; chunk = 2^lc >= 32).
__global__ void __launch_bounds__(1024, 1) fused_sort_chunks_kernel(float* keys, std::uint32_t n,
                                                                    std::uint32_t chunk, int lc, std::uint32_t mask) {
  extern __shared__ std::uint32_t s[];
  const std::uint32_t base = blockIdx.x * chunk;
  if (base >= n) return;  // a chunk of padding only (the same for the whole block: no barrier is skipped)
  fused_load_chunk(keys, s, base, n, chunk, mask);
  std::uint32_t v[kRow];
  row_load(s, v);
  row_sort(v);  // stages 2 .. 32 in registers
  row_store(s, v);
  for (int lk = 6; lk <= lc; ++lk) {            // stage k = 2^lk
    shared_steps(s, chunk, lk - 1, 5, true);    // j = k/2 .. 32 (the first one mirrored)
    row_load(s, v);
    row_merge(v);                               // j = 16 .. 1
    row_store(s, v);
  }
  fused_store_chunk(keys, s, base, n, chunk, mask);
}

// Kernel B of step 5: the steps j = chunk/2 .. 1 of a stage k > chunk.
__global__ void __launch_bounds__(1024, 1) fused_merge_chunks_kernel(float* keys, std::uint32_t n,
                                                                     std::uint32_t chunk, int lc, std::uint32_t mask) {
  extern __shared__ std::uint32_t s[];
  const std::uint32_t base = blockIdx.x * chunk;
  if (base >= n) return;
  fused_load_chunk(keys, s, base, n, chunk, mask);
  shared_steps(s, chunk, lc - 1, 5, false);  // j = chunk/2 .. 32
  std::uint32_t v[kRow];
  row_load(s, v);
  row_merge(v);  // j = 16 .. 1
  row_store(s, v);
  fused_store_chunk(keys, s, base, n, chunk, mask);
}

// A fused global pass: R steps of one stage (distances 2^(lj+R-1) .. 2^lj, all >= chunk), one group per thread,
// straight from global memory into registers and back: one read and one write of every key for R steps.
template <int R>
__global__ void __launch_bounds__(256) fused_global_kernel(float* keys, std::uint32_t n, std::uint32_t groups,
                                                           std::uint32_t lj, bool flip, std::uint32_t mask) {
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  // Element 0 is the group's lowest slot (the others add m * 2^lj > any low bits): all padding if it is >= n.
  if (group_slot<R>(g, 0, lj, flip) >= n) return;
  std::uint32_t v[1 << R];
#pragma unroll
  for (int m = 0; m < (1 << R); ++m) {  // all 2^R loads are independent: plenty of bytes in flight
    const std::uint32_t i = group_slot<R>(g, m, lj, flip);
    v[m] = i < n ? to_key(__float_as_uint(keys[i]), mask) : kPadKey;
  }
  network_steps<R>(v, flip);
#pragma unroll
  for (int m = 0; m < (1 << R); ++m) {
    const std::uint32_t i = group_slot<R>(g, m, lj, flip);
    if (i < n) keys[i] = __uint_as_float(from_key(v[m], mask));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Host side.
constexpr unsigned kThreads = 256;

template <bool kValues>
void global_step(float* keys, std::uint32_t* values, std::uint32_t n, std::uint32_t N, std::uint32_t j, bool flip,
                 std::uint32_t mask) {
  const std::uint32_t pairs = N / 2;
  const unsigned per_block = kThreads * kPairsPerThread;
  const unsigned blocks = (pairs + per_block - 1) / per_block;
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

// Step 5's plan: one chunk kernel, then per stage k > chunk the fused global passes and one merge kernel. A host
// function (not a kernel) so that a CPU simulation can replay exactly the launches made here.
struct FusedPass {
  int r;          // steps in this pass (1..kFuseGlobal); 0 = the merge kernel of the stage
  int lj;         // log2 of the smallest distance of the pass
  bool flip;      // the pass starts with the stage's mirror step
};

// log2 of the chunk: 2^15 keys (1024 threads of 32) when the padded chunk fits the opt-in shared memory.
int fused_log_chunk(std::uint32_t N, int optin_bytes) {
  int lc = 15;
  while (lc > 5 && (std::size_t(1) << lc) / 32 * 33 * sizeof(std::uint32_t) > std::size_t(optin_bytes)) --lc;
  int ln = 0;
  while ((std::uint32_t(1) << ln) < N) ++ln;
  if (ln < lc) lc = ln < 5 ? 5 : ln;  // small arrays: one block; at least one row of 32 (padding fills it)
  return lc;
}

std::vector<FusedPass> fused_plan(std::uint32_t N, int lc) {
  std::vector<FusedPass> plan;
  int ln = 0;
  while ((std::uint32_t(1) << ln) < N) ++ln;
  for (int lk = lc + 1; lk <= ln; ++lk) {  // stage k = 2^lk: steps j = 2^(lk-1) .. 2^lc in global memory
    bool flip = true;
    for (int hi = lk - 1; hi >= lc;) {
      const int r = pass_steps(hi, lc, kFuseGlobal), lj = hi - r + 1;
      plan.push_back({r, lj, flip});
      flip = false;
      hi = lj - 1;
    }
    plan.push_back({0, 0, false});  // then j = chunk/2 .. 1 in shared memory and registers
  }
  return plan;
}

template <int R>
void fused_global_pass(float* keys, std::uint32_t n, std::uint32_t N, int lj, bool flip, std::uint32_t mask) {
  const std::uint32_t groups = N >> R;
  const unsigned blocks = (groups + kThreads - 1) / kThreads;
  fused_global_kernel<R><<<blocks, kThreads>>>(keys, n, groups, std::uint32_t(lj), flip, mask);
  LABKIT_CHECK_LAUNCH();
}

void sort_fused_keys(float* keys, std::size_t n_in, Order order) {
  const std::uint32_t n = static_cast<std::uint32_t>(n_in), N = next_pow2(n_in), mask = key_mask(order);
  int dev = 0, optin = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const int lc = fused_log_chunk(N, optin);
  const std::uint32_t chunk = std::uint32_t(1) << lc;
  const unsigned threads = chunk / kRow;
  const unsigned blocks = N > chunk ? N / chunk : 1;
  const std::size_t smem = std::size_t(chunk) / 32 * 33 * sizeof(std::uint32_t);
  LABKIT_CUDA(cudaFuncSetAttribute(fused_sort_chunks_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  LABKIT_CUDA(cudaFuncSetAttribute(fused_merge_chunks_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  fused_sort_chunks_kernel<<<blocks, threads, smem>>>(keys, n, chunk, lc, mask);
  LABKIT_CHECK_LAUNCH();
  for (const FusedPass& p : fused_plan(N, lc)) {
    switch (p.r) {
      case 0:
        fused_merge_chunks_kernel<<<blocks, threads, smem>>>(keys, n, chunk, lc, mask);
        LABKIT_CHECK_LAUNCH();
        break;
      case 1: fused_global_pass<1>(keys, n, N, p.lj, p.flip, mask); break;
      case 2: if constexpr (kFuseGlobal >= 2) fused_global_pass<2>(keys, n, N, p.lj, p.flip, mask); break;
      case 3: if constexpr (kFuseGlobal >= 3) fused_global_pass<3>(keys, n, N, p.lj, p.flip, mask); break;
      case 4: if constexpr (kFuseGlobal >= 4) fused_global_pass<4>(keys, n, N, p.lj, p.flip, mask); break;
      default: if constexpr (kFuseGlobal >= 5) fused_global_pass<5>(keys, n, N, p.lj, p.flip, mask); break;
    }
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

// Step 5 -----------------------------------------------------------------------------------------------------
void sort_fused(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 5 (sort_fused)");
  if (n < 2) return;
  sort_fused_keys(keys, n, order);
}

}  // namespace lab04
