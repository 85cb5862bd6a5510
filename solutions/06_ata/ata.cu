// Lab 06 reference solution: C = A^T A, A row-major M x N double (one copy), C N x N row-major, both triangles.
//
// Notation used in every kernel: C(i, j) = sum_k A(k, i) * A(k, j). The rows i of a block's C tile come from the
// column panel P = A[k][I0 .. I0+T) and its columns j from the panel Q = A[k][J0 .. J0+T). Both panels are
// slices of ROWS of A, so a warp loading them reads consecutive addresses: the "transpose" in A^T costs nothing
// as long as the tiles are stored k-major in shared memory, exactly as they lie in A.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ata.h"
#include "labkit/cublas.h"
#include "labkit/labkit.h"

namespace lab06 {

namespace {

void check_sizes(int M, int N) {
  if (M < 1 || N < 1) throw std::invalid_argument("lab06: M and N must be >= 1");
}

unsigned blocks(int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

void check_grid_y(unsigned y) {
  if (y > 65535) throw std::invalid_argument("lab06: N too large for this kernel's grid (gridDim.y > 65535)");
}

// Blocks on or above the diagonal of a T x T grid of tiles: T(T+1)/2 of them, launched as a 1-D grid.
unsigned upper_blocks(int T) {
  const unsigned long long n = static_cast<unsigned long long>(T) * (T + 1) / 2;
  if (n > 0x7FFFFFFFull) throw std::invalid_argument("lab06: N too large for a 1-D grid of upper tiles");
  return static_cast<unsigned>(n);
}

// Linear index b -> tile (bi, bj) with bi <= bj, row by row: row r holds the T - r tiles bj = r .. T-1.
// A loop of at most T cheap steps per block (T = 171 at N = 8192 with 48-wide tiles): microseconds, against a
// block that runs for a millisecond or more. Consecutive b share bi, so neighbouring blocks reuse panel P in L2.
__device__ __forceinline__ void upper_tile(int b, int T, int& bi, int& bj) {
  int r = 0;
  while (b >= T - r) {
    b -= T - r;
    ++r;
  }
  bi = r;
  bj = r + b;
}

// ---------------------------------------------------------------------------------------------------------
// Step 1b helper: cublasDsyrk filled the upper triangle of row-major C (col >= row); copy it into the lower one.
// A 32x32 tile of the lower part is the transpose of a tile of the upper part: read the upper tile row by row
// (coalesced), write the lower tile row by row (coalesced), and transpose through shared memory in between.
// The row of 33 doubles (264 bytes) shifts consecutive rows by 8 bytes across the banks, so reading a column
// s[tx][r] hits 32 different 8-byte slots; with 32 doubles per row every lane would hit the same bank pair.
constexpr int kMirrorTile = 32;

__global__ void mirror_upper_to_lower_kernel(int N, double* __restrict__ C) {
  __shared__ double s[kMirrorTile][kMirrorTile + 1];
  const int bx = blockIdx.x, by = blockIdx.y;  // destination tile: rows by*32.., cols bx*32..
  if (bx > by) return;                         // entirely above the diagonal: nothing to write
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int R0 = by * kMirrorTile, C0 = bx * kMirrorTile;
  // Source tile: rows C0.., cols R0.. (the transpose position, on or above the diagonal).
  for (int r = ty; r < kMirrorTile; r += blockDim.y) {
    const int row = C0 + r, col = R0 + tx;
    if (row < N && col < N) s[r][tx] = C[std::size_t(row) * N + col];
  }
  __syncthreads();  // the whole source tile is in shared memory before anyone reads a column of it
  for (int r = ty; r < kMirrorTile; r += blockDim.y) {
    const int row = R0 + r, col = C0 + tx;
    // Only strictly-lower elements: on a diagonal tile the upper half is the source and stays as it is.
    if (row < N && col < N && row > col) C[std::size_t(row) * N + col] = s[tx][r];
  }
}

// ---------------------------------------------------------------------------------------------------------
// Step 2: thread (i, j) walks down columns i and j of A. Consecutive threads (threadIdx.x) take consecutive j,
// so the warp's load of A[k][j..j+31] is one 256-byte coalesced access and A[k][i] is a broadcast. Every element
// of A is nevertheless read from L2/DRAM about N times over the grid: memory bound.
__global__ void ata_naive_kernel(int M, int N, const double* __restrict__ A, double* __restrict__ C) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= N || j >= N) return;
  double acc = 0;
  for (int k = 0; k < M; ++k) acc += A[std::size_t(k) * N + i] * A[std::size_t(k) * N + j];
  C[std::size_t(i) * N + j] = acc;
}

// ---------------------------------------------------------------------------------------------------------
// Step 3: a 32x32 block computes a 32x32 tile of C. Per step along k it stages 32 rows of the panels P and Q in
// shared memory (one coalesced load each per thread); each A element then serves 32 threads from shared memory.
constexpr int kTile = 32;

__global__ void ata_tiled_kernel(int M, int N, const double* __restrict__ A, double* __restrict__ C) {
  __shared__ double sP[kTile][kTile];  // sP[k][r] = A(k0 + k, I0 + r)
  __shared__ double sQ[kTile][kTile];  // sQ[k][c] = A(k0 + k, J0 + c)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int I0 = blockIdx.y * kTile, J0 = blockIdx.x * kTile;
  double acc = 0;
  for (int k0 = 0; k0 < M; k0 += kTile) {
    const int k = k0 + ty;
    // Out-of-range elements load as 0: the partial last tile along k and the edges of C need no special case.
    sP[ty][tx] = (k < M && I0 + tx < N) ? A[std::size_t(k) * N + I0 + tx] : 0.0;
    sQ[ty][tx] = (k < M && J0 + tx < N) ? A[std::size_t(k) * N + J0 + tx] : 0.0;
    __syncthreads();  // both tiles complete before anyone reads them
    // sP[kk][ty]: one address per warp (broadcast); sQ[kk][tx]: 32 consecutive doubles, the minimum 2 wavefronts.
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += sP[kk][ty] * sQ[kk][tx];
    __syncthreads();  // everyone is done reading before the next iteration overwrites the tiles
  }
  const int i = I0 + ty, j = J0 + tx;
  if (i < N && j < N) C[std::size_t(i) * N + j] = acc;
}

// ---------------------------------------------------------------------------------------------------------
// Steps 4-6 share one geometry (the seed's): a 48x48 tile of C per block of 16x16 threads, each thread a 3x3
// block of C in registers, rows ty + 16a and columns tx + 16b (a, b = 0..2), panels of BK = 16 rows of A.
// Why strided rows/columns and not a contiguous 3x3: a warp is two values of ty and sixteen of tx, so per k it
// reads sP[k][ty + 16a] (2 addresses: broadcast) and sQ[k][tx + 16b] (16 consecutive doubles = 128 bytes: one
// wavefront, no conflict). A contiguous 3x3 per thread would read sQ with a stride of 3 doubles: 2-way conflicts.
// No padding is needed: both tiles are read along their rows. (Stored transposed, [column][k], a warp would read
// down a column of 16-double rows, all in the same bank pair; that layout would need a row of 17 doubles.)
// Per k a thread does 6 shared loads for 9 FMAs (step 3: 2 loads per FMA).
namespace rb {
constexpr int BT = 48, BK = 16, TT = 3, TX = 16;
constexpr int kThreads = TX * TX;                       // 256
constexpr int kLoads = BK * BT / kThreads;              // 3 elements of each panel per thread and tile
static_assert(BK * BT % kThreads == 0, "panel tile must split evenly over the threads");
static_assert(TT * TX == BT, "a thread's 3x3 block strides over the whole tile");
}  // namespace rb

__global__ void __launch_bounds__(rb::kThreads) ata_regblock_kernel(int M, int N, const double* __restrict__ A,
                                                                    double* __restrict__ C) {
  using namespace rb;
  __shared__ double sP[BK][BT];
  __shared__ double sQ[BK][BT];
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int I0 = blockIdx.y * BT, J0 = blockIdx.x * BT;
  double acc[TT][TT] = {};
  for (int k0 = 0; k0 < M; k0 += BK) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int e = tid + l * kThreads, r = e / BT, c = e % BT, k = k0 + r;  // a warp: 32 consecutive c
      sP[r][c] = (k < M && I0 + c < N) ? A[std::size_t(k) * N + I0 + c] : 0.0;
      sQ[r][c] = (k < M && J0 + c < N) ? A[std::size_t(k) * N + J0 + c] : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      double p[TT], q[TT];
#pragma unroll
      for (int a = 0; a < TT; ++a) p[a] = sP[kk][ty + TX * a];
#pragma unroll
      for (int b = 0; b < TT; ++b) q[b] = sQ[kk][tx + TX * b];
#pragma unroll
      for (int a = 0; a < TT; ++a)
#pragma unroll
        for (int b = 0; b < TT; ++b) acc[a][b] += p[a] * q[b];
    }
    __syncthreads();
  }
#pragma unroll
  for (int a = 0; a < TT; ++a) {
    const int i = I0 + ty + TX * a;
#pragma unroll
    for (int b = 0; b < TT; ++b) {
      const int j = J0 + tx + TX * b;
      if (i < N && j < N) C[std::size_t(i) * N + j] = acc[a][b];  // a warp: 16 consecutive doubles per row
    }
  }
}

// Steps 5 and 6: the step 4 product with the next panel tile in flight. While tile t is multiplied out of
// shared buffer t&1, the loads of tile t+1 go to registers; after the product they are stored into the other
// buffer. That buffer was last read during tile t-1, which every thread finished before the barrier that ended
// iteration t-1, so one barrier per tile suffices (step 4 needs two).
// kUpper: step 6. The grid holds only the tiles with bi <= bj; each writes C(i, j) and its mirror C(j, i).
template <bool kUpper>
__device__ __forceinline__ void prefetch_tile_product(int M, int N, const double* __restrict__ A,
                                                      double* __restrict__ C, int bi, int bj) {
  using namespace rb;
  __shared__ double sP[2][BK][BT];
  __shared__ double sQ[2][BK][BT];
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int I0 = bi * BT, J0 = bj * BT;
  double ldP[kLoads], ldQ[kLoads];
  auto load = [&](int k0) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int e = tid + l * kThreads, r = e / BT, c = e % BT, k = k0 + r;
      ldP[l] = (k < M && I0 + c < N) ? A[std::size_t(k) * N + I0 + c] : 0.0;
      ldQ[l] = (k < M && J0 + c < N) ? A[std::size_t(k) * N + J0 + c] : 0.0;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int e = tid + l * kThreads, r = e / BT, c = e % BT;
      sP[buf][r][c] = ldP[l];
      sQ[buf][r][c] = ldQ[l];
    }
  };

  double acc[TT][TT] = {};
  const int tiles = (M + BK - 1) / BK;
  load(0);
  store(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) load((t + 1) * BK);  // global loads in flight during the product below
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      double p[TT], q[TT];
#pragma unroll
      for (int a = 0; a < TT; ++a) p[a] = sP[buf][kk][ty + TX * a];
#pragma unroll
      for (int b = 0; b < TT; ++b) q[b] = sQ[buf][kk][tx + TX * b];
#pragma unroll
      for (int a = 0; a < TT; ++a)
#pragma unroll
        for (int b = 0; b < TT; ++b) acc[a][b] += p[a] * q[b];
    }
    if (t + 1 < tiles) store(buf ^ 1);
    __syncthreads();  // tile t+1 is complete, and nobody reads buffer buf any more: it can be refilled
  }

#pragma unroll
  for (int a = 0; a < TT; ++a) {
    const int i = I0 + ty + TX * a;
#pragma unroll
    for (int b = 0; b < TT; ++b) {
      const int j = J0 + tx + TX * b;
      if (i >= N || j >= N) continue;
      if (!kUpper) {
        C[std::size_t(i) * N + j] = acc[a][b];
      } else if (bi != bj || i <= j) {
        // Mirror write. On a diagonal tile only i <= j writes (both places), so C(j, i) is the very value of
        // C(i, j): the result is symmetric bit for bit. The mirror store is strided (16 rows per warp); it is
        // O(N^2) traffic against O(M N^2) arithmetic.
        C[std::size_t(i) * N + j] = acc[a][b];
        C[std::size_t(j) * N + i] = acc[a][b];
      }
    }
  }
}

__global__ void __launch_bounds__(rb::kThreads) ata_prefetch_kernel(int M, int N, const double* __restrict__ A,
                                                                    double* __restrict__ C) {
  prefetch_tile_product<false>(M, N, A, C, blockIdx.y, blockIdx.x);
}

__global__ void __launch_bounds__(rb::kThreads) ata_symmetric_kernel(int M, int N, const double* __restrict__ A,
                                                                     double* __restrict__ C, int T) {
  int bi, bj;
  upper_tile(blockIdx.x, T, bi, bj);
  prefetch_tile_product<true>(M, N, A, C, bi, bj);
}

// ---------------------------------------------------------------------------------------------------------
// Step 7: fp64 tensor cores. mma.sync.aligned.m8n8k4.row.col.f64: one warp computes D(8x8) = A(8x4) B(4x8) + C
// with one double of A and one of B per lane and two of C/D:
//   A fragment: row = lane / 4, k = lane % 4      B fragment: k = lane % 4, col = lane / 4
//   C/D:        row = lane / 4, cols 2 * (lane % 4) + {0, 1}
// (PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f64"; CUTLASS cute SM80_8x8x4_F64F64F64F64_TN uses the same.)
// Here the MMA's A is panel P (row m = C row i, k) and its B is panel Q (k, col n = C column j): both read
// straight out of the k-major tiles, no transposition anywhere.
//
// Block: 128x128 tile of C, 8 warps as 2 (rows) x 4 (columns), each warp 64x32 = 8 x 4 MMA tiles, 64 doubles of
// accumulator per lane. Panels of BK = 16 rows of A; two buffers of 2 x 16 x 132 doubles (dynamic shared memory,
// 66 KiB). Row padding: a fragment read touches rows kq..kq+3 and 8 consecutive doubles in each; with 132 doubles
// per row (1056 bytes = 8 x 128 + 32) consecutive rows start 32 bytes apart in the bank cycle, so each half-warp's
// 16 loads cover all 32 banks exactly once (with 128 doubles per row, 4 rows would collide: 4 wavefronts, not 2).
// Symmetry as in step 6: only tiles with bi <= bj, mirrored writes.
namespace tc {
constexpr int BT = 128, BK = 16, PAD = 4, LD = BT + PAD, kThreads = 256;
constexpr int WM = 64, WN = 32;                         // warp tile
constexpr int MI = WM / 8, NJ = WN / 8;                 // 8 x 4 MMA tiles per warp
constexpr int kLoads = BK * BT / kThreads;              // 8 elements of each panel per thread and tile
constexpr std::size_t kSmemBytes = 2 * 2 * BK * LD * sizeof(double);  // 2 buffers x (P, Q)
static_assert(BK * BT % kThreads == 0, "panel tile must split evenly over the threads");
static_assert((BT / WM) * (BT / WN) * 32 == kThreads, "warps must cover the block tile");
}  // namespace tc

__device__ __forceinline__ void mma_m8n8k4_f64(double (&d)[2], double a, double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a), "d"(b));
#else
  __trap();  // unreachable: the host refuses devices below sm_80 before launching
#endif
}

__global__ void __launch_bounds__(tc::kThreads, 1) ata_tensor_core_kernel(int M, int N,
                                                                          const double* __restrict__ A,
                                                                          double* __restrict__ C, int T) {
  using namespace tc;
  extern __shared__ double smem[];
  // sP(buf, k, r) = smem[((buf * 2 + 0) * BK + k) * LD + r], sQ likewise with panel index 1.
  auto sP = [&](int buf, int k) { return smem + ((buf * 2 + 0) * BK + k) * LD; };
  auto sQ = [&](int buf, int k) { return smem + ((buf * 2 + 1) * BK + k) * LD; };

  int bi, bj;
  upper_tile(blockIdx.x, T, bi, bj);
  const int I0 = bi * BT, J0 = bj * BT;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wr = (warp / (BT / WN)) * WM;  // warp's first row within the tile: 0 or 64
  const int wc = (warp % (BT / WN)) * WN;  // warp's first column: 0, 32, 64, 96
  const int g = lane / 4, q = lane % 4;    // fragment coordinates: groupID and thread-in-group

  double ldP[kLoads], ldQ[kLoads];
  auto load = [&](int k0) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int e = tid + l * kThreads, r = e / BT, c = e % BT, k = k0 + r;  // a warp: 32 consecutive c
      ldP[l] = (k < M && I0 + c < N) ? A[std::size_t(k) * N + I0 + c] : 0.0;
      ldQ[l] = (k < M && J0 + c < N) ? A[std::size_t(k) * N + J0 + c] : 0.0;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int e = tid + l * kThreads, r = e / BT, c = e % BT;
      sP(buf, r)[c] = ldP[l];
      sQ(buf, r)[c] = ldQ[l];
    }
  };

  double acc[MI][NJ][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int nj = 0; nj < NJ; ++nj) acc[mi][nj][0] = acc[mi][nj][1] = 0.0;

  const int tiles = (M + BK - 1) / BK;
  load(0);
  store(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) load((t + 1) * BK);  // in flight during the MMAs below
#pragma unroll
    for (int kq = 0; kq < BK; kq += 4) {
      double a[MI], b[NJ];
      const double* rowP = sP(buf, kq + q);  // this lane's k row of the fragment
      const double* rowQ = sQ(buf, kq + q);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) a[mi] = rowP[wr + mi * 8 + g];  // A frag: (m = g, k = q)
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj) b[nj] = rowQ[wc + nj * 8 + g];  // B frag: (k = q, n = g)
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj) mma_m8n8k4_f64(acc[mi][nj], a[mi], b[nj]);
    }
    if (t + 1 < tiles) store(buf ^ 1);  // the other buffer was last read in iteration t-1, before its barrier
    __syncthreads();
  }

#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
    const int i = I0 + wr + mi * 8 + g;  // D frag row
#pragma unroll
    for (int nj = 0; nj < NJ; ++nj) {
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const int j = J0 + wc + nj * 8 + 2 * q + v;  // D frag column
        if (i < N && j < N && (bi != bj || i <= j)) {
          C[std::size_t(i) * N + j] = acc[mi][nj][v];
          C[std::size_t(j) * N + i] = acc[mi][nj][v];  // 8 lanes (g = 0..7) write 64 contiguous bytes
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
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
template <int KM, int BK, int kStages, bool kVec16>
__global__ void __launch_bounds__(h9::kThreads, 1) ata_dmma_sm90_kernel(int M, int N, const double* __restrict__ A,
                                                                        double* __restrict__ C, int T) {
  using namespace h9;
  static_assert(BK % KM == 0, "a stage holds whole MMA k-steps");
  static_assert(kStages >= 2, "at least double buffering");
  constexpr int KQ = KM / 4;  // k-quads per MMA
  extern __shared__ __align__(16) double smem[];
  // Stage s: sP = smem + (2s) * BK * LD, sQ = smem + (2s + 1) * BK * LD; element (k, c) at [k * LD + c].

  int bi, bj;
  upper_tile(blockIdx.x, T, bi, bj);
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

  const int tiles = (M + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) load_tile(s, s * BK);
    cp_async_commit();  // always one group per tile slot (possibly empty): the wait count below stays exact
  }
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile t have landed ...
    __syncthreads();               // ... everyone's have, and nobody reads the buffer of tile t - 1 any more
    {
      const int tn = t + kStages - 1;
      if (tn < tiles) load_tile(tn % kStages, tn * BK);  // into the buffer of tile t - 1
      cp_async_commit();
    }
    const double* sP = smem + (2 * (t % kStages)) * BK * LD;
    const double* sQ = sP + BK * LD;
#pragma unroll
    for (int kk = 0; kk < BK; kk += KM) {
      double a[MI][KM / 2], b[NJ][KM / 4];
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
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int nj = 0; nj < NJ; ++nj) mma_m16n8_f64<KM>(acc[mi][nj], a[mi], b[nj]);
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

int device_major() {
  int dev = 0, major = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return major;
}


// The m8n8k4 kernel (sm_80 and newer): step 7 on an A100, and the fallback.
void launch_dmma_m8n8k4(int M, int N, const double* A, double* C) {
  static bool configured = false;  // 66 KiB of dynamic shared memory is above the 48 KiB default: opt in once
  if (!configured) {
    LABKIT_CUDA(cudaFuncSetAttribute(ata_tensor_core_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(tc::kSmemBytes)));
    configured = true;
  }
  const int T = static_cast<int>(blocks(N, tc::BT));
  ata_tensor_core_kernel<<<upper_blocks(T), tc::kThreads, tc::kSmemBytes>>>(M, N, A, C, T);
  LABKIT_CHECK_LAUNCH();
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Whether the image of the sm_90 kernel that the runtime loaded for this device comes from sm_90 or newer code: a
// binary built for sm_80 only would JIT its compute_80 PTX (binaryVersion 90, ptxVersion 80), in which the kernel
// is a __trap().
template <int KM, int BK, int kStages>
bool dmma_sm90_loaded() {
  static const bool loaded = [] {
    cudaFuncAttributes attr{};
    LABKIT_CUDA(cudaFuncGetAttributes(&attr, ata_dmma_sm90_kernel<KM, BK, kStages, true>));
    return attr.ptxVersion >= 90;
  }();
  return loaded;
}

template <int KM, int BK, int kStages, bool kVec16>
void launch_dmma_sm90_as(int M, int N, const double* A, double* C) {
  constexpr std::size_t bytes = h9::smem_bytes(BK, kStages);
  static bool configured = false;  // above the 48 KiB default: opt in once per instantiation
  if (!configured) {
    LABKIT_CUDA(cudaFuncSetAttribute(ata_dmma_sm90_kernel<KM, BK, kStages, kVec16>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    configured = true;
  }
  const int T = static_cast<int>(blocks(N, h9::BT));
  ata_dmma_sm90_kernel<KM, BK, kStages, kVec16><<<upper_blocks(T), h9::kThreads, bytes>>>(M, N, A, C, T);
  LABKIT_CHECK_LAUNCH();
}

// The sm_90 kernel (the caller checks the device): 16-byte copies and stores where N is even and both arrays
// are 16-byte aligned (every row of A and C then starts on a 16-byte boundary), 8-byte copies otherwise.
template <int KM, int BK, int kStages>
void launch_dmma_sm90(int M, int N, const double* A, double* C) {
  if (N % 2 == 0 && aligned16(A) && aligned16(C))
    launch_dmma_sm90_as<KM, BK, kStages, true>(M, N, A, C);
  else
    launch_dmma_sm90_as<KM, BK, kStages, false>(M, N, A, C);
}

// Step 7's kernel. kTunedSm90 = false: the m8n8k4 kernel on every device. Otherwise, on sm_90: m16n8k<kTunedKM>
// MMAs, kTunedBK rows of A per stage, kTunedStages stages (shared memory: kStages x 2 x BK x 132 doubles; 3 x 32:
// 198 KiB, 4 x 16: 132 KiB; the H100 allows 227 KiB per block). PROVISIONAL: pick by timing .snap/tune06.cu.
constexpr bool kTunedSm90 = true;
constexpr int kTunedKM = 8, kTunedBK = 32, kTunedStages = 3;
}  // namespace

void ata_cublas_gemm(cublasHandle_t handle, int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  // Column-major eyes see the row-major M x N array A as A' = A^T, N x M with leading dimension N. Then
  // A^T A = A' A'^T: the first operand is A' untransposed, the second A' transposed, both with ld N; m = n = N,
  // k = M. C is symmetric, so its row-/column-major readings agree. beta = 0: C is not read (it may hold NaN).
  const double one = 1.0, zero = 0.0;
  LABKIT_CUBLAS(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, N, N, M, &one, A, N, A, N, &zero, C, N));
}

void ata_cublas_syrk(cublasHandle_t handle, int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  // syrk with trans = N computes C = A' A'^T for A' (n x k) = A^T (N x M, ld N): the product we want. It writes
  // one triangle only: LOWER in column-major (element (r, c), r >= c, at C[r + c*N]) is row-major (c, r) with
  // c <= r: the row-major UPPER triangle. The mirror kernel copies it into the lower one.
  const double one = 1.0, zero = 0.0;
  LABKIT_CUBLAS(cublasDsyrk(handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, N, M, &one, A, N, &zero, C, N));
  const dim3 block(kMirrorTile, 8), grid(blocks(N, kMirrorTile), blocks(N, kMirrorTile));
  check_grid_y(grid.y);
  mirror_upper_to_lower_kernel<<<grid, block>>>(N, C);
  LABKIT_CHECK_LAUNCH();
}

void ata_naive(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 block(32, 8), grid(blocks(N, 32), blocks(N, 8));
  check_grid_y(grid.y);
  ata_naive_kernel<<<grid, block>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

void ata_tiled(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 block(kTile, kTile), grid(blocks(N, kTile), blocks(N, kTile));
  check_grid_y(grid.y);
  ata_tiled_kernel<<<grid, block>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

void ata_regblock(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 grid(blocks(N, rb::BT), blocks(N, rb::BT));
  check_grid_y(grid.y);
  ata_regblock_kernel<<<grid, rb::kThreads>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

void ata_prefetch(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const dim3 grid(blocks(N, rb::BT), blocks(N, rb::BT));
  check_grid_y(grid.y);
  ata_prefetch_kernel<<<grid, rb::kThreads>>>(M, N, A, C);
  LABKIT_CHECK_LAUNCH();
}

void ata_symmetric(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const int T = static_cast<int>(blocks(N, rb::BT));
  ata_symmetric_kernel<<<upper_blocks(T), rb::kThreads>>>(M, N, A, C, T);
  LABKIT_CHECK_LAUNCH();
}

void ata_tensor_core(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const int major = device_major();
  if (major < 8)
    throw std::runtime_error("lab06 step 7: fp64 tensor cores (mma.sync m8n8k4 f64) need sm_80 or newer");
  if (kTunedSm90 && major >= 9 && dmma_sm90_loaded<kTunedKM, kTunedBK, kTunedStages>())
    launch_dmma_sm90<kTunedKM, kTunedBK, kTunedStages>(M, N, A, C);
  else
    launch_dmma_m8n8k4(M, N, A, C);
}

}  // namespace lab06
