// Lab 04 reference, step 5: keys only, step 3's structure with several network steps per pass: a thread loads the
// 2^r slots that interact across r consecutive steps into registers, does the r steps there and writes them back
// (one global pass instead of r). Inside a chunk every step runs in registers: a thread holds 32 keys that differ in
// five index bits, and shared memory only moves the keys between three such layouts (rows of 32 for j < 32, then
// j = 32..512, then j >= 1024), so a stage of a 2^15-key chunk costs three barriers instead of one per step.
//
// The network is step 2's "flip" form (mirror first step of each stage, smaller key to the lower index), so that
// padding slots (i >= n) never change; here that follows from integer keys without a branch (see below).
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bitonic_sort.h"
#include "labkit/labkit.h"

namespace lab04 {

namespace {
// Step 5's pass sizes (steps per fused pass, 1..5): overridable at compile time for tuning (tools/tuning/tune04.cu).
#ifndef LAB04_FUSE_GLOBAL
#define LAB04_FUSE_GLOBAL 5
#endif
#ifndef LAB04_BALANCED_PASSES
#define LAB04_BALANCED_PASSES 1  // 0: a stage's global passes take kFuseGlobal steps each while they can (5 + 1)
#endif
#ifndef LAB04_ALTERNATE_WALK
#define LAB04_ALTERNATE_WALK 1  // 0: every kernel's blocks walk the array from its start
#endif
constexpr int kFuseGlobal = LAB04_FUSE_GLOBAL;
constexpr bool kBalancedPasses = LAB04_BALANCED_PASSES != 0;
constexpr bool kAlternateWalk = LAB04_ALTERNATE_WALK != 0;
static_assert(kFuseGlobal >= 1 && kFuseGlobal <= 5, "1..5 steps per global pass");

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

// The block's place in its kernel's walk over the array. Blocks start roughly in blockIdx order, so a kernel reads
// the array from one end to the other, and when it ends the L2 holds the part it wrote last (at 2^24 keys, 64 MB
// against the H100's 50 MB of L2). A pass that walked forward again would start where the L2 holds nothing of the
// array and evict the rest before reaching it; walking backward it starts on what is still there. So every kernel
// walks the other way from the one before it (sort_fused_keys flips `backward` after each launch). The blocks of
// one kernel touch disjoint keys, so their order never changes the result.
__device__ __forceinline__ std::uint32_t walk_block(bool backward) {
  return backward ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
}

// The largest pass of up to max_r steps from distance 2^hi down to (at least) 2^lo: the number of steps.
__host__ __device__ __forceinline__ int pass_steps(int hi, int lo, int max_r) {
  return hi - lo + 1 < max_r ? hi - lo + 1 : max_r;
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

// The chunk kernels: every step inside a chunk in registers. A thread holds 32 keys whose slots differ only in five
// index bits b .. b+4 (the "register bits"); its thread index supplies the other bits. Every step whose distance is
// one of those bits is then a compare-exchange between two of its registers. Three such layouts (b = 10, 5 and 0
// for a 2^15 chunk) cover a stage's 15 steps, and shared memory only carries the keys from one layout to the next:
// three barriers and three round trips through shared memory for a stage, where passes over 16-key groups in shared
// memory need five of each (the merge kernel went from 111 to 63 us at 2^24 keys on an H200, tune04).
//
// Layout b: thread t holds slot(t, m) = (t >> b) << (b + 5) | m << b | (t & (2^b - 1)), m = 0 .. 31. For b >= 5 a
// warp's 32 lanes hold, for each m, 32 consecutive slots: coalesced in global memory and, with the padding of
// pad(), conflict-free in shared memory; b = 0 is a row (32 consecutive slots per thread, 33t + m after padding).
template <int B>
__device__ __forceinline__ std::uint32_t layout_slot(std::uint32_t t, int m) {
  return ((t >> B) << (B + 5)) | (std::uint32_t(m) << B) | (t & ((1u << B) - 1));
}
// pad(layout_slot<B>(t, m)) = pad(layout_slot<B>(t, 0)) + m * layout_stride<B>() for b = 0 and b >= 5 (the only
// layouts used): the bit fields do not overlap and m's bits survive the division by 32 whole, so the 32
// shared-memory addresses are one register plus compile-time offsets.
template <int B>
__host__ __device__ constexpr std::uint32_t layout_stride() {
  static_assert(B == 0 || B >= 5, "layouts b = 0 (rows) and b >= 5");
  if constexpr (B == 0) return 1u;
  else return (1u << B) + (1u << (B - 5));
}
template <int B>
__device__ __forceinline__ std::uint32_t layout_addr(std::uint32_t t, int m) {
  return pad(layout_slot<B>(t, 0)) + std::uint32_t(m) * layout_stride<B>();
}

// The steps with distances 2^HI .. 2^LO (B <= LO <= HI <= B+4) of a stage, none of them a mirror step: slot
// layout_slot(t, m) meets layout_slot(t, m + 2^(d-B)), in the same thread.
template <int B, int HI, int LO>
__device__ __forceinline__ void layout_steps(std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int d = HI; d >= LO; --d)
#pragma unroll
    for (int m = 0; m < kRow; ++m)
      if (!(m & (1 << (d - B)))) cmpx(v[m], v[m + (1 << (d - B))]);
}

template <int B>
__device__ __forceinline__ void layout_load(const std::uint32_t* s, std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int m = 0; m < kRow; ++m) v[m] = s[layout_addr<B>(threadIdx.x, m)];
}
template <int B>
__device__ __forceinline__ void layout_store(std::uint32_t* s, const std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int m = 0; m < kRow; ++m) s[layout_addr<B>(threadIdx.x, m)] = v[m];
}

// A stage's mirror step (slot i meets i ^ (2^LK - 1)) in layout B, B <= LK-1 <= B+4: it flips the stage's top bit
// h = LK-1-B of m, the m bits below it and all of the thread's low bits t & (2^B - 1). As in the fused global passes,
// the upper half of the thread's slots (bit h of m set) takes its low bits mirrored; then slot m meets slot
// m ^ (2^(h+1) - 1) of the same thread, and the plain steps after it (bits below h) stay inside one half. Mirrored
// low bits only reverse a warp's run of 32 consecutive slots: still coalesced and conflict-free.
template <int B, int LK>
__device__ __forceinline__ std::uint32_t mirror_addr(std::uint32_t t, int m) {
  constexpr int h = LK - 1 - B;
  return layout_addr<B>((m >> h) & 1 ? t ^ ((1u << B) - 1) : t, m);
}
template <int B, int LK>
__device__ __forceinline__ void mirror_load(const std::uint32_t* s, std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int m = 0; m < kRow; ++m) v[m] = s[mirror_addr<B, LK>(threadIdx.x, m)];
}
template <int B, int LK>
__device__ __forceinline__ void mirror_store(std::uint32_t* s, const std::uint32_t (&v)[kRow]) {
#pragma unroll
  for (int m = 0; m < kRow; ++m) s[mirror_addr<B, LK>(threadIdx.x, m)] = v[m];
}
// Stage 2^LK's steps from its mirror step (distance 2^(LK-1)) down to 2^LO, in layout B (loaded by mirror_load).
template <int B, int LK, int LO>
__device__ __forceinline__ void mirror_steps(std::uint32_t (&v)[kRow]) {
  constexpr int h = LK - 1 - B, M = (2 << h) - 1;
#pragma unroll
  for (int m = 0; m < kRow; ++m)
    if (!((m >> h) & 1)) cmpx(v[m], v[m ^ M]);
  layout_steps<B, LK - 2, LO>(v);
}

// The layouts of a chunk of 2^LC keys (10 <= LC <= 15): rows (b = 0) for bits 0..4, b = 5 for bits 5..9 and
// b = kTop = LC - 5 for bits 10..LC-1 (when fewer than five bits are left, b < 10 keeps a thread's 32 slots in the
// chunk; with LC = 10 there are none).
constexpr int kMid = 5;
template <int LC>
constexpr int kTop = LC - 5;

// Stage 2^LK (6 <= LK <= LC) of the chunk sort: the chunk is in shared memory as rows before and after.
template <int LC, int LK>
__device__ __forceinline__ void sort_stage(std::uint32_t* s, std::uint32_t (&v)[kRow]) {
  constexpr int TOP = kTop<LC>, MID = kMid;
  if constexpr (LK > 10) {
    mirror_load<TOP, LK>(s, v);
    mirror_steps<TOP, LK, 10>(v);
    mirror_store<TOP, LK>(s, v);
    __syncthreads();  // the next layout reads slots that other threads wrote
    layout_load<MID>(s, v);
    layout_steps<MID, 9, 5>(v);
    layout_store<MID>(s, v);
  } else {
    mirror_load<MID, LK>(s, v);
    mirror_steps<MID, LK, 5>(v);
    mirror_store<MID, LK>(s, v);
  }
  __syncthreads();
  row_load(s, v);
  row_merge(v);  // j = 16 .. 1
  row_store(s, v);
}
template <int LC, int... I>
__device__ __forceinline__ void sort_stages(std::uint32_t* s, std::uint32_t (&v)[kRow],
                                            std::integer_sequence<int, I...>) {
  (sort_stage<LC, 6 + I>(s, v), ...);  // stages 2^6 .. 2^LC, in order (each layout is compile-time)
}

// Kernel A of step 5: sort each chunk of 2^LC keys (2^(LC-5) threads, one row each).
template <int LC>
__global__ void __launch_bounds__(1024, 1) fused_sort_chunks_kernel(float* keys, std::uint32_t n,
                                                                    std::uint32_t mask, bool backward) {
  static_assert(LC >= 10 && LC <= 15, "chunks of 2^10 .. 2^15 keys");
  extern __shared__ std::uint32_t s[];
  const std::uint32_t base = walk_block(backward) * (1u << LC);
  if (base >= n) return;  // a chunk of padding only (the same for the whole block: no barrier is skipped)
  fused_load_chunk(keys, s, base, n, 1u << LC, mask);
  std::uint32_t v[kRow];
  row_load(s, v);
  row_sort(v);  // stages 2 .. 32 in registers
  row_store(s, v);
  sort_stages<LC>(s, v, std::make_integer_sequence<int, LC - 5>{});
  fused_store_chunk(keys, s, base, n, 1u << LC, mask);
}

// Kernel B of step 5: the steps j = chunk/2 .. 1 of a stage k > chunk (no mirror step: that was a global pass's).
// The first layout is loaded straight from global memory, the last goes back through shared memory so that the
// store is coalesced.
template <int LC>
__global__ void __launch_bounds__(1024, 1) fused_merge_chunks_kernel(float* keys, std::uint32_t n,
                                                                     std::uint32_t mask, bool backward) {
  static_assert(LC >= 10 && LC <= 15, "chunks of 2^10 .. 2^15 keys");
  constexpr int TOP = kTop<LC>, MID = kMid;
  extern __shared__ std::uint32_t s[];
  const std::uint32_t base = walk_block(backward) * (1u << LC);
  if (base >= n) return;  // a chunk of padding only (the same for the whole block: no barrier is skipped)
  constexpr int FIRST = LC > 10 ? TOP : MID;  // the first layout, loaded from global memory (coalesced: b >= 5)
  std::uint32_t v[kRow];
#pragma unroll
  for (int m = 0; m < kRow; ++m) {
    const std::uint32_t i = base + layout_slot<FIRST>(threadIdx.x, m);
    v[m] = i < n ? labkit::float_sort_key(__float_as_uint(keys[i]), mask) : kPadKey;
  }
  if constexpr (LC > 10) {
    layout_steps<TOP, LC - 1, 10>(v);
    layout_store<TOP>(s, v);
    __syncthreads();  // the next layout reads slots that other threads wrote
    layout_load<MID>(s, v);
  }
  layout_steps<MID, 9, 5>(v);
  layout_store<MID>(s, v);
  __syncthreads();
  row_load(s, v);
  row_merge(v);  // j = 16 .. 1
  row_store(s, v);  // ends with a barrier: the coalesced store below reads other threads' rows
  fused_store_chunk(keys, s, base, n, 1u << LC, mask);
}

// A fused global pass: R steps of one stage (distances 2^(lj+R-1) .. 2^lj, all >= chunk), one group per thread,
// straight from global memory into registers and back: one read and one write of every key for R steps.
template <int R>
__global__ void __launch_bounds__(256) fused_global_kernel(float* keys, std::uint32_t n, std::uint32_t groups,
                                                           std::uint32_t lj, bool flip, std::uint32_t mask,
                                                           bool backward) {
  const std::uint32_t g = walk_block(backward) * blockDim.x + threadIdx.x;
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

// log2 of the chunk: 2^15 keys (1024 threads of 32) when the padded chunk fits the opt-in shared memory (every CUDA
// GPU has room for 2^10). Never below 2^10, so that the chunk kernels' layouts exist: a small array is one chunk
// with padding behind it (padding costs a few compare-exchanges in registers, never a load or a store).
int fused_log_chunk(std::uint32_t N, int optin_bytes) {
  int lc = 15;
  while (lc > 10 && (std::size_t(1) << lc) / 32 * 33 * sizeof(std::uint32_t) > std::size_t(optin_bytes)) --lc;
  int ln = 0;
  while ((std::uint32_t(1) << ln) < N) ++ln;
  if (ln < lc) lc = ln < 10 ? 10 : ln;  // small arrays: one block
  return lc;
}

std::vector<FusedPass> fused_plan(std::uint32_t N, int lc) {
  std::vector<FusedPass> plan;
  int ln = 0;
  while ((std::uint32_t(1) << ln) < N) ++ln;
  for (int lk = lc + 1; lk <= ln; ++lk) {  // stage k = 2^lk: steps j = 2^(lk-1) .. 2^lc in global memory
    // The stage's lk - lc global steps in the fewest passes, as even as possible (6 steps as 3 + 3, not 5 + 1): a
    // pass of r steps holds 2^r keys per thread, and the largest passes move their bytes the slowest.
    const int steps = lk - lc, passes = (steps + kFuseGlobal - 1) / kFuseGlobal;
    bool flip = true;
    for (int q = 0, hi = lk - 1; q < passes; ++q) {
      const int left = hi - lc + 1;
      const int r = kBalancedPasses ? (left + (passes - q) - 1) / (passes - q) : pass_steps(hi, lc, kFuseGlobal);
      const int lj = hi - r + 1;
      plan.push_back({r, lj, flip});
      flip = false;
      hi = lj - 1;
    }
    plan.push_back({0, 0, false});  // then j = chunk/2 .. 1 in registers (fused_merge_chunks_kernel)
  }
  return plan;
}

// The chunk kernels for chunks of 2^lc keys (their layouts are compile-time: see fused_sort_chunks_kernel).
using ChunkKernel = void (*)(float*, std::uint32_t, std::uint32_t, bool);
struct ChunkKernels {
  ChunkKernel sort, merge;
};
template <int LC>
ChunkKernels chunk_kernels_of() {
  return {fused_sort_chunks_kernel<LC>, fused_merge_chunks_kernel<LC>};
}
ChunkKernels chunk_kernels(int lc) {
  switch (lc) {
    case 10: return chunk_kernels_of<10>();
    case 11: return chunk_kernels_of<11>();
    case 12: return chunk_kernels_of<12>();
    case 13: return chunk_kernels_of<13>();
    case 14: return chunk_kernels_of<14>();
    default: return chunk_kernels_of<15>();  // fused_log_chunk returns 10 .. 15
  }
}

template <int R>
void fused_global_pass(float* keys, std::uint32_t n, std::uint32_t N, int lj, bool flip, std::uint32_t mask,
                       bool backward) {
  const std::uint32_t groups = N >> R;
  const unsigned blocks = (groups + kThreads - 1) / kThreads;
  fused_global_kernel<R><<<blocks, kThreads>>>(keys, n, groups, std::uint32_t(lj), flip, mask, backward);
  LABKIT_CHECK_LAUNCH();
}

// optin_bytes: the shared memory a block may have (0: ask the device). The tuning harness passes less, to run the
// smaller chunks that GPUs with less shared memory get.
void sort_fused_keys(float* keys, std::size_t n_in, Order order, int optin_bytes = 0) {
  const std::uint32_t n = static_cast<std::uint32_t>(n_in), N = next_pow2(n_in), mask = key_mask(order);
  int optin = optin_bytes;
  if (optin <= 0) {
    int dev = 0;
    LABKIT_CUDA(cudaGetDevice(&dev));
    LABKIT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  }
  const int lc = fused_log_chunk(N, optin);
  const std::uint32_t chunk = std::uint32_t(1) << lc;
  const unsigned threads = chunk / kRow;
  const unsigned blocks = N > chunk ? N / chunk : 1;
  const std::size_t smem = std::size_t(chunk) / 32 * 33 * sizeof(std::uint32_t);
  const ChunkKernels k = chunk_kernels(lc);
  LABKIT_CUDA(cudaFuncSetAttribute(k.sort, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  LABKIT_CUDA(cudaFuncSetAttribute(k.merge, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  bool backward = false;  // each launch walks the array the other way from the one before (walk_block)
  k.sort<<<blocks, threads, smem>>>(keys, n, mask, backward);
  LABKIT_CHECK_LAUNCH();
  for (const FusedPass& p : fused_plan(N, lc)) {
    backward = kAlternateWalk && !backward;
    switch (p.r) {
      case 0:
        k.merge<<<blocks, threads, smem>>>(keys, n, mask, backward);
        LABKIT_CHECK_LAUNCH();
        break;
      case 1: fused_global_pass<1>(keys, n, N, p.lj, p.flip, mask, backward); break;
      case 2: if constexpr (kFuseGlobal >= 2) fused_global_pass<2>(keys, n, N, p.lj, p.flip, mask, backward); break;
      case 3: if constexpr (kFuseGlobal >= 3) fused_global_pass<3>(keys, n, N, p.lj, p.flip, mask, backward); break;
      case 4: if constexpr (kFuseGlobal >= 4) fused_global_pass<4>(keys, n, N, p.lj, p.flip, mask, backward); break;
      default: if constexpr (kFuseGlobal >= 5) fused_global_pass<5>(keys, n, N, p.lj, p.flip, mask, backward); break;
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
