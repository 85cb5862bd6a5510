// Lab 06 step 7b: candidate variants of the sm_90 fp64 tensor-core kernel, for tools/tuning/tune06b.cu.
//
// Included by tune06b.cu AFTER solutions/06_ata/step7b_tensor_core_sm90.cu, whose pieces it reuses unchanged: the
// block geometry (lab06::h9: 128 x 128 tiles, rows of 132 doubles, 8 warps of 64 x 32), the MMA wrapper, the
// cp.async helpers and the row-by-row triangle order (upper_tile). Read the shipped kernel first: this one is the
// same computation (same fragment maps, same 16-byte loads and stores, same epilogue), with four things made
// switchable, so that each candidate is one instantiation and a gain can be attributed to one idea:
//
//   kGroup       0: the shipped tile order (row by row along the triangle). G > 0: bands of G tile rows, each
//                walked column by column (see tile_of). The ~132 co-resident tiles (one per SM) then touch ~25
//                panels of A instead of ~44 on average (up to all 64) at 8192; each panel is 8 MiB, A is ten
//                times the L2, so every wave streams its panels from DRAM again: G = 8 cuts that DRAM traffic by
//                ~40 %. Less DRAM traffic is less power on a card that runs DMMA at its power limit, and fewer L2
//                misses for the copies to wait on.
//   kPersistent  false: one block per tile (the shipped launch). true: one block per SM walks its tiles (b,
//                b + grid, ...) with ONE continuous pipeline: the copies of the next tile's first k-tiles are
//                issued while the current tile is still multiplying and are in flight during its epilogue, so
//                there is no per-tile block launch, pipeline fill and drain (a few microseconds of each 0.7 ms
//                tile at 8192), and the epilogue's stores overlap the next tile's loads.
//   kMbar        false: the shipped synchronisation: cp.async groups plus one __syncthreads per k-tile, so all
//                8 warps meet 512 times per tile and the slowest one sets the pace. true: per-stage "full" and
//                "empty" mbarriers. Each thread's copies arrive on the stage's full barrier when they land
//                (cp.async.mbarrier.arrive.noinc), each warp arrives on its empty barrier after its last read of
//                the stage, and a stage is refilled two k-tiles after it was read (so the refill's wait on
//                "empty" is for reads a whole k-tile old): no CTA-wide barrier in the loop, a warp may run up to
//                two k-tiles ahead of the slowest one, and waits only for data that has not landed.
//   KM           4: m16n8k4 with two full fragment sets (the shipped scheme, 2 x 24 registers). 8: m16n8k8
//                with the fragments rotated per m-tile instead: the next m-tile's A fragment is read while this
//                m-tile's 4 MMAs run, and the next k-step's B and first A during the last m-tile, so the live
//                fragments are 2 x B (16 + 16) + 2 x A (8 + 8) = 48 registers, the same as k4's two sets. (The
//                shipped k8 "pf" held two whole k8 sets, 96 registers, and spilled.) Half the MMA instructions
//                and half the accumulator read/write traffic per FMA of k4.
//
// With everything off (KM 4, BK 16, 4 stages, kGroup 0, not persistent, no mbarriers) this is the shipped kernel
// rearranged (a tile loop around the k-tile loop, whose last k-tile is peeled): the "control" row v0 of the harness,
// which should time the same as the shipped function (same registers: 252, no spills).
//
// Checked without a GPU by a CPU emulation of every instantiation the harness uses (a thread per CUDA thread,
// mma.sync and the barriers emulated, cp.async synchronous) on small shapes: exact results, exact symmetry, nothing
// written outside C; the emulation also caught a deliberately broken empty wait and a wrong parity. It cannot
// check the timing of asynchronous copies: the GPU run's checks (tune06b.cu) are the real test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace lab06 {
namespace t6b {

using h9::BT;
using h9::kThreads;
using h9::LD;
using h9::MI;
using h9::NJ;
using h9::WM;
using h9::WN;

#ifndef T6B_EMULATE  // tune06b_emulate.cu supplies CPU versions of these
// ---- mbarrier helpers (PTX ISA: mbarrier, cp.async.mbarrier.arrive; sm_80+, try_wait sm_90) ----
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Plain arrival (release semantics: this thread's earlier shared-memory reads are ordered before it).
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
}
// The arrival fires when every cp.async this thread issued so far has landed. .noinc: it counts as one of the
// arrivals the barrier was initialised with (kThreads per phase: one per thread per fill).
__device__ __forceinline__ void mbar_arrive_when_copied(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(smem_u32(bar)), "r"(parity)
               : "memory");
  return done != 0;
}
// Waits until the phase of the given parity has completed (acquire: the data it guards is visible afterwards).
// A phase that never completes is a bug in the pipeline's bookkeeping: trap after ~2^35 cycles (~20 s) instead
// of hanging the GPU job; the harness then reports a launch failure (rerun with --variants to skip the variant).
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, unsigned parity) {
  if (mbar_try_wait(bar, parity)) return;
  const long long t0 = clock64();
  while (!mbar_try_wait(bar, parity))
    if (clock64() - t0 > (1ll << 35)) __trap();
}
#endif  // T6B_EMULATE

// Upper-triangle tile number b -> (bi, bj), bi <= bj.
// G == 0: the shipped row-by-row order. Consecutive tiles share panel bi, but ~132 co-resident tiles (one per
// SM) span all T column panels: at 8192 every wave reads all of A (512 MiB, 10x the L2) from DRAM again.
// G > 0: bands of G tile rows, top to bottom; within a band, column by column, left to right, each column's tiles
// top to bottom (only bi <= bj: the band's first G columns are a triangle). A window of W consecutive tiles then
// touches about G row panels + W / G column panels: 23-25 for W = 132 and G = 8..16, against ~44 on average (up
// to all 64) row by row (checked on the host: see tools/tuning/tune06b.cu's --order-stats).
// Loops of at most T / G + G steps, once per tile: nothing next to a 0.7 ms tile.
// (__host__ too for G > 0, so that the harness can check on the host that it visits every tile once.)
template <int G>
__host__ __device__ __forceinline__ void tile_of(int b, int T, int& bi, int& bj) {
  if constexpr (G == 0) {
    upper_tile(b, T, bi, bj);
  } else {
    int I0 = 0, h = G < T ? G : T;
    for (;;) {  // find the band: h(h+1)/2 tiles in its triangle, then h per column right of it
      const int count = h * (h + 1) / 2 + h * (T - I0 - h);
      if (b < count) break;
      b -= count;
      I0 += G;
      h = G < T - I0 ? G : T - I0;
    }
    if (b < h * (h + 1) / 2) {  // triangle: column c holds c + 1 tiles
      int c = 0;
      while (b > c) {
        b -= c + 1;
        ++c;
      }
      bi = I0 + b;
      bj = I0 + c;
    } else {
      b -= h * (h + 1) / 2;
      bi = I0 + b % h;
      bj = I0 + h + b / h;
    }
  }
}

// One k-step's A fragment of m-tile mi and the B fragments of all n-tiles, with the shipped maps: a lane holds
// tile rows 2g, 2g + 1 (MMA rows g, g + 8) and tile columns 16p + 2g, 16p + 2g + 1 (n-tiles 2p, 2p + 1, column
// g), one 16-byte load each per k-quad; LD = 132 keeps every quarter warp's 8 loads in 8 different bank groups.
template <int KM>
__device__ __forceinline__ void load_a(const double* sP, int kk, int wr, int g, int q, int mi, double (&a)[KM / 2]) {
#pragma unroll
  for (int v1 = 0; v1 < KM / 4; ++v1) {
    const double2 v = *reinterpret_cast<const double2*>(sP + (kk + 4 * v1 + q) * LD + wr + 2 * g + 16 * mi);
    a[2 * v1] = v.x;
    a[2 * v1 + 1] = v.y;
  }
}
template <int KM>
__device__ __forceinline__ void load_b(const double* sQ, int kk, int wc, int g, int q, double (&b)[NJ][KM / 4]) {
#pragma unroll
  for (int v1 = 0; v1 < KM / 4; ++v1)
#pragma unroll
    for (int p = 0; p < NJ / 2; ++p) {
      const double2 v = *reinterpret_cast<const double2*>(sQ + (kk + 4 * v1 + q) * LD + wc + 2 * g + 16 * p);
      b[2 * p][v1] = v.x;
      b[2 * p + 1][v1] = v.y;
    }
}

// The shipped epilogue, for the tile (bi, bj): 16-byte stores of C(i, j) and of the mirror C(j, i) on interior
// off-diagonal tiles; element by element elsewhere, and on a diagonal tile only i <= j writes (exact symmetry).
template <bool kVec16>
__device__ __forceinline__ void store_tile(const double (&acc)[MI][NJ][4], double* __restrict__ C, int N, int bi,
                                           int bj, int wr, int wc, int g, int q) {
  const int I0 = bi * BT, J0 = bj * BT;
  if (kVec16 && bi != bj && I0 + BT <= N && J0 + BT <= N) {
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

// KM: 4 (two fragment sets) or 8 (fragments rotated per m-tile). BK: rows of A per stage. kStages: shared
// buffers. kVec16: N even and A, C 16-byte aligned. kGroup, kPersistent, kMbar: see the top of the file.
//
// One loop over the block's k-tiles of all its tiles ("iterations": tile after tile, ktiles each). Producer side
// (every thread copies its share, as in the shipped kernel): the copy for iteration it + kAhead is issued at the
// top of iteration it. Barrier mode: kAhead = kStages - 1, it refills the stage of iteration it - 1, which every
// warp finished before the __syncthreads of it - 1's last k-step. Mbarrier mode: kAhead = kStages - 2, it refills
// the stage of iteration it - 2, after waiting on that stage's empty barrier (every warp arrived at the end of
// iteration it - 2: normally long since complete).
// Consumer side: the fragments of the next k-step are read during this one's MMAs; at the last k-step of an
// iteration they come from the next iteration's stage, which is waited for first (barrier: cp.async.wait_group +
// __syncthreads; mbarrier: its full barrier). At the last iteration of a tile, the epilogue stores it and the
// accumulators restart at zero for the next tile, whose copies are already in flight; its first fragments are read
// after the epilogue (see kLast below).
template <int KM, int BK, int kStages, bool kVec16, int kGroup, bool kPersistent, bool kMbar>
__global__ void __launch_bounds__(kThreads, 1)
    ata_v_kernel(int M, int N, const double* __restrict__ A, double* __restrict__ C, int T, int ntiles) {
  static_assert(KM == 4 || KM == 8, "m16n8k4 (two fragment sets) or m16n8k8 (rotated fragments)");
  static_assert(BK % KM == 0, "a stage holds whole MMA k-steps");
  constexpr int kSteps = BK / KM;
  static_assert(KM != 4 || kSteps % 2 == 0, "k4: the two fragment sets alternate evenly within a k-tile");
  constexpr int kAhead = kMbar ? kStages - 2 : kStages - 1;
  static_assert(kAhead >= 1, "at least one k-tile in flight: kStages >= 2 (barrier) or >= 3 (mbarrier)");
#ifdef T6B_EMULATE
  double* const smem = t6b_emulated_smem();  // the emulator's per-block buffer
#else
  extern __shared__ __align__(16) double smem[];
#endif
  __shared__ std::uint64_t full_bar[kStages], empty_bar[kStages];  // mbarrier mode only

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wr = (warp / (BT / WN)) * WM, wc = (warp % (BT / WN)) * WN;
  const int g = lane / 4, q = lane % 4;

  // Copies: as shipped, a thread owns one column (16-byte: a column pair) of both panels and rows r0, r0 +
  // kRowStep, ... of a stage.
  constexpr int kWidth = kVec16 ? 2 : 1;
  constexpr int kPerRow = BT / kWidth;
  constexpr int kRowStep = kThreads / kPerRow;
  static_assert(kThreads % kPerRow == 0 && BK % kRowStep == 0, "stage must split evenly over the threads");
  const int c = kWidth * (tid % kPerRow), r0 = tid / kPerRow;

  const int ktiles = (M + BK - 1) / BK;
  const int stride = kPersistent ? static_cast<int>(gridDim.x) : 1;
  const int my_tiles = kPersistent ? (ntiles - static_cast<int>(blockIdx.x) + stride - 1) / stride : 1;
  const int total = my_tiles * ktiles;  // the host checks that this fits an int

  if constexpr (kMbar) {
    if (tid == 0)
      for (int s = 0; s < kStages; ++s) {
        mbar_init(&full_bar[s], kThreads);
        mbar_init(&empty_bar[s], kThreads / 32);  // one arrival per warp
      }
    __syncthreads();  // initialised barriers visible to every thread before the first copy arrives on one
  }

  // Producer state: the tile and k-tile of the next copy (persistent blocks only: otherwise the k-tile is the
  // iteration number p). Registers are the scarce resource here (the shipped kernel uses 252 of 255): state that
  // can be derived (the iteration of the next copy is it + kAhead; the consumer's (bi, bj) is needed only in the
  // epilogue) is not kept.
  int p_tile = blockIdx.x, p_k = 0, pI0, pJ0;
  {
    int bi, bj;
    tile_of<kGroup>(p_tile, T, bi, bj);
    pI0 = bi * BT;
    pJ0 = bj * BT;
  }
  auto issue = [&](int p) {  // the copy for iteration p (issued in order: p = 0, 1, 2, ...)
    const int s = p % kStages;
    if constexpr (kMbar)  // refill n of stage s waits for the reads of fill n - 1 (phase n - 1 of empty)
      if (p >= kStages) mbar_wait(&empty_bar[s], ((p / kStages) - 1) & 1);
    double* sP = smem + (2 * s) * BK * LD + r0 * LD + c;
    double* sQ = sP + BK * LD;
    const bool inP = pI0 + c < N, inQ = pJ0 + c < N;
    const double* gP = A + pI0 + c;
    const double* gQ = A + pJ0 + c;
#pragma unroll
    for (int l = 0; l < BK / kRowStep; ++l) {
      const int k = (kPersistent ? p_k : p) * BK + r0 + l * kRowStep;
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
    if constexpr (kMbar) mbar_arrive_when_copied(&full_bar[s]);
    if (kPersistent && ++p_k == ktiles) {
      p_k = 0;
      p_tile += stride;
      if (p_tile < ntiles) {
        int bi, bj;
        tile_of<kGroup>(p_tile, T, bi, bj);
        pI0 = bi * BT;
        pJ0 = bj * BT;
      }
    }
  };

  double acc[MI][NJ][4];

#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < total) issue(s);
    if constexpr (!kMbar) cp_async_commit();  // one group per slot, possibly empty: the wait count stays exact
  }
  if constexpr (kMbar) {
    mbar_wait(&full_bar[0], 0);
  } else {
    cp_async_wait<kStages - 2>();
    __syncthreads();
  }

  // Fragments carried from one k-step to the next (see KM above).
  double fa[2][MI][KM / 2], fb[2][NJ][KM / 4];  // k4: two whole sets
  double na[KM / 2], nb[NJ][KM / 4];            // k8: the next k-step's first A and its B
  // The first k-step's fragments of the k-tile in stage sS (into the set the first k-step reads).
  auto load_first = [&](const double* sS) {
    if constexpr (KM == 4) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) load_a<KM>(sS, 0, wr, g, q, mi, fa[0][mi]);
      load_b<KM>(sS + BK * LD, 0, wc, g, q, fb[0]);
    } else {
      load_a<KM>(sS, 0, wr, g, q, 0, na);
      load_b<KM>(sS + BK * LD, 0, wc, g, q, nb);
    }
  };

  int it = 0;  // iterations (k-tiles) consumed so far, over all of this block's tiles

  // One iteration: multiply the k-tile in stage it % kStages. kLast: the last k-tile of a tile, whose last k-step
  // does not read the next k-tile's first fragments: that happens after the epilogue, at the top of the next
  // tile, so that no fragments are live through the epilogue (with them it spills). The body is instantiated
  // twice (kLast false / true) so that the compiler sees this; once per tile, the latency of those few reads is
  // noise.
  auto iteration = [&](auto last) {
    constexpr bool kLast = decltype(last)::value;
    if (it + kAhead < total) issue(it + kAhead);
    if constexpr (!kMbar) cp_async_commit();
    const int cs = it % kStages, ns = (it + 1) % kStages;
    const double* sP = smem + (2 * cs) * BK * LD;
    const double* sN = smem + (2 * ns) * BK * LD;
    // Before the first read of the next iteration's stage; at every k-tile's last k-step, kLast or not: in
    // barrier mode this __syncthreads is also what lets the next iteration refill the stage of this one.
    auto sync_next = [&]() {
      if constexpr (kMbar) {
        if (it + 1 < total) mbar_wait(&full_bar[ns], ((it + 1) / kStages) & 1);
      } else {
        cp_async_wait<kStages - 2>();  // this thread's copies of iteration it + 1 have landed ...
        __syncthreads();               // ... everyone's have, and nobody reads the stage of it - 1 any more
      }
    };

    if constexpr (KM == 4) {
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        const int cur = step % 2;
        if (step + 1 == kSteps) sync_next();
        if (step + 1 < kSteps) {
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) load_a<KM>(sP, (step + 1) * KM, wr, g, q, mi, fa[cur ^ 1][mi]);
          load_b<KM>(sP + BK * LD, (step + 1) * KM, wc, g, q, fb[cur ^ 1]);
        } else if (!kLast) {
          load_first(sN);  // into set cur ^ 1 = 0: kSteps is even
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int nj = 0; nj < NJ; ++nj) mma_m16n8_f64<KM>(acc[mi][nj], fa[cur][mi], fb[cur][nj]);
      }
    } else {
#pragma unroll
      for (int step = 0; step < kSteps; ++step) {
        double b[NJ][KM / 4], a[KM / 2];
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj)
#pragma unroll
          for (int v = 0; v < KM / 4; ++v) b[nj][v] = nb[nj][v];
#pragma unroll
        for (int v = 0; v < KM / 2; ++v) a[v] = na[v];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          double an[KM / 2];
          if (mi + 1 < MI) {
            load_a<KM>(sP, step * KM, wr, g, q, mi + 1, an);  // the next m-tile's A, same k-step
          } else if (step + 1 < kSteps) {
            load_a<KM>(sP, (step + 1) * KM, wr, g, q, 0, na);  // the next k-step's first A and its B
            load_b<KM>(sP + BK * LD, (step + 1) * KM, wc, g, q, nb);
          } else {
            sync_next();
            if (!kLast) load_first(sN);
          }
#pragma unroll
          for (int nj = 0; nj < NJ; ++nj) mma_m16n8_f64<KM>(acc[mi][nj], a, b[nj]);
          if (mi + 1 < MI)
#pragma unroll
            for (int v = 0; v < KM / 2; ++v) a[v] = an[v];
        }
      }
    }
    // Every read of stage cs is behind us (the last ones fed this iteration's MMAs): let it be refilled. One
    // arrival per warp: __syncwarp orders all lanes' reads before lane 0's arrival (which has release semantics),
    // and spares the barrier word 31 of 32 shared-memory atomics.
    if constexpr (kMbar) {
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty_bar[cs]);
    }
    ++it;
  };

  // The block's tiles: blockIdx.x, then (persistent) + gridDim.x, ...
  for (int c_tile = blockIdx.x; c_tile < ntiles; c_tile += stride) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][nj][e] = 0.0;
    load_first(smem + (2 * (it % kStages)) * BK * LD);  // waited for by the prologue or the last sync_next
    for (int kt = 0; kt + 1 < ktiles; ++kt) iteration(std::false_type{});
    iteration(std::true_type{});
    int bi, bj;
    tile_of<kGroup>(c_tile, T, bi, bj);
    store_tile<kVec16>(acc, C, N, bi, bj, wr, wc, g, q);
    if constexpr (!kPersistent) break;
  }
  if constexpr (!kMbar) cp_async_wait<0>();  // only empty groups can be pending; leave no copy behind anyway
}

#ifndef T6B_EMULATE
// ---- host side ----

inline int sm_count() {
  static int n = 0;
  if (n == 0) {
    int dev = 0;
    LABKIT_CUDA(cudaGetDevice(&dev));
    LABKIT_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}

template <int KM, int BK, int kStages, bool kVec16, int kGroup, bool kPersistent, bool kMbar>
void launch_v_as(int M, int N, const double* A, double* C) {
  auto kernel = ata_v_kernel<KM, BK, kStages, kVec16, kGroup, kPersistent, kMbar>;
  constexpr std::size_t bytes = h9::smem_bytes(BK, kStages);
  static bool configured = false;  // the harness uses one device
  if (!configured) {
    LABKIT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    configured = true;
  }
  const int T = static_cast<int>(blocks(N, BT));
  const unsigned ntiles = upper_blocks(T);
  const unsigned grid = kPersistent ? std::min<unsigned>(ntiles, static_cast<unsigned>(sm_count())) : ntiles;
  const unsigned long long per_block = (ntiles + grid - 1) / grid;
  if (per_block * static_cast<unsigned long long>((M + BK - 1) / BK) > 0x7FFFFFFFull)
    throw std::invalid_argument("tune06b: too many k-tiles per block for the int iteration counter");
  kernel<<<grid, kThreads, bytes>>>(M, N, A, C, T, static_cast<int>(ntiles));
  LABKIT_CHECK_LAUNCH();
}

// As the shipped launcher: 16-byte copies and stores where N is even and both arrays are 16-byte aligned.
template <int KM, int BK, int kStages, int kGroup, bool kPersistent, bool kMbar>
void launch_v(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  if (N % 2 == 0 && aligned16(A) && aligned16(C))
    launch_v_as<KM, BK, kStages, true, kGroup, kPersistent, kMbar>(M, N, A, C);
  else
    launch_v_as<KM, BK, kStages, false, kGroup, kPersistent, kMbar>(M, N, A, C);
}
#endif  // T6B_EMULATE

}  // namespace t6b
}  // namespace lab06

// The harness's rows, one place for both users (tune06b.cu times them, tune06b_emulate.cu checks them on the CPU):
// X(name, KM, BK, stages, band G, persistent, mbarriers, legend). The ladder is cumulative: each row adds one idea.
#define T6B_LADDER(X)                                                                                 \
  X(v0, 4, 16, 4, 0, false, false, "control: the shipped configuration in this file's kernel")        \
  X(v1, 4, 16, 4, 8, false, false, "v0 + tiles in bands of 8 rows, column by column (DRAM/L2 reuse)") \
  X(v2, 4, 16, 4, 8, true, false, "v1 + persistent blocks, one pipeline across tiles")                \
  X(v3, 4, 16, 6, 8, true, true, "v2 + mbarrier full/empty pipeline, no __syncthreads, 6 stages")     \
  X(v4, 8, 16, 6, 8, true, true, "v3 with m16n8k8 and fragments rotated per m-tile")
// Ablations (tune06b --more): which part of the ladder carries a gain.
#define T6B_ABLATIONS(X)                                                                                   \
  X(x1, 4, 16, 6, 0, false, true, "v0 + mbarrier pipeline only (6 stages, shipped order, not persistent)") \
  X(x2, 8, 16, 4, 0, false, false, "v0 with k8 rotated fragments only (shipped sync and order)")           \
  X(x3, 4, 16, 5, 8, true, true, "v3 with 5 stages (3 k-tiles in flight, as shipped)")                     \
  X(x4, 4, 16, 4, 16, true, false, "v2 with bands of 16 tile rows")
