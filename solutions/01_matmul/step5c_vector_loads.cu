// Lab 01 reference, step 5c: step 5b with 16-byte global loads and stores where the rows allow them.
// The kernel (about 105 lines) is past the project's ~100-line guide on purpose: its one idea, 16-byte accesses with
// a scalar fallback, runs through the tile loads, the shared-memory reads and the update of C, which share the
// staging registers (a_ld, b_ld) and the accumulators; so they stay one kernel (load_tile and store_tile are lambdas
// inside it), which steps 5d to 5f then change in small steps that a diff shows.
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

// Step 5b's kernel, but global memory is read and C updated in 16-byte (float4) accesses: a quarter of the load
// instructions and address computations. Each thread fetches one float4 of the A tile and one of the B tile into
// registers, then stores them into shared memory (A transposed, B as it is). A float4 access needs a 16-byte
// aligned address, so the vector path (kVec) runs only when A, B and C start on a 16-byte boundary and K and N
// are multiples of 4 (every row then starts on one too); any other call takes the scalar path, which loads the
// same float4 element by element.
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);
constexpr int kALoads = BM * BK / 4 / kThreads;  // float4 loads per thread for the A tile
constexpr int kBLoads = BK * BN / 4 / kThreads;  // and for the B tile
static_assert(kALoads >= 1 && kBLoads >= 1, "tile too small for the block");

template <bool kVec>
__global__ void __launch_bounds__(kThreads) matmul_vector_loads_kernel(int M, int N, int K,
                                                                       const float* __restrict__ A,
                                                                       const float* __restrict__ B,
                                                                       float* __restrict__ C) {
  __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m] = A[row0 + m][k0 + k]
  __shared__ __align__(16) float Bs[BK][BN];
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
  auto store_tile = [&]() {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int f = tid + i * kThreads, r = f / (BK / 4), kq = (f % (BK / 4)) * 4;
      As[kq + 0][r] = a_ld[i].x;  // transposed: column k of the A tile becomes a contiguous row
      As[kq + 1][r] = a_ld[i].y;
      As[kq + 2][r] = a_ld[i].z;
      As[kq + 3][r] = a_ld[i].w;
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int f = tid + i * kThreads, kr = f / (BN / 4), cq = (f % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&Bs[kr][cq]) = b_ld[i];
    }
  };

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    load_tile(k0);
    store_tile();
    __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      // tr and tc are multiples of 4 floats: every float4 below is 16-byte aligned.
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][tr]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][tr + 32]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tc]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][tc + 16]);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
    }
    __syncthreads();  // everyone is done reading before the next tile overwrites them
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

void matmul_vector_loads(int M, int N, int K, const float* A, const float* B, float* C) {
  check_sizes(M, N, K);
  const dim3 grid(blocks(N, BN), blocks(M, BM));
  check_grid_y(grid.y);
  // 16-byte accesses need every row of A, B and C to start on a 16-byte boundary.
  const bool vec = K % 4 == 0 && N % 4 == 0 && aligned16(A) && aligned16(B) && aligned16(C);
  if (vec)
    matmul_vector_loads_kernel<true><<<grid, kThreads>>>(M, N, K, A, B, C);
  else
    matmul_vector_loads_kernel<false><<<grid, kThreads>>>(M, N, K, A, B, C);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab01
