// Tuning harness for lab 06 step 7b, round 2 (issue 16, item 3): candidate variants of the sm_90 kernel against
// cublasDsyrk (one triangle, no mirror: the step7b.speed_syrk gate's baseline) and cublasDgemm, at 8192 x 8192.
// The variants are instantiations of tools/tuning/tune06b_kernel.h, whose top comment explains each idea.
//
// Build and run from the repository root (needs only the CUDA toolkit and cuBLAS; no CMake build, no labkit
// library: the harness includes the solution's .cu and header-only parts of labkit):
//   nvcc -std=c++17 -O3 -arch=sm_90 -Ilabs/06_ata -Icommon/include tools/tuning/tune06b.cu -lcublas \
//        -o /tmp/tune06b && /tmp/tune06b
// Options:
//   --variants a,b,...  run only these rows (names as printed: shipped, v0, v1, v2, v3, v4, x1, ...); the
//                       cuBLAS rows always run. A variant whose pipeline never completes traps after ~20 s and
//                       the CUDA context is lost: rerun without it.
//   --more              add the ablation rows x1-x4 (listed in the table's legend).
//   --n N               the timed size (M = N; default 8192). --repeats R: timed rounds (default 21).
//   --no-check          skip the correctness checks (not recommended: a failed check marks the row).
//   --order-stats       host only (no GPU): how many panels of A each window of 132 consecutive tiles touches in
//                       the shipped order and in the band orders, at --n.
//
// What it does:
//  0. Prints each variant kernel's registers and local memory (spills) as loaded on this GPU.
//  1. Checks every selected variant on 8192 x 8192 and on small and odd shapes (odd N: the 8-byte path; A and C
//     one double past a 16-byte boundary; N not a multiple of the tile; M not a multiple of the k-tile; fewer
//     tiles than SMs) against cublasDgemm: relative inf-norm error <= 3 (M + 2) u as the gates allow, exact
//     symmetry, every element written, and the doubles just before and after C untouched.
//  2. Times cuBLAS and every variant with CUDA events, interleaved (each round calls every contestant once, the
//     order rotating from round to round), after warm-up rounds, and reports medians. Twice:
//       "gate-like": before every timed call, untimed, A gets new random contents, C is poisoned and L2 is
//                    scrubbed, as the speed gates do (labkit::compare_speed with a TimedCase);
//       "warm":      the same inputs every call, as tools/tuning/tune06.cu times (the README's tuning table).
//     "vs Dsyrk" is Dsyrk's median time over the row's (above 1: faster than Dsyrk), as the gate computes it;
//     "(paired)" the median of the per-round ratios. A row whose check failed is marked CHECK FAILED.
// About 10-30 s on an H100 (most of it cuBLAS start-up and the 8192 checks); build and run took 24 s on one (2026-11-27).
//
// Result (2026-11-27, H100 80GB HBM3, one run; vs Dsyrk, gate-like / warm): shipped 0.951 / 0.936, v0 0.936 /
// 0.902, v1 0.947 / 0.918, v2 0.912 / 0.893, v3 0.909 / 0.890, v4 0.847 / 0.826. Every variant checked right, and
// none beat the shipped kernel: the control v0 already lost 1-3 % (this file's kernel does not compile to the
// shipped one's code), the band order (v1) won back 1-2 % of that, and persistence, mbarriers and k8 lost more. The
// shipped configuration stays; the band order is the idea left to try on the shipped kernel itself.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

// labkit's error macros throw through functions of liblabkit, which this harness does not link (so that it builds
// with nvcc alone). The macros expand where they are used, so redefining LABKIT_CUDA after check.h (and before
// the solution, which includes check.h again: #pragma once keeps this definition) routes the solution's checks
// and LABKIT_CHECK_LAUNCH to the local handler below.
#include "labkit/check.h"
namespace t6b_host {
[[noreturn]] inline void cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + cudaGetErrorName(e) +
                           " (" + cudaGetErrorString(e) + ")");
}
}  // namespace t6b_host
#undef LABKIT_CUDA
#define LABKIT_CUDA(call)                                                                    \
  do {                                                                                       \
    const cudaError_t t6b_err_ = (call);                                                     \
    if (t6b_err_ != cudaSuccess) ::t6b_host::cuda_fail(t6b_err_, #call, __FILE__, __LINE__); \
  } while (0)

// The shipped step 7b (its kernel templates and helpers, and lab06::ata_tensor_core_sm90 itself: the "shipped"
// row times exactly what the gates time). Included, not linked, as tools/tuning/tune06.cu does.
#include "../../solutions/06_ata/step7b_tensor_core_sm90.cu"
#include "labkit/random.h"
#include "tune06b_kernel.h"

#define T6B_CUBLAS(call)                                                                                \
  do {                                                                                                  \
    const cublasStatus_t t6b_st_ = (call);                                                              \
    if (t6b_st_ != CUBLAS_STATUS_SUCCESS)                                                               \
      throw std::runtime_error(std::string(#call) + ": cuBLAS status " + std::to_string(int(t6b_st_))); \
  } while (0)

namespace {

using Fn = std::function<void(int, int, const double*, double*)>;

struct Variant {
  std::string name;  // short, for --variants
  std::string what;  // the legend
  Fn fn;
  std::function<cudaFuncAttributes()> attrs;  // of its 16-byte instantiation (the one timed at 8192)
  bool timed_ok = true;                       // false once a check failed: its times are printed but flagged
};

template <class Kernel>
cudaFuncAttributes attributes_of(Kernel k) {
  cudaFuncAttributes a{};
  LABKIT_CUDA(cudaFuncGetAttributes(&a, k));
  return a;
}

// Variant rows: lab06::t6b::launch_v<KM, BK, kStages, kGroup, kPersistent, kMbar>.
template <int KM, int BK, int S, int G, bool P, bool MB>
Variant make(const char* name, const char* what) {
  return {name, what,
          [](int M, int N, const double* A, double* C) { lab06::t6b::launch_v<KM, BK, S, G, P, MB>(M, N, A, C); },
          [] { return attributes_of(lab06::t6b::ata_v_kernel<KM, BK, S, true, G, P, MB>); }};
}

std::vector<Variant> all_variants(bool more) {
  std::vector<Variant> v;
  v.push_back({"shipped", "lab06::ata_tensor_core_sm90 as shipped (k4, 16 x 4 stages, fragments a k-step ahead)",
               lab06::ata_tensor_core_sm90, [] {
                 return attributes_of(lab06::ata_dmma_sm90_kernel<lab06::kTunedKM, lab06::kTunedBK, lab06::kTunedStages,
                                                                  true, lab06::kTunedPrefetch>);
               }});
#define T6B_ROW(name, KM, BK, S, G, P, MB, what) v.push_back(make<KM, BK, S, G, P, MB>(#name, what));
  T6B_LADDER(T6B_ROW)
  if (more) {
    T6B_ABLATIONS(T6B_ROW)
  }
#undef T6B_ROW
  return v;
}

// ---- device helpers: inputs, poison, L2 scrub, the check ----

__global__ void fill_uniform(double* x, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    x[i] = labkit::uniform_double(seed, i, -1.0, 1.0);
}
void fill_random(double* x, std::size_t n, std::uint64_t seed) {
  fill_uniform<<<1024, 256>>>(x, n, seed);
  LABKIT_CHECK_LAUNCH();
}

// Reads a buffer twice the L2 size so that the next call finds nothing of its inputs in L2 (as labkit::evict_l2).
__global__ void scrub_kernel(const double2* p, std::size_t n, double* sink) {
  double s = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const double2 v = p[i];
    s += v.x + v.y;
  }
  if (s == 12345.678) *sink = s;  // never true in practice; keeps the loads
}

// max |x - ref| and max |ref| (as bit patterns: non-negative doubles order like their bits), elements that are
// not finite (the NaN poison: never written), and pairs i < j with x(i, j) != x(j, i) (NaN pairs included).
struct CheckOut {
  unsigned long long dmax, rmax, nonfinite, asym;
};
__global__ void check_kernel(const double* x, const double* ref, int N, CheckOut* out) {
  double dmax = 0, rmax = 0;
  unsigned long long nonfinite = 0, asym = 0;
  const std::size_t n = std::size_t(N) * N;
  for (std::size_t e = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; e < n;
       e += std::size_t(gridDim.x) * blockDim.x) {
    const double v = x[e], r = ref[e];
    rmax = fmax(rmax, fabs(r));
    if (!isfinite(v))
      ++nonfinite;
    else
      dmax = fmax(dmax, fabs(v - r));
    const std::size_t i = e / N, j = e % N;
    if (i < j && !(v == x[j * N + i])) ++asym;
  }
  for (int o = 16; o > 0; o /= 2) {
    dmax = fmax(dmax, __shfl_xor_sync(0xffffffffu, dmax, o));
    rmax = fmax(rmax, __shfl_xor_sync(0xffffffffu, rmax, o));
    nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, o);
    asym += __shfl_xor_sync(0xffffffffu, asym, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(&out->dmax, static_cast<unsigned long long>(__double_as_longlong(dmax)));
    atomicMax(&out->rmax, static_cast<unsigned long long>(__double_as_longlong(rmax)));
    if (nonfinite) atomicAdd(&out->nonfinite, nonfinite);
    if (asym) atomicAdd(&out->asym, asym);
  }
}

template <class T>
struct DevBuf {  // minimal owning device buffer
  T* p = nullptr;
  explicit DevBuf(std::size_t n) { LABKIT_CUDA(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

struct Ctx {
  cublasHandle_t h = nullptr;
  void dgemm(int M, int N, const double* A, double* C) const {  // the full product, column-major view (step 1a)
    const double one = 1.0, zero = 0.0;
    T6B_CUBLAS(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, N, N, M, &one, A, N, A, N, &zero, C, N));
  }
  void dsyrk(int M, int N, const double* A, double* C) const {  // one triangle, no mirror (the gate's baseline)
    const double one = 1.0, zero = 0.0;
    T6B_CUBLAS(cublasDsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, N, M, &one, A, N, &zero, C, N));
  }
};

constexpr double kUnitRoundoff = 0x1.0p-53;
constexpr double kGuard = -7.25e300;  // a value no product of [-1, 1) entries takes: the sentinel around C

struct Shape {
  int M, N;
  int offA, offC;  // doubles past the (256-byte aligned) allocation: 1 = not 16-byte aligned
};

// Runs every variant on one shape and records failures in v[i].timed_ok. Returns false if any failed.
bool check_shape(const Ctx& ctx, std::vector<Variant>& vs, const Shape& s) {
  const std::size_t na = std::size_t(s.M) * s.N, nc = std::size_t(s.N) * s.N;
  DevBuf<double> bufA(na + 2), bufC(nc + 4), ref(nc);
  DevBuf<CheckOut> out(1);
  double* A = bufA.p + s.offA;
  double* C = bufC.p + s.offC;
  fill_random(A, na, 0x06b000 + s.M * 7919ull + s.N);
  ctx.dgemm(s.M, s.N, A, ref.p);
  const double tol = 3.0 * (s.M + 2.0) * kUnitRoundoff;
  bool all = true;
  std::printf("  %5d x %-5d%s", s.M, s.N, s.offA % 2 || s.offC % 2 ? " (A, C one double off 16 B)" : "");
  for (Variant& v : vs) {
    // Poison: C all NaN (0xFF bytes), the doubles around it a sentinel.
    LABKIT_CUDA(cudaMemset(bufC.p, 0xFF, (nc + 4) * sizeof(double)));
    const double g2[2] = {kGuard, kGuard};  // offC (1 or 2) doubles before C, 2 after it
    LABKIT_CUDA(cudaMemcpy(bufC.p, g2, s.offC * sizeof(double), cudaMemcpyHostToDevice));
    LABKIT_CUDA(cudaMemcpy(C + nc, g2, 2 * sizeof(double), cudaMemcpyHostToDevice));
    try {
      v.fn(s.M, s.N, A, C);
      LABKIT_CUDA(cudaDeviceSynchronize());  // a fault or a pipeline trap shows here, with the variant's name
    } catch (const std::exception& e) {
      std::printf("\n    %s failed at %d x %d: %s\n", v.name.c_str(), s.M, s.N, e.what());
      throw;
    }
    LABKIT_CUDA(cudaMemset(out.p, 0, sizeof(CheckOut)));
    check_kernel<<<528, 256>>>(C, ref.p, s.N, out.p);
    LABKIT_CHECK_LAUNCH();
    CheckOut r{};
    LABKIT_CUDA(cudaMemcpy(&r, out.p, sizeof r, cudaMemcpyDeviceToHost));
    double before[2] = {kGuard, kGuard}, after[2];
    LABKIT_CUDA(cudaMemcpy(before, bufC.p, s.offC * sizeof(double), cudaMemcpyDeviceToHost));
    LABKIT_CUDA(cudaMemcpy(after, C + nc, 2 * sizeof(double), cudaMemcpyDeviceToHost));
    const bool guards = before[0] == kGuard && before[1] == kGuard && after[0] == kGuard && after[1] == kGuard;
    double dmax, rmax;
    std::memcpy(&dmax, &r.dmax, sizeof dmax);
    std::memcpy(&rmax, &r.rmax, sizeof rmax);
    const double rel = rmax > 0 ? dmax / rmax : dmax;
    const bool ok = rel <= tol && r.nonfinite == 0 && r.asym == 0 && guards;
    if (!ok) {
      std::printf("\n    FAIL %-8s rel %.2e (limit %.2e), unwritten %llu, asymmetric pairs %llu, guards %s",
                  v.name.c_str(), rel, tol, r.nonfinite, r.asym, guards ? "intact" : "OVERWRITTEN");
      v.timed_ok = false;
      all = false;
    }
  }
  std::printf("%s\n", all ? "  ok" : "");
  return all;
}

// The band order (tile_of<G>, G > 0) on the host: every upper tile exactly once, for T = 1 .. 160.
template <int G>
bool order_covers_triangle() {
  for (int T = 1; T <= 160; ++T) {
    std::vector<int> seen(std::size_t(T) * T, 0);
    for (int b = 0; b < T * (T + 1) / 2; ++b) {
      int bi, bj;
      lab06::t6b::tile_of<G>(b, T, bi, bj);
      if (bi < 0 || bi > bj || bj >= T) return false;
      ++seen[std::size_t(bi) * T + bj];
    }
    for (int i = 0; i < T; ++i)
      for (int j = i; j < T; ++j)
        if (seen[std::size_t(i) * T + j] != 1) return false;
  }
  return true;
}
// Distinct panels of A (tile rows and columns) touched by each run of W consecutive tiles (W = the SMs: one wave
// of blocks, or the tiles the persistent blocks work on at one time). G = 1 is the shipped row-by-row order.
template <int G>
void order_stats(int T, int W) {
  const int n = T * (T + 1) / 2;
  int worst = 0, windows = 0;
  double sum = 0;
  for (int w0 = 0; w0 < n; w0 += W) {
    std::vector<char> used(T, 0);
    for (int b = w0; b < std::min(n, w0 + W); ++b) {
      int bi, bj;
      lab06::t6b::tile_of<G>(b, T, bi, bj);
      used[bi] = used[bj] = 1;
    }
    const int c = static_cast<int>(std::count(used.begin(), used.end(), 1));
    worst = std::max(worst, c);
    sum += c;
    ++windows;
  }
  std::printf("  %-22s panels per window of %d tiles: mean %.1f, max %d (of %d)\n",
              G == 1 ? "row by row (shipped)" : ("bands of " + std::to_string(G)).c_str(), W, sum / windows, worst, T);
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}
double quantile(std::vector<double> x, double f) {
  std::sort(x.begin(), x.end());
  return x[std::min(x.size() - 1, static_cast<std::size_t>(f * (x.size() - 1) + 0.5))];
}

struct Contestant {
  std::string name;
  Fn fn;
  double work;  // flops actually executed (for "real TF/s")
  const Variant* variant = nullptr;
};

void time_all(const std::vector<Contestant>& cs, int M, int N, bool gate_like, int warmup, int repeats) {
  const std::size_t na = std::size_t(M) * N, nc = std::size_t(N) * N;
  DevBuf<double> A(na), C(nc), sink(1);
  int dev = 0, l2 = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const std::size_t scrub_n = std::max<std::size_t>(2 * std::size_t(l2) / sizeof(double2), 1);
  DevBuf<double2> scrub(scrub_n);
  LABKIT_CUDA(cudaMemset(scrub.p, 0, scrub_n * sizeof(double2)));
  fill_random(A.p, na, 0x5eed);
  cudaEvent_t e0, e1;
  LABKIT_CUDA(cudaEventCreate(&e0));
  LABKIT_CUDA(cudaEventCreate(&e1));
  std::vector<std::vector<double>> ms(cs.size());
  std::uint64_t call = 0;
  for (int round = 0; round < warmup + repeats; ++round)
    for (std::size_t k = 0; k < cs.size(); ++k) {
      const std::size_t i = (k + round) % cs.size();  // rotate who follows whom
      if (gate_like) {                                // untimed: fresh A, poisoned C, nothing of either left in L2
        fill_random(A.p, na, 0xa7a0000ull + call++);
        LABKIT_CUDA(cudaMemsetAsync(C.p, 0xFF, nc * sizeof(double)));
        scrub_kernel<<<1056, 256>>>(scrub.p, scrub_n, sink.p);
        LABKIT_CHECK_LAUNCH();
      }
      LABKIT_CUDA(cudaEventRecord(e0));
      cs[i].fn(M, N, A.p, C.p);
      LABKIT_CUDA(cudaEventRecord(e1));
      LABKIT_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      LABKIT_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (round >= warmup) ms[i].push_back(t);
    }
  LABKIT_CUDA(cudaEventDestroy(e0));
  LABKIT_CUDA(cudaEventDestroy(e1));

  const double flops = 2.0 * M * double(N) * N;
  const double t_gemm = median(ms[0]), t_syrk = median(ms[1]);
  std::printf(
      "\n%s, M = N = %d: %d rounds after %d warm-up, median ms; eff = 2 M N^2 / t, real = flops executed / t\n",
      gate_like ? "gate-like (fresh A, poisoned C, L2 scrubbed before every call)" : "warm (same inputs every call)", N,
      repeats, warmup);
  std::printf("%-8s %9s %9s %9s %8s %9s %9s %9s %9s  %s\n", "row", "median", "min", "p90", "eff TF", "real TF",
              "vs Dsyrk", "(paired)", "vs Dgemm", "");
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const double t = median(ms[i]);
    // Paired: the median over rounds of Dsyrk's time in that round over this row's, which cancels drift that is
    // slower than a round (clocks, temperature); "vs Dsyrk" is the ratio of the medians, as the gate computes it.
    std::vector<double> paired(ms[i].size());
    for (std::size_t r = 0; r < paired.size(); ++r) paired[r] = ms[1][r] / ms[i][r];
    std::printf("%-8s %9.3f %9.3f %9.3f %8.2f %9.2f %9.3f %9.3f %9.3f  %s\n", cs[i].name.c_str(), t,
                *std::min_element(ms[i].begin(), ms[i].end()), quantile(ms[i], 0.9), flops / (t * 1e9),
                cs[i].work / (t * 1e9), t_syrk / t, median(paired), t_gemm / t,
                cs[i].variant && !cs[i].variant->timed_ok ? "CHECK FAILED" : "");
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t a = 0;
  while (a <= s.size()) {
    const std::size_t b = std::min(s.find(',', a), s.size());
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  bool more = false, check = true, order_stats_only = false;
  int n = 8192, repeats = 21;
  std::vector<std::string> only;
  for (int a = 1; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "--more")
      more = true;
    else if (s == "--no-check")
      check = false;
    else if (s == "--order-stats")
      order_stats_only = true;
    else if (s == "--n" && a + 1 < argc)
      n = std::atoi(argv[++a]);
    else if (s == "--repeats" && a + 1 < argc)
      repeats = std::max(3, std::atoi(argv[++a]));
    else if (s == "--variants" && a + 1 < argc)
      only = split(argv[++a]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--variants a,b,...] [--more] [--n N] [--repeats R] [--no-check] [--order-stats]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!order_covers_triangle<8>() || !order_covers_triangle<16>() || !order_covers_triangle<1>()) {
    std::fprintf(stderr, "tile_of: the band order misses or repeats a tile\n");
    return 1;
  }
  if (order_stats_only) {  // host only: no GPU needed
    const int T = (n + lab06::h9::BT - 1) / lab06::h9::BT;
    std::printf("tile orders at N = %d (T = %d tiles a side, %d upper tiles), windows of 132 tiles (H100 SXM SMs):\n",
                n, T, T * (T + 1) / 2);
    order_stats<1>(T, 132);
    order_stats<8>(T, 132);
    order_stats<16>(T, 132);
    return 0;
  }
  int dev = 0, devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  LABKIT_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  LABKIT_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("lab06 step 7b candidates on %s (sm_%d%d, %d SMs, L2 %d MiB)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (prop.major != 9) {
    std::fprintf(stderr, "the kernels use mma.sync m16n8k{4,8} f64, which only sm_90 has\n");
    return 1;
  }

  std::vector<Variant> vs;
  for (Variant& v : all_variants(more || !only.empty()))
    if (only.empty() || std::find(only.begin(), only.end(), v.name) != only.end()) vs.push_back(std::move(v));
  for (const std::string& name : only)
    if (std::none_of(vs.begin(), vs.end(), [&](const Variant& v) { return v.name == name; }))
      std::printf("(--variants: no row named %s)\n", name.c_str());

  std::printf("\nkernels as loaded (16-byte path): registers per thread, local memory (spills) per thread\n");
  for (const Variant& v : vs) {
    const cudaFuncAttributes a = v.attrs();
    std::printf("  %-8s %3d regs, %4zu B local, %6zu B static smem   %s\n", v.name.c_str(), a.numRegs, a.localSizeBytes,
                a.sharedSizeBytes, v.what.c_str());
  }

  Ctx ctx;
  T6B_CUBLAS(cublasCreate(&ctx.h));
  bool all_ok = true;
  if (check) {
    std::printf(
        "\nchecks against cublasDgemm (error <= 3 (M + 2) u of max |C|, exact symmetry, all written, guards)\n");
    const std::vector<Shape> shapes = {
        {n, n, 0, 2},        // the timed size, 16-byte path
        {1000, 777, 0, 2},   // odd N: 8-byte path, ragged tiles, M % 16 = 8
        {1001, 1282, 0, 2},  // even N not a multiple of 128, odd M: 16-byte path with edge tiles
        {257, 302, 1, 1},    // A and C one double past a 16-byte boundary: the 8-byte path must be chosen
        {600, 2500, 0, 2},   // 210 tiles: more than the SMs, not a multiple (persistent blocks with 1 or 2 tiles)
        {4099, 260, 0, 2},   // tall A: 257 k-tiles, the last one partial
        {1, 1, 0, 2},       {5, 3, 0, 2}, {33, 130, 0, 2},
    };
    for (const Shape& s : shapes) all_ok = check_shape(ctx, vs, s) && all_ok;
  }

  std::vector<Contestant> cs;
  const double full = 2.0 * n * double(n) * n;
  cs.push_back({"Dgemm", [&](int M, int N, const double* A, double* C) { ctx.dgemm(M, N, A, C); }, full});
  cs.push_back(
      {"Dsyrk", [&](int M, int N, const double* A, double* C) { ctx.dsyrk(M, N, A, C); }, n * double(n) * (n + 1.0)});
  const double T = (n + lab06::h9::BT - 1) / lab06::h9::BT;  // every variant computes whole 128 x 128 upper tiles
  const double tiled = 2.0 * n * (T * (T + 1) / 2) * lab06::h9::BT * lab06::h9::BT;
  for (const Variant& v : vs) cs.push_back({v.name, v.fn, tiled, &v});
  time_all(cs, n, n, true, 5, repeats);
  time_all(cs, n, n, false, 5, repeats);

  std::printf(
      "\nrows:\n  Dgemm    cublasDgemm, the full product\n  Dsyrk    cublasDsyrk, one triangle, no mirror (the "
      "step7b.speed_syrk baseline)\n");
  for (const Variant& v : vs) std::printf("  %-8s %s\n", v.name.c_str(), v.what.c_str());
  std::printf("%s\n", !check ? "checks skipped" : all_ok ? "all checks passed" : "SOME CHECKS FAILED");
  T6B_CUBLAS(cublasDestroy(ctx.h));
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
