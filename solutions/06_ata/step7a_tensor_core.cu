// Lab 06 reference, step 7a: fp64 tensor cores (mma.sync m8n8k4, sm_80 and newer) with step 6's symmetry.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

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

// Linear index b -> tile (bi, bj) with bi <= bj, row by row: row r holds the T - r tiles bj = r .. T-1.
// A loop of at most T cheap steps per block (T = 64 at N = 8192 with 128-wide tiles): microseconds, against a
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
  __trap();  // unreachable: the host launches this kernel only where its sm_80+ image was loaded
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

// The code the runtime loaded for this kernel on the current device must come from sm_80+ PTX or SASS: a program built
// only for older architectures (CMAKE_CUDA_ARCHITECTURES without 80 or newer, e.g. a compiler default) would JIT its
// compute_75 PTX, in which the kernel is a __trap(). ptxVersion is the virtual architecture of that code (80 for
// compute_80), binaryVersion the SASS the device runs.
bool sm80_code_loaded(int dev) {
  static DeviceFlags flags;
  return per_device(flags, dev, [] {
    cudaFuncAttributes attr{};
    LABKIT_CUDA(cudaFuncGetAttributes(&attr, ata_tensor_core_kernel));
    return attr.ptxVersion >= 80;
  });
}

// 66 KiB of dynamic shared memory is above the 48 KiB default: opt in, once per device (the attribute belongs to the
// device's context, so a second device needs its own call).
void launch_dmma_m8n8k4(int M, int N, const double* A, double* C) {
  static DeviceFlags configured;
  per_device(configured, current_device(), [] {
    LABKIT_CUDA(cudaFuncSetAttribute(ata_tensor_core_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(tc::kSmemBytes)));
    return true;
  });
  const int T = static_cast<int>(blocks(N, tc::BT));
  ata_tensor_core_kernel<<<upper_blocks(T), tc::kThreads, tc::kSmemBytes>>>(M, N, A, C, T);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace

void ata_tensor_core(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  const int dev = current_device();
  int major = 0;
  LABKIT_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 8)
    throw std::runtime_error("lab06 step 7a: fp64 tensor cores (mma.sync m8n8k4 f64) need sm_80 or newer");
  if (!sm80_code_loaded(dev))
    throw std::runtime_error("lab06 step 7a: this program holds no sm_80+ code for the tensor-core kernel (built for "
                             "older architectures only): configure with CMAKE_CUDA_ARCHITECTURES=native (the "
                             "default) or a list that includes 80 or 90");
  launch_dmma_m8n8k4(M, N, A, C);
}

}  // namespace lab06
