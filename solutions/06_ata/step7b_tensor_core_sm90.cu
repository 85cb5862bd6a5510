// Lab 06 reference, step 7b: the Hopper fp64 tensor-core shapes (mma.sync m16n8k4, sm_90) fed by a cp.async pipeline,
// 16-byte fragment loads and stores, fragments read one k-step ahead, with step 6's symmetry.
// The kernel (about 140 lines) is past the project's ~100-line guide on purpose: the fragment loads and the
// epilogue's 16-byte stores must use the same map of MMA rows and columns to tile rows and columns (the step's idea,
// explained above the kernel), and with the cp.async pipeline they share the 64 accumulator doubles per lane, so
// they stay one function; the MMA and cp.async instructions are the small helpers beside it.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

namespace {

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

// Blocks on or above the diagonal of a T x T grid of tiles: T(T+1)/2 of them, launched as a 1-D grid.
unsigned upper_blocks(int T) {
  const unsigned long long n = static_cast<unsigned long long>(T) * (T + 1) / 2;
  if (n > 0x7FFFFFFFull) throw std::invalid_argument("lab06: N too large for a 1-D grid of upper tiles");
  return static_cast<unsigned>(n);
}

// Linear index b -> tile (bi, bj) with bi <= bj, for a 1-D grid of the upper tiles. The order decides which panels
// of A the blocks resident at one time share in L2 (a wave is one block per SM: 132 tiles on an H100).
// kBand == 0: row by row (row r holds the T - r tiles bj = r .. T-1): a wave shares one row panel P and reads up to
// 132 distinct column panels Q. kBand = h > 0: bands of h tile rows, each band column by column (rows ascending
// within a column): a wave reads about h row panels and 132 / h column panels. A loop of at most T cheap steps per
// block (T = 64 at N = 8192 with 128-wide tiles): microseconds, against a block that runs for a millisecond or more.
template <int kBand>
__device__ __forceinline__ void upper_tile(int b, int T, int& bi, int& bj) {
  if constexpr (kBand == 0) {
    int r = 0;
    while (b >= T - r) {
      b -= T - r;
      ++r;
    }
    bi = r;
    bj = r + b;
  } else {
    // Band rows r0 .. r0 + h - 1: its first h columns hold 1 .. h tiles (a triangle), every later column h.
    int r0 = 0, h = min(kBand, T);
    while (b >= h * (h + 1) / 2 + h * (T - r0 - h)) {
      b -= h * (h + 1) / 2 + h * (T - r0 - h);
      r0 += h;
      h = min(kBand, T - r0);
    }
    if (b < h * (h + 1) / 2) {
      int col = 0;
      while (b > col) b -= ++col;  // column r0 + col holds col + 1 tiles
      bi = r0 + b;
      bj = r0 + col;
    } else {
      b -= h * (h + 1) / 2;
      bi = r0 + b % h;
      bj = r0 + h + b / h;
    }
  }
}

int current_device() {
  int dev = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  return dev;
}

// A per-device yes/no/unknown, for facts that depend on the device (its compute capability, the code image the
// runtime loaded for it, a kernel attribute set on it). Host threads may race: each slot is one atomic, and two
// threads that both find "unknown" compute and store the same answer. Devices past the table are never cached.
constexpr int kDeviceSlots = 64;
using DeviceFlags = std::atomic<int>[kDeviceSlots];  // 0 unknown, 1 yes, 2 no
template <class Compute>
bool per_device(DeviceFlags& flags, int dev, Compute compute) {
  if (dev < kDeviceSlots)
    if (const int v = flags[dev].load(std::memory_order_relaxed)) return v == 1;
  const bool yes = compute();
  if (dev < kDeviceSlots) flags[dev].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Step 7, Hopper path: the sm_90 DMMA shapes, a cp.async pipeline and 16-byte accesses everywhere.
//
// mma.sync.aligned.m16n8k{4,8,16}.row.col.f64 (PTX ISA 7.8, sm_90 only): one warp computes D(16x8) += A(16xK) B(Kx8)
// with K/2 doubles of A, K/4 of B and 4 of C/D per lane (g = lane / 4, q = lane % 4):
//   A fragment a[v], v = v0 + 2 * v1:  row g + 8 * v0,  k q + 4 * v1      (v0 = 0..1, v1 = 0..K/4-1)
//   B fragment b[v]:                   k q + 4 * v,     col g
//   C/D d[c]:                          row g + 8 * (c / 2),  col 2 * q + c % 2
// Source: CUTLASS include/cute/atom/mma_traits_sm90.hpp (SM90_16x8x{4,8,16}_F64F64F64F64_TN: ALayout
// ((4,8),(2,K/4)):((16,1),(8,64)), BLayout ((4,8),K/4):((8,1),32), CLayout ((4,8),(2,2)):((32,1),(16,8)), column-
// major (m,k)/(n,k)/(m,n) indices) and include/cute/arch/mma_sm90.hpp for the instruction strings; this agrees with
// the PTX ISA's "Matrix Fragments for mma.m16n8k{4,8,16} with .f64". Against m8n8k4 each instruction does 4x the
// work (16x8x8 = 1024 FMAs for m16n8k8) for 1.5x the operands per lane.
//
// 16-byte fragment loads. Which row of C an MMA row stands for is ours to choose, as long as the epilogue uses the
// same map. Map MMA row g + 8 * v0 of an m-tile to tile row 2 * g + v0: a lane's a[v0 = 0] and a[v0 = 1] are then
// the adjacent doubles sP[k][2g], sP[k][2g + 1]: one 16-byte load. Same trick for B: the column g of the n-tile
// pair (2p, 2p + 1) is tile column 16 p + 2 g + {0, 1}. Bank check (16-byte loads are served a quarter-warp at a
// time: lanes 4g + q with g in {2h, 2h+1}, q = 0..3): lane (g, q) reads row kq + q at double offset 2g (+16 per
// tile), i.e. 16-byte bank slot (q * LD / 2 + g) mod 8 = 2q + g mod 8 for LD = 132 (66 = 2 mod 8): the quarter
// warp's 8 lanes hit the 8 slots once each (conflict-free). With LD = 128 they would all be in 2 slots.
// The epilogue then holds, per lane and m-tile half r, the 4 consecutive columns 16p + 4q + {0..3} of tile row
// 16 mi + 2g + r, and per column the 2 consecutive rows 2g, 2g+1: 16-byte stores for C(i, j) and C(j, i) alike.
//
// Pipeline: kStages shared buffers filled by cp.async (16 bytes per copy when N is even and A 16-byte aligned,
// else 8; rows past M and columns past N are zero-filled by the copy itself via src-size 0), kStages - 1 tiles in
// flight while one is multiplied, one barrier per tile: the buffer refilled in iteration t is the one read in
// iteration t - 1, which every warp finished before this iteration's barrier. No staging registers (the m8n8k4
// kernel spends 32 on them).
// Block tile 128x128, 8 warps of 64x32 (4 m-tiles x 4 n-tiles, 64 accumulator doubles per lane), 1 block per SM.
namespace h9 {
constexpr int BT = 128, PAD = 4, LD = BT + PAD, kThreads = 256;
constexpr int WM = 64, WN = 32;
constexpr int MI = WM / 16, NJ = WN / 8;  // 4 m-tiles of 16 rows, 4 n-tiles of 8 columns (2 pairs)
static_assert((BT / WM) * (BT / WN) * 32 == kThreads, "warps must cover the block tile");
static_assert(LD % 2 == 0 && (LD / 2) % 8 == 2, "row padding: 16-byte fragment loads must be conflict-free");
constexpr std::size_t smem_bytes(int BK, int stages) { return std::size_t(stages) * 2 * BK * LD * sizeof(double); }
}  // namespace h9

template <int KM>
__device__ __forceinline__ void mma_m16n8_f64(double (&d)[4], const double (&a)[KM / 2], const double (&b)[KM / 4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (KM == 4) {
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]));
  } else if constexpr (KM == 8) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
  } else {
    static_assert(KM == 16, "m16n8k4, m16n8k8 or m16n8k16");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
  }
#else
  __trap();  // unreachable: the host launches this kernel only where its sm_90 image was loaded
#endif
}

// cp.async with src-size: bytes past src_bytes are zero-filled, and src_bytes = 0 reads nothing at all.
__device__ __forceinline__ void cp_async_16(double* smem, const double* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_8(double* smem, const double* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// KM: the MMA's k (4, 8 or 16). BK: rows of A per pipeline stage. kVec16: N even, A and C 16-byte aligned.
// kPrefetch: the fragments of the next k-step are read from shared memory while this step's MMAs run (two register
// sets), and at the last k-step of a tile the barrier comes before the reads of the next tile's first fragments.
template <int KM, int BK, int kStages, bool kVec16, bool kPrefetch = false, int kBand = 0>
__global__ void __launch_bounds__(h9::kThreads, 1) ata_dmma_sm90_kernel(int M, int N, const double* __restrict__ A,
                                                                        double* __restrict__ C, int T) {
  using namespace h9;
  static_assert(BK % KM == 0, "a stage holds whole MMA k-steps");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(!kPrefetch || (BK / KM) % 2 == 0, "the two fragment sets alternate evenly within a tile");
  constexpr int KQ = KM / 4;  // k-quads per MMA
  extern __shared__ __align__(16) double smem[];
  // Stage s: sP = smem + (2s) * BK * LD, sQ = smem + (2s + 1) * BK * LD; element (k, c) at [k * LD + c].

  int bi, bj;
  upper_tile<kBand>(blockIdx.x, T, bi, bj);
  const int I0 = bi * BT, J0 = bj * BT;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wr = (warp / (BT / WN)) * WM;  // 0 or 64
  const int wc = (warp % (BT / WN)) * WN;  // 0, 32, 64, 96
  const int g = lane / 4, q = lane % 4;

  // Copies: each thread owns one column (16-byte: a column pair) c of both panels and the rows r0, r0 + kRowStep,
  // ... of a stage; a warp's copies of one row are contiguous (512 or 256 bytes).
  constexpr int kWidth = kVec16 ? 2 : 1;                // doubles per copy
  constexpr int kPerRow = BT / kWidth;                  // copies per row of a panel
  constexpr int kRowStep = kThreads / kPerRow;          // rows covered by one pass of the block: 4 or 2
  static_assert(kThreads % kPerRow == 0 && BK % kRowStep == 0, "stage must split evenly over the threads");
  const int c = kWidth * (tid % kPerRow), r0 = tid / kPerRow;
  // N even (kVec16) and I0 + c even: the pair (c, c + 1) is entirely inside or entirely outside the matrix.
  const bool inP = I0 + c < N, inQ = J0 + c < N;
  const double* gP = A + I0 + c;
  const double* gQ = A + J0 + c;
  auto load_tile = [&](int s, int k0) {
    double* sP = smem + (2 * s) * BK * LD + r0 * LD + c;
    double* sQ = sP + BK * LD;
#pragma unroll
    for (int l = 0; l < BK / kRowStep; ++l) {
      const int k = k0 + r0 + l * kRowStep;
      const std::size_t off = std::size_t(k) * N;
      const bool vp = inP && k < M, vq = inQ && k < M;  // invalid: src-size 0, nothing read, zeros stored
      if constexpr (kVec16) {
        cp_async_16(sP + l * kRowStep * LD, vp ? gP + off : A, vp);
        cp_async_16(sQ + l * kRowStep * LD, vq ? gQ + off : A, vq);
      } else {
        cp_async_8(sP + l * kRowStep * LD, vp ? gP + off : A, vp);
        cp_async_8(sQ + l * kRowStep * LD, vq ? gQ + off : A, vq);
      }
    }
  };

  double acc[MI][NJ][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int nj = 0; nj < NJ; ++nj)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][nj][c] = 0.0;

  // One k-step's fragments: for k-quad v1, a lane's A rows 2g, 2g + 1 and B columns 2g, 2g + 1 (see above).
  auto load_fragments = [&](const double* sP, const double* sQ, int kk, double (&a)[MI][KM / 2],
                            double (&b)[NJ][KM / 4]) {
#pragma unroll
    for (int v1 = 0; v1 < KQ; ++v1) {
      const double* rowP = sP + (kk + 4 * v1 + q) * LD + wr + 2 * g;  // k = q + 4 v1, tile rows 2g, 2g + 1
      const double* rowQ = sQ + (kk + 4 * v1 + q) * LD + wc + 2 * g;  // k = q + 4 v1, tile cols 2g, 2g + 1
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const double2 v = *reinterpret_cast<const double2*>(rowP + 16 * mi);
        a[mi][2 * v1] = v.x;      // MMA row g     (v0 = 0)
        a[mi][2 * v1 + 1] = v.y;  // MMA row g + 8 (v0 = 1)
      }
#pragma unroll
      for (int p = 0; p < NJ / 2; ++p) {
        const double2 v = *reinterpret_cast<const double2*>(rowQ + 16 * p);
        b[2 * p][v1] = v.x;      // n-tile 2p,     column g
        b[2 * p + 1][v1] = v.y;  // n-tile 2p + 1, column g
      }
    }
  };

  const int tiles = (M + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) load_tile(s, s * BK);
    cp_async_commit();  // always one group per tile slot (possibly empty): the wait count below stays exact
  }
  if constexpr (kPrefetch) {
    double fa[2][MI][KM / 2], fb[2][NJ][KM / 4];
    cp_async_wait<kStages - 2>();
    __syncthreads();
    load_fragments(smem, smem + BK * LD, 0, fa[0], fb[0]);
    for (int t = 0; t < tiles; ++t) {
      // The buffer of tile t - 1: every warp read it before the barrier of tile t - 1's last k-step.
      const int tn = t + kStages - 1;
      if (tn < tiles) load_tile(tn % kStages, tn * BK);
      cp_async_commit();
      const double* sP = smem + (2 * (t % kStages)) * BK * LD;
      const double* sN = smem + (2 * ((t + 1) % kStages)) * BK * LD;
#pragma unroll
      for (int kk = 0; kk < BK; kk += KM) {
        const int cur = (kk / KM) % 2;
        if (kk + KM == BK) {  // tile t + 1's copies: landed (at most kStages - 2 groups pending) and visible
          cp_async_wait<kStages - 2>();
          __syncthreads();
        }
        if (kk + KM < BK)
          load_fragments(sP, sP + BK * LD, kk + KM, fa[cur ^ 1], fb[cur ^ 1]);
        else if (t + 1 < tiles)
          load_fragments(sN, sN + BK * LD, 0, fa[cur ^ 1], fb[cur ^ 1]);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int nj = 0; nj < NJ; ++nj) mma_m16n8_f64<KM>(acc[mi][nj], fa[cur][mi], fb[cur][nj]);
      }
    }
  } else {
    for (int t = 0; t < tiles; ++t) {
      cp_async_wait<kStages - 2>();  // this thread's copies of tile t have landed ...
      __syncthreads();               // ... everyone's have, and nobody reads the buffer of tile t - 1 any more
      const int tn = t + kStages - 1;
      if (tn < tiles) load_tile(tn % kStages, tn * BK);  // into the buffer of tile t - 1
      cp_async_commit();
      const double* sP = smem + (2 * (t % kStages)) * BK * LD;
#pragma unroll
      for (int kk = 0; kk < BK; kk += KM) {
        double a[MI][KM / 2], b[NJ][KM / 4];
        load_fragments(sP, sP + BK * LD, kk, a, b);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int nj = 0; nj < NJ; ++nj) mma_m16n8_f64<KM>(acc[mi][nj], a[mi], b[nj]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups can be pending here; leave no copy behind anyway

  // acc[mi][nj][c] is C(i, j) with i = I0 + wr + 16 mi + 2g + c / 2 and j = J0 + wc + 16 (nj / 2) + 4q + 2 (c % 2)
  // + nj % 2 (D row g + 8 (c / 2) -> tile row 2g + c / 2; D column 2q + c % 2 of n-tile nj -> 16 (nj / 2) + 2 (2q +
  // c % 2) + nj % 2).
  if (kVec16 && bi != bj && I0 + BT <= N && J0 + BT <= N) {
    // Interior off-diagonal tile: 16-byte stores. Direct: per (mi, r, p) the 4 columns 16p + 4q + {0..3} of one
    // row. Mirror: per column j the rows 2g, 2g + 1; the 8 lanes of one q fill 128 contiguous bytes of row j.
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int p = 0; p < NJ / 2; ++p) {
        const int j = J0 + wc + 16 * p + 4 * q;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = I0 + wr + 16 * mi + 2 * g + r;
          double2* dst = reinterpret_cast<double2*>(C + std::size_t(i) * N + j);
          dst[0] = make_double2(acc[mi][2 * p][2 * r], acc[mi][2 * p + 1][2 * r]);
          dst[1] = make_double2(acc[mi][2 * p][2 * r + 1], acc[mi][2 * p + 1][2 * r + 1]);
        }
        const int i = I0 + wr + 16 * mi + 2 * g;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int v = 0; v < 2; ++v)
            *reinterpret_cast<double2*>(C + std::size_t(j + 2 * h + v) * N + i) =
                make_double2(acc[mi][2 * p + v][h], acc[mi][2 * p + v][2 + h]);
      }
    }
  } else {
    // Diagonal and edge tiles: element by element. On a diagonal tile only i <= j writes (both places), so
    // C(j, i) is the very value of C(i, j): exact symmetry.
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = I0 + wr + 16 * mi + 2 * g + c / 2;
          const int j = J0 + wc + 16 * (nj / 2) + 4 * q + 2 * (c % 2) + nj % 2;
          if (i < N && j < N && (bi != bj || i <= j)) {
            C[std::size_t(i) * N + j] = acc[mi][nj][c];
            C[std::size_t(j) * N + i] = acc[mi][nj][c];
          }
        }
  }
}

// Whether the image of the sm_90 kernel that the runtime loaded for the current device comes from sm_90 or newer
// code: a program built for sm_80 only would JIT its compute_80 PTX (ptxVersion 80), in which the kernel is a
// __trap().
template <int KM, int BK, int kStages, bool kPrefetch, int kBand>
bool dmma_sm90_loaded(int dev) {
  static DeviceFlags flags;
  return per_device(flags, dev, [] {
    cudaFuncAttributes attr{};
    LABKIT_CUDA(cudaFuncGetAttributes(&attr, ata_dmma_sm90_kernel<KM, BK, kStages, true, kPrefetch, kBand>));
    return attr.ptxVersion >= 90;
  });
}

template <int KM, int BK, int kStages, bool kVec16, bool kPrefetch, int kBand>
void launch_dmma_sm90_as(int M, int N, const double* A, double* C) {
  constexpr std::size_t bytes = h9::smem_bytes(BK, kStages);
  static DeviceFlags configured;  // above the 48 KiB default: opt in once per device and instantiation
  per_device(configured, current_device(), [] {
    LABKIT_CUDA(cudaFuncSetAttribute(ata_dmma_sm90_kernel<KM, BK, kStages, kVec16, kPrefetch, kBand>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
  });
  const int T = static_cast<int>(blocks(N, h9::BT));
  ata_dmma_sm90_kernel<KM, BK, kStages, kVec16, kPrefetch, kBand>
      <<<upper_blocks(T), h9::kThreads, bytes>>>(M, N, A, C, T);
  LABKIT_CHECK_LAUNCH();
}

// 16-byte copies and stores where N is even and both arrays are 16-byte aligned (every row of A and C then starts
// on a 16-byte boundary), 8-byte copies otherwise: the gates pass pointers one double off a 16-byte boundary.
template <int KM, int BK, int kStages, bool kPrefetch = false, int kBand = 0>
void launch_dmma_sm90(int M, int N, const double* A, double* C) {
  if (N % 2 == 0 && aligned16(A) && aligned16(C))
    launch_dmma_sm90_as<KM, BK, kStages, true, kPrefetch, kBand>(M, N, A, C);
  else
    launch_dmma_sm90_as<KM, BK, kStages, false, kPrefetch, kBand>(M, N, A, C);
}

// The configuration ata_tensor_core_sm90 uses: m16n8k<kTunedKM> MMAs, kTunedBK rows of A per stage, kTunedStages
// stages (shared memory: kStages x 2 x BK x 132 doubles; 4 x 16: 132 KiB of the H100's 227 KiB per block), the next
// k-step's fragments read during the MMAs; chosen by timing the variants with tools/tuning/tune06.cu on an H100.
// With the prefetch the small k4 shape wins: its fragments take 48 registers in two sets where k8's take 96, and
// k8's prefetch spills.
constexpr int kTunedKM = 4, kTunedBK = 16, kTunedStages = 4;
constexpr bool kTunedPrefetch = true;
// Tiles in bands of 8 tile rows (upper_tile): tools/tuning/tune06.cu --bands on an H200 (2026-11-28), against
// cublasDsyrk at 8192 in three rounds: row by row 0.890 / 0.889 / 0.900, bands of 8 0.905 / 0.907 / 0.906 (bands of
// 2: 0.894-0.898, 4: 0.897-0.910, 16: 0.892-0.907). About 1.5 %: the tiles' order is not what keeps it from Dsyrk.
constexpr int kTunedBand = 8;

}  // namespace

void ata_tensor_core_sm90(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const int dev = current_device();
  int major = 0;
  LABKIT_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9)
    throw std::runtime_error("lab06 step 7b: mma.sync m16n8k4 f64 exists on sm_90 only (this device is sm_" +
                             std::to_string(major) + "x)");
  if (!dmma_sm90_loaded<kTunedKM, kTunedBK, kTunedStages, kTunedPrefetch, kTunedBand>(dev))
    throw std::runtime_error("lab06 step 7b: this program holds no sm_90 code for the kernel (built for older "
                             "architectures only): configure with CMAKE_CUDA_ARCHITECTURES=native (the default) "
                             "or a list that includes 90");
  launch_dmma_sm90<kTunedKM, kTunedBK, kTunedStages, kTunedPrefetch, kTunedBand>(M, N, A, C);
}

}  // namespace lab06
