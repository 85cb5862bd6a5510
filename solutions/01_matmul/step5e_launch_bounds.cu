// Lab 01 reference, step 5e: step 5d with 16-deep k-tiles, registers capped so that two blocks fit on an SM.
// The kernel (about 110 lines, past the project's ~100-line guide) is step 5d's line for line: only BK, kMinBlocks
// and its __launch_bounds__ differ, and keeping it whole here lets a diff against step5d_double_buffer.cu show
// exactly that.
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

// Step 5d's kernel with a different configuration. A 16-deep k-tile halves the barriers and global-load rounds per
// FLOP, but needs twice the staging registers (a_ld, b_ld): at ~144 registers per thread only one block of 256
// threads fits on an SM, and the kernel gets slower. __launch_bounds__(kThreads, kMinBlocks) tells the compiler to
// keep registers at 65536 / (2 * 256) = 128, so two blocks (16 warps) stay resident, at the price of a few spilled
// registers (visible with -Xptxas -v). Measured on an H100 this alone is no faster than step 5d: it pays off
// together with step 5f's block order (README, "Tuning step 5").
constexpr int BM = 128, BN = 128, BK = 16, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);
constexpr int kMinBlocks = 2;  // resident blocks per SM the register budget must allow
constexpr int kALoads = BM * BK / 4 / kThreads;  // float4 loads per thread for the A tile
constexpr int kBLoads = BK * BN / 4 / kThreads;  // and for the B tile
static_assert(kALoads >= 1 && kBLoads >= 1, "tile too small for the block");

template <bool kVec>
__global__ void __launch_bounds__(kThreads, kMinBlocks) matmul_launch_bounds_kernel(int M, int N, int K,
                                                                                    const float* __restrict__ A,
                                                                                    const float* __restrict__ B,
                                                                                    float* __restrict__ C) {
  __shared__ __align__(16) float As[2][BK][BM];  // transposed: As[buf][k][m] = A[row0 + m][k0 + k]
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int tr = (warp / 4) * 64 + (lane / 4) * 4;  // first row of the upper sub-blocks (+32: the lower ones)
  const int tc = (warp % 4) * 32 + (lane % 4) * 4;  // first column of the left sub-blocks (+16: the right ones)
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  // The next tile travels global -> registers (load_tile) -> shared memory (store_tile).
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

  float acc[TM][TN] = {};
  load_tile(0);
  store_tile(0);
  __syncthreads();  // the first tiles are complete before anyone reads them
  const int tiles = (K + BK - 1) / BK;
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) load_tile((t + 1) * BK);  // in flight while this tile is multiplied
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      // tr and tc are multiples of 4 floats: every float4 below is 16-byte aligned.
      const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][tr]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][tr + 32]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tc]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tc + 16]);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
    }
    // The other buffer was last read in iteration t - 1, which every thread finished before that iteration's
    // barrier: it is free to overwrite now, while slower warps may still read this one. The barrier then makes the
    // new tile visible to all before iteration t + 1 reads it.
    if (t + 1 < tiles) store_tile(buf ^ 1);
    __syncthreads();
  }
  // acc[m][n]: row tr + m (m < 4) or tr + 32 + m - 4, column tc + n (n < 4) or tc + 16 + n - 4.
#pragma unroll
  for (int m = 0; m < TM; ++m) {
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

}  // namespace

void matmul_launch_bounds(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, BN), blocks(M, BM));
  check_grid_y(grid.y);
  // 16-byte accesses need every row of A, B and C to start on a 16-byte boundary.
  const bool vec = K % 4 == 0 && N % 4 == 0 && aligned16(A) && aligned16(B) && aligned16(C);
  if (vec)
    matmul_launch_bounds_kernel<true><<<grid, kThreads>>>(M, N, K, A, B, C);
  else
    matmul_launch_bounds_kernel<false><<<grid, kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
