// CPU emulation of tools/tuning/tune06b_kernel.h (no GPU needed): every row of the tune06b harness (the ladder
// v0-v4 and the ablations x1-x4) on small shapes, against a product summed in the same order, so the comparison is
// exact. A check of the kernels' indexing and of the pipelines' bookkeeping (stages, mbarrier phases, tiles of
// persistent blocks, band order, epilogue), not of speed. One std::thread per CUDA thread, blocks one after another,
// __syncthreads / __syncwarp and the warp-wide mma.sync as std::barriers, mbarriers as atomic words. cp.async copies
// land at once, so wait_group counts and copy latency are not exercised; a stage refilled too early still shows as a
// wrong result, because the 256 threads run in whatever order the OS picks (a broken empty-barrier wait and a wrong
// parity were both caught: a wrong C, a reported hang).
// Build and run from the repository root (about 2 minutes on 2 cores, mostly thread switches):
//   g++ -std=c++20 -O1 -pthread -x c++ tools/tuning/tune06b_emulate.cu -o /tmp/emu06b && /tmp/emu06b [v3 x1 ...]
// The geometry below (lab06::h9) and upper_tile repeat solutions/06_ata/step7b_tensor_core_sm90.cu, which this
// file cannot include (its host code needs CUDA); keep them in step.
#define T6B_EMULATE 1
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* g_bar = nullptr;
inline std::barrier<>* g_warp_bar[8];
inline void* g_dyn_smem = nullptr;
inline double* t6b_emulated_smem() { return static_cast<double*>(g_dyn_smem); }
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline void __syncwarp() { g_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct alignas(16) double2 {
  double x, y;
};
inline double2 make_double2(double a, double b) { return {a, b}; }

namespace lab06 {
namespace h9 {
constexpr int BT = 128, PAD = 4, LD = BT + PAD, kThreads = 256;
constexpr int WM = 64, WN = 32;
constexpr int MI = WM / 16, NJ = WN / 8;
constexpr std::size_t smem_bytes(int BK, int stages) { return std::size_t(stages) * 2 * BK * LD * sizeof(double); }
}  // namespace h9
inline void upper_tile(int b, int T, int& bi, int& bj) {
  int r = 0;
  while (b >= T - r) {
    b -= T - r;
    ++r;
  }
  bi = r;
  bj = r + b;
}
// mma.sync m16n8kK f64, warp-collective: every lane posts its fragments, then computes its own D from all of them,
// with the PTX fragment maps (g = lane / 4, q = lane % 4): lane (g, q) holds A(g + 8 v0, q + 4 v1) in a[v0 + 2 v1],
// B(q + 4 v, g) in b[v], and D(g + 8 (c / 2), 2 q + c % 2) in d[c]. The k order of the sum is the serial one.
struct WarpMma {
  double a[32][8], b[32][4];
};
inline WarpMma g_mma[8];
template <int KM>
void mma_m16n8_f64(double (&d)[4], const double (&a)[KM / 2], const double (&b)[KM / 4]) {
  const int tid = threadIdx.x, w = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  WarpMma& st = g_mma[w];
  for (int v = 0; v < KM / 2; ++v) st.a[lane][v] = a[v];
  for (int v = 0; v < KM / 4; ++v) st.b[lane][v] = b[v];
  g_warp_bar[w]->arrive_and_wait();
  for (int c = 0; c < 4; ++c) {
    const int row = g + 8 * (c / 2), col = 2 * q + c % 2;
    double s = d[c];
    for (int k = 0; k < KM; ++k)
      s += st.a[4 * (row % 8) + k % 4][(row / 8) + 2 * (k / 4)] * st.b[4 * col + k % 4][k / 4];
    d[c] = s;
  }
  g_warp_bar[w]->arrive_and_wait();
}
inline void cp_async_16(double* smem, const double* gmem, bool valid) {
  smem[0] = valid ? gmem[0] : 0.0;
  smem[1] = valid ? gmem[1] : 0.0;
}
inline void cp_async_8(double* smem, const double* gmem, bool valid) { smem[0] = valid ? gmem[0] : 0.0; }
inline void cp_async_commit() {}
template <int N>
void cp_async_wait() {}
// cp.async lands at once (src-size 0: zeros, as the hardware's zero-fill). An mbarrier is its own 64-bit word:
// completed phases (high 32 bits), expected arrivals (16), pending arrivals (16). try_wait(parity) is true when
// the phase of that parity has completed, i.e. the current (incomplete) phase has the other parity (PTX ISA).
namespace t6b {
inline void mbar_init(std::uint64_t* bar, unsigned count) {
  std::atomic_ref<std::uint64_t>(*bar).store((std::uint64_t(count) << 16) | count);
}
inline void mbar_arrive(std::uint64_t* bar) {
  std::atomic_ref<std::uint64_t> r(*bar);
  std::uint64_t old = r.load(), nw;
  do {
    std::uint64_t phase = old >> 32, count = (old >> 16) & 0xFFFF, pending = old & 0xFFFF;
    if (pending == 0) {
      std::fprintf(stderr, "mbarrier: arrival with nothing pending\n");
      std::abort();
    }
    if (--pending == 0) {
      ++phase;
      pending = count;
    }
    nw = (phase << 32) | (count << 16) | pending;
  } while (!r.compare_exchange_weak(old, nw));
}
inline void mbar_arrive_when_copied(std::uint64_t* bar) { mbar_arrive(bar); }  // copies are synchronous here
inline bool mbar_try_wait(std::uint64_t* bar, unsigned parity) {
  return ((std::atomic_ref<std::uint64_t>(*bar).load() >> 32) & 1) != parity;
}
inline void mbar_wait(std::uint64_t* bar, unsigned parity) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!mbar_try_wait(bar, parity)) {
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) {
      std::fprintf(stderr, "mbarrier: hang\n");
      std::abort();
    }
  }
}
}  // namespace t6b
}  // namespace lab06

#include "tune06b_kernel.h"

template <class F>
void launch(unsigned grid, std::size_t smem_bytes, F kernel) {
  gridDim = {grid, 1, 1};
  blockDim = {256, 1, 1};
  for (unsigned bx = 0; bx < grid; ++bx) {
    std::barrier<> bar(256);
    g_bar = &bar;
    for (int w = 0; w < 8; ++w) g_warp_bar[w] = new std::barrier<>(32);
    std::vector<double2> smem((smem_bytes + 15) / 16, double2{NAN, NAN});
    g_dyn_smem = smem.data();
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < 256; ++t)
      ts.emplace_back([&, t, bx] {
        threadIdx = {t, 1, 1};
        blockIdx = {bx, 1, 1};
        kernel();
      });
    for (auto& th : ts) th.join();
    for (int w = 0; w < 8; ++w) delete g_warp_bar[w];
  }
}

template <int KM, int BK, int S, int G, bool P, bool MB>
bool run(const char* name, int M, int N, int sms, bool misalign) {
  std::mt19937_64 rng(M * 1000003ull + N);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> bufA(std::size_t(M) * N + 2), bufC(std::size_t(N) * N + 4, NAN);
  const int off = misalign ? 1 : 2;
  double* A = bufA.data() + off;
  double* C = bufC.data() + off;
  for (std::size_t i = 0; i < std::size_t(M) * N; ++i) A[i] = u(rng);
  const double guard = -7.25e300;
  for (int i = 0; i < off; ++i) bufC[i] = guard;
  C[std::size_t(N) * N] = C[std::size_t(N) * N + 1] = guard;
  const bool vec =
      N % 2 == 0 && (reinterpret_cast<std::uintptr_t>(A) & 15) == 0 && (reinterpret_cast<std::uintptr_t>(C) & 15) == 0;
  const int T = (N + 127) / 128, ntiles = T * (T + 1) / 2;
  const unsigned grid = P ? std::min(ntiles, sms) : ntiles;
  const std::size_t bytes = lab06::h9::smem_bytes(BK, S);
  if (vec)
    launch(grid, bytes, [&] { lab06::t6b::ata_v_kernel<KM, BK, S, true, G, P, MB>(M, N, A, C, T, ntiles); });
  else
    launch(grid, bytes, [&] { lab06::t6b::ata_v_kernel<KM, BK, S, false, G, P, MB>(M, N, A, C, T, ntiles); });
  double dmax = 0, cmax = 0;
  long bad = 0, asym = 0;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < M; ++k) s += A[std::size_t(k) * N + i] * A[std::size_t(k) * N + j];
      const double x = C[std::size_t(i) * N + j];
      cmax = std::max(cmax, std::fabs(s));
      if (!std::isfinite(x))
        ++bad;
      else
        dmax = std::max(dmax, std::fabs(x - s));
      if (!(x == C[std::size_t(j) * N + i])) ++asym;
    }
  bool guards = C[std::size_t(N) * N] == guard && C[std::size_t(N) * N + 1] == guard;
  for (int i = 0; i < off; ++i) guards = guards && bufC[i] == guard;
  const double rel = dmax / cmax, tol = 3.0 * (M + 2.0) * 0x1.0p-53;
  const bool ok = rel <= tol && bad == 0 && asym == 0 && guards;
  std::printf("%-4s %4d x %-4d %s grid %3u: rel %.2e unwritten %ld asym %ld guards %s  %s\n", name, M, N,
              vec ? "v16" : "v8 ", grid, rel, bad, asym, guards ? "ok" : "BAD", ok ? "ok" : "FAIL");
  std::fflush(stdout);
  return ok;
}

template <int KM, int BK, int S, int G, bool P, bool MB>
int suite(const char* name) {
  int fails = 0;
  fails += !run<KM, BK, S, G, P, MB>(name, 40, 300, 2, false);   // 6 tiles on 2 blocks: 3 tiles each, 3 k-tiles
  fails += !run<KM, BK, S, G, P, MB>(name, 37, 257, 4, false);   // odd N (8-byte path), partial k-tile
  fails += !run<KM, BK, S, G, P, MB>(name, 21, 258, 4, true);    // A, C one double off 16 B: 8-byte path
  fails += !run<KM, BK, S, G, P, MB>(name, 5, 130, 1, false);    // one k-tile, 3 tiles on 1 block
  fails += !run<KM, BK, S, G, P, MB>(name, 1, 3, 1, false);      // M = 1, one tile
  fails += !run<KM, BK, S, G, P, MB>(name, 70, 1030, 7, false);  // T = 9: 45 tiles on 7 blocks, two bands
  return fails;
}

int main(int argc, char** argv) {
  // "SMs" of the emulated GPU, per shape above (persistent blocks = min(tiles, SMs)): small, so that a block
  // works on several tiles. Rows: all, or those named on the command line.
  auto wanted = [&](const char* name) {
    if (argc < 2) return true;
    for (int a = 1; a < argc; ++a)
      if (!std::strcmp(argv[a], name)) return true;
    return false;
  };
  int f = 0;
#define T6B_ROW(name, KM, BK, S, G, P, MB, what) \
  if (wanted(#name)) f += suite<KM, BK, S, G, P, MB>(#name);
  T6B_LADDER(T6B_ROW)
  T6B_ABLATIONS(T6B_ROW)
#undef T6B_ROW
  if (wanted("y3")) f += suite<4, 16, 3, 2, true, true>("y3");  // 3 stages (one k-tile ahead), bands of 2
  std::printf("%s\n", f ? "FAILURES" : "all rows ok");
  return f != 0;
}
