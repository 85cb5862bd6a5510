// Lab 01 reference solution: C <- C + A*B, row-major float, any M, N, K >= 1.
#include <stdexcept>

#include "labkit/cublas.h"
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

// ---------------------------------------------------------------------------------------------------------
// Step 1: consecutive threads take consecutive ROWS i of one column j. In the k loop a warp reads A[i][k] for
// 32 different rows: 32 addresses K floats apart, 32 separate memory transactions per load. B[k][j] is the
// same address for the whole warp (a broadcast), and the final C update is strided again.
__global__ void matmul_naive_col_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
  C[std::size_t(i) * N + j] += acc;
}

// ---------------------------------------------------------------------------------------------------------
// Step 2: consecutive threads take consecutive COLUMNS j of one row i. Now the warp reads B[k][j..j+31]:
// 128 contiguous bytes, one transaction; A[i][k] is a broadcast; C is updated with one coalesced access.
__global__ void matmul_naive_row_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
  C[std::size_t(i) * N + j] += acc;
}

// ---------------------------------------------------------------------------------------------------------
// Step 3: a 32x32 block computes a 32x32 tile of C. Each step along k stages a 32x32 tile of A and of B in
// shared memory (one coalesced load per thread each), so every global element is read by the block once
// instead of 32 times.
constexpr int kTile = 32;

__global__ void matmul_tiled_kernel(int M, int N, int K, const float* A, const float* B, float* C) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Out-of-range elements load as 0 so that the partial last tile needs no special case in the product.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[std::size_t(row) * K + k0 + tx] : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[std::size_t(k0 + ty) * N + col] : 0.f;
    __syncthreads();  // the tiles are complete before anyone reads them
    // As[ty][k] is one address for the whole warp (broadcast); Bs[k][tx] are 32 consecutive words, 32 banks.
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();  // everyone is done reading before the next iteration overwrites the tiles
  }
  if (row < M && col < N) C[std::size_t(row) * N + col] += acc;
}

// ---------------------------------------------------------------------------------------------------------
// Step 4: register blocking. A block of 256 threads computes a 128x128 tile of C; each thread an 8x8 block
// of it, held in 64 registers. For each k of the 128x8 A tile and 8x128 B tile in shared memory, a thread
// loads 8 values of A's column and 8 of B's row into registers and does the 64 FMAs of their outer product:
// 16 shared loads feed 64 FMAs (step 3: 2 loads per FMA).
namespace rb {
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);
}  // namespace rb

__global__ void __launch_bounds__(rb::kThreads) matmul_regblock_kernel(int M, int N, int K, const float* A,
                                                                       const float* B, float* C) {
  using namespace rb;
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = tid; l < BM * BK; l += kThreads) {
      const int r = l / BK, c = l % BK, gr = row0 + r, gc = k0 + c;
      As[r][c] = (gr < M && gc < K) ? A[std::size_t(gr) * K + gc] : 0.f;
    }
    for (int l = tid; l < BK * BN; l += kThreads) {
      const int r = l / BN, c = l % BN, gr = k0 + r, gc = col0 + c;
      Bs[r][c] = (gr < K && gc < N) ? B[std::size_t(gr) * N + gc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int m = 0; m < TM; ++m) a[m] = As[trow * TM + m][kk];
#pragma unroll
      for (int n = 0; n < TN; ++n) b[n] = Bs[kk][tcol * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    const int r = row0 + trow * TM + m;
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      const int c = col0 + tcol * TN + n;
      if (r < M && c < N) C[std::size_t(r) * N + c] += acc[m][n];
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Step 5: the tuned kernel. Same 128x128 tile and 8x8 results per thread as step 4, plus:
//  - A's tile is stored TRANSPOSED (As[k][m]), so a thread's 8 A values for one k are contiguous: two 16-byte
//    shared loads instead of eight 4-byte ones; B's row likewise.
//  - Each thread's 8x8 block is split into 2x2 sub-blocks of 4x4, 32 rows / 16 columns apart, so that the
//    16-byte shared loads of a warp hit 8 (A) and 4 (B) distinct, contiguous float4s: no bank conflicts.
//  - Global loads are float4 (one 16-byte transaction per thread) when K and N are multiples of 4.
//  - Two shared-memory buffers: the next tile is fetched into registers while the current one is multiplied,
//    then stored into the other buffer; one barrier per tile instead of two.
namespace tn {
constexpr int BM = 128, BN = 128, kThreads = 256;
}  // namespace tn

// Grouped block order (kGroup > 1): consecutive blocks sweep a group of kGroup block-rows column by column, so
// that the A panels of the group and the B panels being swept stay in L2 while they are reused.
template <int kGroup>
__device__ __forceinline__ void block_coords(int& bx, int& by) {
  if constexpr (kGroup <= 1) {
    bx = blockIdx.x;
    by = blockIdx.y;
  } else {
    const int per_group = kGroup * gridDim.x;
    const int bid = blockIdx.y * gridDim.x + blockIdx.x;
    const int first = (bid / per_group) * kGroup;
    const int rows = min(int(gridDim.y) - first, kGroup);
    by = first + (bid % per_group) % rows;
    bx = (bid % per_group) / rows;
  }
}

template <int BK, int kMinBlocks, int kGroup, bool kVec>
__global__ void __launch_bounds__(tn::kThreads, kMinBlocks) matmul_tuned_kernel(int M, int N, int K,
                                                                               const float* __restrict__ A,
                                                                               const float* __restrict__ B,
                                                                               float* __restrict__ C) {
  using tn::BM;
  using tn::BN;
  using tn::kThreads;
  constexpr int kALoads = BM * BK / 4 / kThreads;  // float4 loads per thread for the A tile
  constexpr int kBLoads = BK * BN / 4 / kThreads;  // and for the B tile
  static_assert(kALoads >= 1 && kBLoads >= 1, "tile too small for the block");
  __shared__ __align__(16) float As[2][BK][BM];
  __shared__ __align__(16) float Bs[2][BK][BN];
  int bx, by;
  block_coords<kGroup>(bx, by);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row0 = by * BM, col0 = bx * BN;
  // Compute layout: 2x4 warps of 64x32; within a warp 8x4 lanes, each lane 2x2 sub-blocks of 4x4.
  const int tr = (warp / 4) * 64 + (lane / 4) * 4;  // first row of the lane's upper sub-blocks (+32: lower)
  const int tc = (warp % 4) * 32 + (lane % 4) * 4;  // first column of the left sub-blocks (+16: right)

  float4 a_ld[kALoads], b_ld[kBLoads];
  auto load_tile = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int f = tid + i * kThreads, r = f / (BK / 4), kq = (f % (BK / 4)) * 4;
      const int gr = row0 + r, gk = k0 + kq;
      if constexpr (kVec) {
        a_ld[i] = (gr < M && gk < K) ? *reinterpret_cast<const float4*>(A + std::size_t(gr) * K + gk)
                                     : make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        const float* p = A + std::size_t(gr) * K;
        a_ld[i].x = (gr < M && gk + 0 < K) ? p[gk + 0] : 0.f;
        a_ld[i].y = (gr < M && gk + 1 < K) ? p[gk + 1] : 0.f;
        a_ld[i].z = (gr < M && gk + 2 < K) ? p[gk + 2] : 0.f;
        a_ld[i].w = (gr < M && gk + 3 < K) ? p[gk + 3] : 0.f;
      }
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int f = tid + i * kThreads, kr = f / (BN / 4), cq = (f % (BN / 4)) * 4;
      const int gk = k0 + kr, gc = col0 + cq;
      if constexpr (kVec) {
        b_ld[i] = (gk < K && gc < N) ? *reinterpret_cast<const float4*>(B + std::size_t(gk) * N + gc)
                                     : make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        const float* p = B + std::size_t(gk) * N;
        b_ld[i].x = (gk < K && gc + 0 < N) ? p[gc + 0] : 0.f;
        b_ld[i].y = (gk < K && gc + 1 < N) ? p[gc + 1] : 0.f;
        b_ld[i].z = (gk < K && gc + 2 < N) ? p[gc + 2] : 0.f;
        b_ld[i].w = (gk < K && gc + 3 < N) ? p[gc + 3] : 0.f;
      }
    }
  };
  auto store_tile = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int f = tid + i * kThreads, r = f / (BK / 4), kq = (f % (BK / 4)) * 4;
      As[buf][kq + 0][r] = a_ld[i].x;  // transposed: column k of the A tile becomes a contiguous row
      As[buf][kq + 1][r] = a_ld[i].y;
      As[buf][kq + 2][r] = a_ld[i].z;
      As[buf][kq + 3][r] = a_ld[i].w;
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int f = tid + i * kThreads, kr = f / (BN / 4), cq = (f % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[buf][kr][cq]) = b_ld[i];
    }
  };

  float acc[8][8] = {};
  load_tile(0);
  store_tile(0);
  __syncthreads();
  const int tiles = (K + BK - 1) / BK;
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) load_tile((t + 1) * BK);  // in flight while this tile is multiplied
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][tr]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][tr + 32]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tc]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tc + 16]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int m = 0; m < 8; ++m)
#pragma unroll
        for (int n = 0; n < 8; ++n) acc[m][n] += a[m] * b[n];
    }
    // The other buffer was last read in iteration t-1, which every thread finished before the barrier below
    // of that iteration: it is free to overwrite now, while slower warps may still read this one.
    if (t + 1 < tiles) store_tile(buf ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const int r = row0 + tr + (m < 4 ? m : 32 + m - 4);
    if (r >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
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

// The configuration step 5 uses, chosen by timing variants on an H100 (README, "Tuning step 5"): 16-deep
// k-tiles halve the barriers per FLOP, 2 blocks per SM (registers capped at 128) keep 16 warps in flight, and
// grouped order keeps the reused panels in L2.
constexpr int kTunedBK = 16, kTunedMinBlocks = 2, kTunedGroup = 8;

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

}  // namespace

void matmul_cublas(cublasHandle_t handle, int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  // cuBLAS is column-major. Read as column-major, row-major C (M x N) is C^T (N x M) with leading dimension N,
  // and C^T = B^T A^T, where B^T is B's row-major storage seen as N x K (ld N) and A^T is A's seen as K x M
  // (ld K). So: no transposes, operands swapped, m = N, n = M. beta = 1 accumulates into C.
  const float alpha = 1.f, beta = 1.f;
  LABKIT_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N));
}

void matmul_naive_col(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 block(32, 8), grid(blocks(M, 32), blocks(N, 8));
  check_grid_y(grid.y);
  matmul_naive_col_kernel<<<grid, block>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

void matmul_naive_row(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 block(32, 8), grid(blocks(N, 32), blocks(M, 8));
  check_grid_y(grid.y);
  matmul_naive_row_kernel<<<grid, block>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

void matmul_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 block(kTile, kTile), grid(blocks(N, kTile), blocks(M, kTile));
  check_grid_y(grid.y);
  matmul_tiled_kernel<<<grid, block>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

void matmul_regblock(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, rb::BN), blocks(M, rb::BM));
  check_grid_y(grid.y);
  matmul_regblock_kernel<<<grid, rb::kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

void matmul_tuned(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, tn::BN), blocks(M, tn::BM));
  check_grid_y(grid.y);
  // 16-byte loads need every row of A, B and C to start on a 16-byte boundary.
  const bool vec = K % 4 == 0 && N % 4 == 0 && aligned16(A) && aligned16(B) && aligned16(C);
  if (vec)
    matmul_tuned_kernel<kTunedBK, kTunedMinBlocks, kTunedGroup, true><<<grid, tn::kThreads>>>(M, N, K, A, B, C);
  else
    matmul_tuned_kernel<kTunedBK, kTunedMinBlocks, kTunedGroup, false><<<grid, tn::kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
