// Lab 01 reference, step 6 (expert): step 5f's block tile and block order with 64 x 64 warp tiles, fed by
// asynchronous copies (cp.async) through a pipeline of shared-memory stages instead of step 5d's trip through
// registers, and each thread's operands read one k ahead. The kernel (about 140 lines) is past the project's
// ~100-line guide for step 5d's reason: the copies, the operand reads and the FMAs are the stages of one pipeline
// that share its stage indices, its registers and its one barrier per tile, so they stay one function.
#include <cstdint>
#include <stdexcept>

#include "labkit/labkit.h"
#include "matmul.h"

namespace lab01 {

namespace {

void check_sizes(int M, int N, int K) {
  if (M < 1 || N < 1 || K < 1) throw std::invalid_argument("lab01: M, N and K must be >= 1");
}

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

void check_grid_y(unsigned y) {
  if (y > 65535) throw std::invalid_argument("lab01: matrix too large for this kernel's grid (gridDim.y > 65535)");
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

constexpr int kGroup = 8;  // block-rows per group of the block order (step 5f)

// Step 5f's grouped block order: the blocks in flight share kGroup A panels and a few B panels, which stay in L2.
__device__ __forceinline__ void grouped_tile(int& bx, int& by) {
  const int per_group = kGroup * gridDim.x;
  const int bid = blockIdx.y * gridDim.x + blockIdx.x;
  const int first = (bid / per_group) * kGroup;
  const int rows = min(int(gridDim.y) - first, kGroup);
  by = first + (bid % per_group) % rows;
  bx = (bid % per_group) / rows;
}

// cp.async (sm_80 and newer) moves global memory straight into shared memory, without a register on the way, and
// the thread goes on at once; commit_group closes a group of copies and wait_group<N> waits until at most N of the
// thread's groups are still in flight. A copy of fewer source bytes than kBytes zero-fills the rest: with 0 source
// bytes nothing is read, which is how the edges of the matrices are handled. Older GPUs copy synchronously.
template <int kBytes>
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool inside) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int n = inside ? kBytes : 0;
  if constexpr (kBytes == 16)  // .cg: bypass L1, the tile is read once per block
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n) : "memory");
#else
  if constexpr (kBytes == 16)
    *reinterpret_cast<float4*>(dst) = inside ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
  else
    *dst = inside ? *src : 0.f;
#endif
}

__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void wait_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// The tile shape: BM x BN of C per block, k-tiles BK deep, kStages tiles in flight. Each warp computes 64 x WN of C
// (WN = 32 or 64); its lanes form 8 rows x 4 columns, and each thread owns 4 x 4 sub-blocks spaced 32 rows and 16
// columns apart (step 5b's conflict-free layout): 8 x TN results, TN = WN / 4. A block has (BM / 64) x (BN / WN) warps.
template <int BM, int BN, int BK, int kStages, int WN>
struct AsyncTile {
  static constexpr int kWarpsN = BN / WN;
  static constexpr int TN = WN / 4;
  static constexpr int kThreads = (BM / 64) * kWarpsN * 32;
  // The A tile is stored transposed (As[k][m]) with 4 floats of padding per row: a warp's 4-byte copies write 4 rows
  // of A x 8 k at once, which the padding spreads over 32 different banks (row stride 132 floats = 4 banks mod 32).
  static constexpr int kLdA = BM + 4;
  static constexpr int kStageFloats = BK * (kLdA + BN);
  static constexpr std::size_t kSmemBytes = std::size_t(kStages) * kStageFloats * sizeof(float);
  static_assert((WN == 32 || WN == 64) && BM % 64 == 0 && BN % WN == 0 && BK % 8 == 0,
                "tile must be whole warps and 8-deep k groups");
  // Every thread copies the same k columns of A in each pass, and of B the same columns when its 16-byte pieces
  // cover whole rows of the tile with the block's threads (the 4-byte path of a narrow block may change columns).
  static_assert((BM * BK) % kThreads == 0 && (kThreads / 32) % (BK / 8) == 0, "A tile must split evenly");
  static_assert(kThreads % (BN / 4) == 0, "B tile rows must split evenly over the threads");
  static_assert(kStages >= 2, "a pipeline needs at least two stages");
};

// The order of one k-step's 8 x TN FMAs. The sum is the same in any order: the order changes only how ptxas
// assigns registers and reuses operands, and on the H100 that was worth 0.89 (rows) -> 0.92 (columns) -> 0.96-0.97
// of cuBLAS (paired snake). tools/tuning/tune01.cu times these three, tools/tuning/fma_orders01.py 72 orders
// (README, "Tuning step 6").
enum class FmaOrder {
  rows,          // acc[0][0], acc[0][1], ...: consecutive FMAs share a[m]
  columns,       // acc[0][0], acc[1][0], ...: consecutive FMAs share b[n]
  paired_snake,  // columns, down the 8 rows in one and back up in the next (the FMAs at a turn share a[m] too),
                 // columns 0, 1 of each float4 of b first, then 2, 3
};

template <FmaOrder kOrder, int TN>
__device__ __forceinline__ void outer_product(float (&acc)[8][TN], const float (&a)[8], const float (&b)[TN]) {
#pragma unroll
  for (int i = 0; i < 8 * TN; ++i) {
    const int c = i / 8, r = i % 8;  // the c-th column of FMAs, its r-th row
    int m = r, n = c;
    if constexpr (kOrder == FmaOrder::rows) {
      m = i / TN;
      n = i % TN;
    } else if constexpr (kOrder == FmaOrder::paired_snake) {
      m = c % 2 == 0 ? r : 7 - r;
      n = (c % (TN / 2)) / 2 * 4 + (c / (TN / 2)) * 2 + c % 2;
    }
    acc[m][n] += a[m] * b[n];
  }
}

// C += A * B for one BM x BN tile. The copies of tile t + kStages - 1 are issued before tile t is multiplied, so
// kStages - 1 tiles are on their way while the FMAs run, without the registers step 5d needed to hold them. kVec:
// 16-byte copies of B and 16-byte C updates, legal when every row of B and C starts on a 16-byte boundary; A always
// moves in 4-byte copies, because the copy is also the transpose.
template <int BM, int BN, int BK, int kStages, int WN, int kMinBlocks, FmaOrder kOrder, bool kVec>
__global__ void __launch_bounds__(AsyncTile<BM, BN, BK, kStages, WN>::kThreads, kMinBlocks)
    matmul_async_pipeline_kernel(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C) {
  using T = AsyncTile<BM, BN, BK, kStages, WN>;
  constexpr int kThreads = T::kThreads, kLdA = T::kLdA, TN = T::TN;
  extern __shared__ __align__(16) float smem[];  // kStages x (As[BK][kLdA], Bs[BK][BN])
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int tr = (warp / T::kWarpsN) * 64 + (lane / 4) * 4;  // first row of the upper sub-blocks (+32: the lower)
  const int tc = (warp % T::kWarpsN) * WN + (lane % 4) * 4;  // first column of the left sub-blocks (+16 j: the others)
  int bx, by;
  grouped_tile(bx, by);
  const int row0 = by * BM, col0 = bx * BN;

  // Which elements this thread copies, the same in every k-tile. A: each warp copies pieces of 4 rows x 8
  // consecutive k (four 32-byte sectors of A), lane -> (row lane / 8, k lane % 8); pass i moves down the tile by
  // kARowStep rows. B: 16-byte pieces (4-byte ones when B's rows are not 16-byte aligned), consecutive threads along
  // a row of B; pass i moves down by kBRowStep rows.
  constexpr int kAPasses = BM * BK / kThreads, kARowStep = 4 * (kThreads / 32) / (BK / 8);
  constexpr int kBWidth = kVec ? 4 : 1;  // floats per copy
  constexpr int kBPieces = BK * BN / kBWidth, kBPasses = (kBPieces + kThreads - 1) / kThreads;
  // Each thread keeps one column of B when the threads cover whole rows of pieces (always for 16-byte pieces).
  constexpr bool kBFixedColumn = kThreads % (BN / kBWidth) == 0;
  constexpr int kBRowStep = kBFixedColumn ? kThreads / (BN / kBWidth) : 0;
  const int a_row = (warp / (BK / 8)) * 4 + lane / 8, a_k = (warp % (BK / 8)) * 8 + lane % 8;
  const int b_row = tid / (BN / kBWidth), b_col = (tid % (BN / kBWidth)) * kBWidth;
  const float* a_src = A + std::size_t(min(row0 + a_row, M - 1)) * K + a_k;  // clamped: never read when outside
  const float* b_src = B + std::size_t(b_row) * N + min(col0 + b_col, N - 1);

  // Issues the copies of k-tile t into stage s. Out-of-range elements are not read but zero-filled (copy_async).
  auto load_tile = [&](int t, int s) {
    float* As = smem + s * T::kStageFloats;
    float* Bs = As + BK * kLdA;
    const int k0 = t * BK;
#pragma unroll
    for (int i = 0; i < kAPasses; ++i) {
      const int r = a_row + i * kARowStep;
      const bool ok = row0 + r < M && k0 + a_k < K;
      copy_async<4>(As + a_k * kLdA + r, ok ? a_src + std::size_t(i) * kARowStep * K + k0 : A, ok);
    }
#pragma unroll
    for (int i = 0; i < kBPasses; ++i) {
      if (kBPieces % kThreads != 0 && tid + i * kThreads >= kBPieces) break;  // a tall tile: some threads idle
      if constexpr (kBFixedColumn) {
        const int r = b_row + i * kBRowStep;
        // N % 4 == 0 when kVec: a 4-float piece is wholly inside or wholly outside the matrix.
        const bool ok = k0 + r < K && col0 + b_col < N;
        copy_async<kBWidth * 4>(Bs + r * BN + b_col, ok ? b_src + (std::size_t(k0) + i * kBRowStep) * N : B, ok);
      } else {  // a narrow block copying 4-byte pieces of a wide tile: the column changes from pass to pass
        const int f = tid + i * kThreads, r = f / BN, c = f % BN;
        const bool ok = k0 + r < K && col0 + c < N;
        copy_async<4>(Bs + r * BN + c, ok ? B + std::size_t(k0 + r) * N + col0 + c : B, ok);
      }
    }
  };

  // The thread's operands for one k, in two register sets: the set for k + 1 is read from shared memory while the
  // FMAs of k run, so no warp waits for a shared load even across the barrier between k-tiles.
  float a[2][8], b[2][TN];
  auto load_fragment = [&](const float* stage, int kk, int buf) {
    const float* As = stage + kk * kLdA;
    const float* Bs = stage + BK * kLdA + kk * BN;
    // tr, tc and both row strides are multiples of 4 floats: every float4 below is 16-byte aligned.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 v = *reinterpret_cast<const float4*>(As + tr + 32 * h);
      a[buf][4 * h + 0] = v.x;
      a[buf][4 * h + 1] = v.y;
      a[buf][4 * h + 2] = v.z;
      a[buf][4 * h + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const float4 v = *reinterpret_cast<const float4*>(Bs + tc + 16 * j);
      b[buf][4 * j + 0] = v.x;
      b[buf][4 * j + 1] = v.y;
      b[buf][4 * j + 2] = v.z;
      b[buf][4 * j + 3] = v.w;
    }
  };

  float acc[8][TN] = {};
  const int tiles = (K + BK - 1) / BK;
  // Prologue: the first kStages - 1 tiles in flight, one commit group each (empty groups keep the count regular).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) load_tile(s, s);
    commit_copies();
  }
  wait_copies<kStages - 2>();  // tile 0 has landed (this thread's part) ...
  __syncthreads();             // ... and everyone's
  load_fragment(smem, 0, 0);
  int s_read = 0, s_write = kStages - 1;
  for (int t = 0; t < tiles; ++t) {
    // Refill the stage tile t - 1 used: every warp finished reading it before the barrier that ended tile t - 1.
    if (t + kStages - 1 < tiles) load_tile(t + kStages - 1, s_write);
    commit_copies();
    const float* stage = smem + s_read * T::kStageFloats;
    const int s_next = s_read + 1 == kStages ? 0 : s_read + 1;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk == BK - 1) {
        // Tile t + 1 is needed next: at most kStages - 2 of this thread's groups may be pending (the last kStages - 2
        // issued), so its group has landed, and after the barrier everyone's has.
        wait_copies<kStages - 2>();
        __syncthreads();
      }
      if (kk + 1 < BK)
        load_fragment(stage, kk + 1, (kk + 1) % 2);
      else if (t + 1 < tiles)
        load_fragment(smem + s_next * T::kStageFloats, 0, (kk + 1) % 2);
      outer_product<kOrder>(acc, a[kk % 2], b[kk % 2]);
    }
    s_read = s_next;
    s_write = s_write + 1 == kStages ? 0 : s_write + 1;
  }
  // acc[m][n]: row tr + m (m < 4) or tr + 32 + m - 4, column tc + 16 (n / 4) + n % 4.
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const int r = row0 + tr + (m < 4 ? m : 32 + m - 4);
    if (r >= M) continue;
#pragma unroll
    for (int h = 0; h < TN / 4; ++h) {
      const int c = col0 + tc + 16 * h;
      float* p = C + std::size_t(r) * N + c;
      if (kVec && c + 3 < N) {
        float4 v = *reinterpret_cast<float4*>(p);
        v.x += acc[m][4 * h + 0];
        v.y += acc[m][4 * h + 1];
        v.z += acc[m][4 * h + 2];
        v.w += acc[m][4 * h + 3];
        *reinterpret_cast<float4*>(p) = v;
      } else {
#pragma unroll
        for (int n = 0; n < 4; ++n)
          if (c + n < N) p[n] += acc[m][4 * h + n];
      }
    }
  }
}

// Launches one configuration; the tuning harness (tools/tuning/tune01.cu) calls it with others.
template <int BM, int BN, int BK, int kStages, int WN, int kMinBlocks,
          FmaOrder kOrder = FmaOrder::paired_snake>
void launch_async_pipeline(int M, int N, int K, const float* A, const float* B, float* C) {
  using T = AsyncTile<BM, BN, BK, kStages, WN>;
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, BN), blocks(M, BM));
  check_grid_y(grid.y);
  const bool vec = N % 4 == 0 && aligned16(B) && aligned16(C);
  auto run = [&](auto kernel) {
    // More than 48 KB of dynamic shared memory per block must be asked for; the shipped configuration needs less
    // and makes no extra call per launch.
    if constexpr (T::kSmemBytes > 48 * 1024)
      LABKIT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(T::kSmemBytes)));
    kernel<<<grid, T::kThreads, T::kSmemBytes>>>(M, N, K, A, B, C);
  };
  if (vec)
    run(matmul_async_pipeline_kernel<BM, BN, BK, kStages, WN, kMinBlocks, kOrder, true>);
  else
    run(matmul_async_pipeline_kernel<BM, BN, BK, kStages, WN, kMinBlocks, kOrder, false>);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace

void matmul_async_pipeline(int M, int N, int K, const float* A, const float* B, float* C) {
  // Chosen by tools/tuning/tune01.cu on an H100: 128 x 128 tiles of 4 warps, each warp 64 x 64 (8 x 16 per
  // thread), 8-deep k-tiles, two stages, two blocks per SM, the FMAs in paired-snake order.
  launch_async_pipeline<128, 128, 8, 2, 64, 2>(M, N, K, A, B, C);
}

}  // namespace lab01
