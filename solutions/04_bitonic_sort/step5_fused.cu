// Lab 04 reference, step 5: keys only, step 3's structure with several network steps per pass: a thread loads the
// 2^r slots that interact across r consecutive steps into registers, does the r steps there and writes them back
// (one global pass instead of r); in shared memory the same, plus every step with j < 32 inside one thread's row
// of 32 keys.
//
// The network is step 2's "flip" form (mirror first step of each stage, smaller key to the lower index), so that
// padding slots (i >= n) never change; here that follows from integer keys without a branch (see below).
#include <stdexcept>
#include <string>
#include <vector>

#include "bitonic_sort.h"
#include "labkit/labkit.h"

namespace lab04 {

namespace {
// Step 5's pass sizes (steps per fused pass, 1..5): overridable at compile time for tuning (tools/tuning/tune04.cu).
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

// ---------------------------------------------------------------------------------------------------------
// Step 5: several network steps per pass, in registers (keys only).
//
// Keys as bijective integers, as in step 3's shared memory: each float is converted ONCE when it is loaded from
// global memory into labkit::float_sort_key (an unsigned integer that orders like float_order_key and, unlike it,
// converts back exactly: see labkit/ref_sort.h), the integers are sorted in registers and shared memory, and
// converted back when stored. With a bijection, equal keys mean identical floats, so a compare-exchange is just
// (min, max): branch-free. Descending: XOR with all ones (the `mask`).
//
// Padding. Slots >= n hold the largest key 0xFFFFFFFF. A comparator always puts the max at its higher slot and,
// in the mirror form, a comparator that touches a padding slot has it as its higher slot (or both are padding),
// so a padding slot receives max(x, 0xFFFFFFFF) = 0xFFFFFFFF again: padding never changes, and a global pass may
// load it as 0xFFFFFFFF and drop its store. A real key equal to 0xFFFFFFFF (one NaN bit pattern) ties with the
// padding, and a tie of identical bits changes nothing. This is exactly step 2's "skip every comparator that
// touches a padding slot", without a branch.
constexpr std::uint32_t kPadKey = 0xFFFFFFFFu;

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
    s[pad(i)] = base + i < n ? labkit::float_sort_key(__float_as_uint(keys[base + i]), mask) : kPadKey;
  __syncthreads();
}
__device__ __forceinline__ void fused_store_chunk(float* keys, const std::uint32_t* s, std::uint32_t base,
                                                  std::uint32_t n, std::uint32_t chunk, std::uint32_t mask) {
  for (std::uint32_t i = threadIdx.x; i < chunk; i += blockDim.x)
    if (base + i < n) keys[base + i] = __uint_as_float(labkit::float_from_sort_key(s[pad(i)], mask));
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
    v[m] = i < n ? labkit::float_sort_key(__float_as_uint(keys[i]), mask) : kPadKey;
  }
  network_steps<R>(v, flip);
#pragma unroll
  for (int m = 0; m < (1 << R); ++m) {
    const std::uint32_t i = group_slot<R>(g, m, lj, flip);
    if (i < n) keys[i] = __uint_as_float(labkit::float_from_sort_key(v[m], mask));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Host side.
constexpr unsigned kThreads = 256;

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

void sort_fused(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 5 (sort_fused)");
  if (n < 2) return;
  sort_fused_keys(keys, n, order);
}

}  // namespace lab04
