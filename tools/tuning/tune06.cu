// Tuning harness for lab 06 step 7 (tools/tuning/README.md says how to build and run it).
// Checks the m8n8k4 kernel and the sm_90 kernel variants against cublasDgemm (relative inf-norm error <= 1e-12,
// exact symmetry, every element written), then times cublasDgemm, cublasDsyrk (one triangle, no mirror), the old
// and the new step 7 with labkit::compare_speed (interleaved with Dgemm; ratio = Dgemm median / variant median).
// Build from the repo root:
//   nvcc -std=c++17 -O3 -arch=sm_90 -Ilabs/06_ata -Icommon/include tools/tuning/tune06.cu \
//        solutions/06_ata/step7a_tensor_core.cu build/gpu/common/liblabkit.a -lcublas -lcusparse -o /tmp/tune06
// (It includes step 7b's file, to reach its kernel templates, and links step 7a's for the m8n8k4 kernel.)
// Run: /tmp/tune06 [--quick | --bands]   (--quick: 8192 x 8192 only, without the k16 variants; --bands: the tuned
// configuration with its tiles in each block order (upper_tile's kBand), each timed against cublasDsyrk directly,
// three rounds)
#include "../../solutions/06_ata/step7b_tensor_core_sm90.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/cublas.h"
#include "labkit/device.h"
#include "labkit/random.h"
#include "labkit/timing.h"

namespace {

using Fn = std::function<void(int, int, const double*, double*)>;
struct Variant {
  std::string name;
  Fn fn;
  bool symmetric;  // computes only the upper tiles (for the "real" TFLOP/s column)
  int tile;        // its block tile (for the real work count)
};

template <int KM, int BK, int S, bool P = false, int Band = 0>
Variant sm90() {
  std::string n = "sm90 k" + std::to_string(KM) + " bk" + std::to_string(BK) + " s" + std::to_string(S);
  if (P) n += " pf";  // the fragments of the next k-step read during this step's MMAs
  if (Band) n += " band" + std::to_string(Band);
  if (KM == lab06::kTunedKM && BK == lab06::kTunedBK && S == lab06::kTunedStages && P == lab06::kTunedPrefetch &&
      Band == lab06::kTunedBand)
    n += " *";
  return {n, [](int M, int N, const double* A, double* C) { lab06::launch_dmma_sm90<KM, BK, S, P, Band>(M, N, A, C); },
          true, lab06::h9::BT};
}

// The tuned configuration in every block order, each timed against cublasDsyrk in the same compare_speed (ratio =
// Dsyrk median / variant median, > 1: faster than Dsyrk), three rounds so that drift shows.
template <int Band>
Variant tuned_in_band() {
  return sm90<lab06::kTunedKM, lab06::kTunedBK, lab06::kTunedStages, lab06::kTunedPrefetch, Band>();
}

struct Check {
  double rel = 0;
  std::size_t asym = 0, nonfinite = 0;
};

// max |x - ref| / max |ref| over all elements (NaN = an unwritten element: counted separately), exact symmetry.
Check check(const std::vector<double>& x, const std::vector<double>& ref, int N) {
  Check r;
  double dmax = 0, rmax = 0;
  for (std::size_t e = 0; e < x.size(); ++e) {
    if (!std::isfinite(x[e])) {
      ++r.nonfinite;
      continue;
    }
    dmax = std::max(dmax, std::fabs(x[e] - ref[e]));
    rmax = std::max(rmax, std::fabs(ref[e]));
  }
  r.rel = rmax > 0 ? dmax / rmax : dmax;
  constexpr int B = 64;
  for (int i0 = 0; i0 < N; i0 += B)
    for (int j0 = i0; j0 < N; j0 += B)
      for (int i = i0; i < std::min(N, i0 + B); ++i)
        for (int j = std::max(j0, i + 1); j < std::min(N, j0 + B); ++j) {
          const double a = x[std::size_t(i) * N + j], b = x[std::size_t(j) * N + i];
          if (!(a == b)) ++r.asym;  // NaN != NaN: unwritten pairs count too
        }
  return r;
}

using Gemm = std::function<void(int, int, const double*, double*)>;

// One shape: a random A, cublasDgemm's C = A^T A as the reference, and the output the variants write.
struct Problem {
  int M, N;
  labkit::DeviceBuffer<double> A, C;
  std::vector<double> ref;
  Problem(int m, int n, const Gemm& dgemm) : M(m), N(n), A(std::size_t(m) * n), C(std::size_t(n) * n) {
    labkit::fill_random_device(A.data(), A.size(), 6);
    dgemm(M, N, A.data(), C.data());
    LABKIT_CUDA(cudaDeviceSynchronize());
    ref = C.download();
  }
  // One call of v on a C of NaNs (unwritten elements show), checked against the reference.
  Check run(const Variant& v) {
    LABKIT_CUDA(cudaMemset(C.data(), 0xFF, C.size() * sizeof(double)));
    v.fn(M, N, A.data(), C.data());
    LABKIT_CUDA(cudaDeviceSynchronize());
    return check(C.download(), ref, N);
  }
};

bool passes(const Check& ck) { return ck.rel <= 1e-12 && ck.asym == 0 && ck.nonfinite == 0; }

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  const bool bands = argc > 1 && !std::strcmp(argv[1], "--bands");
  if (!labkit::has_device()) {
    std::fprintf(stderr, "%s\n", labkit::no_device_reason().c_str());
    return 1;
  }
  std::printf("lab06 step 7 tuning on %s\n", labkit::describe(labkit::device_info()).c_str());
  labkit::CublasHandle h;
  auto dgemm = [&](int M, int N, const double* A, double* C) {
    const double one = 1.0, zero = 0.0;
    LABKIT_CUBLAS(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, N, N, M, &one, A, N, A, N, &zero, C, N));
  };
  auto dsyrk = [&](int M, int N, const double* A, double* C) {  // one triangle, no mirror
    const double one = 1.0, zero = 0.0;
    LABKIT_CUBLAS(cublasDsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, N, M, &one, A, N, &zero, C, N));
  };

  if (bands) {
    const std::vector<Variant> orders = {tuned_in_band<0>(), tuned_in_band<2>(), tuned_in_band<4>(),
                                         tuned_in_band<8>(), tuned_in_band<16>()};
    Problem p(8192, 8192, dgemm);
    const int M = p.M, N = p.N;
    const double* A = p.A.data();
    double* C = p.C.data();
    bool ok = true;
    for (const Variant& v : orders) {
      const Check ck = p.run(v);
      const bool good = passes(ck);
      ok = ok && good;
      std::printf("%-32s %s rel %.2e asym %zu unwritten %zu\n", v.name.c_str(), good ? "ok  " : "FAIL", ck.rel,
                  ck.asym, ck.nonfinite);
    }
    labkit::TimingOptions opt;
    opt.warmup = 2;
    opt.min_repeats = 7;
    opt.budget_ms = 400;
    std::printf("\nM = N = 8192, vs cublasDsyrk in the same compare_speed: variant ms, Dsyrk ms, Dsyrk / variant\n");
    for (int round = 0; round < 3; ++round)
      for (const Variant& v : orders) {
        const auto cmp = labkit::compare_speed([&](int) { dsyrk(M, N, A, C); }, [&](int) { v.fn(M, N, A, C); }, opt);
        std::printf("round %d  %-32s %8.3f %8.3f %7.4f\n", round, v.name.c_str(), cmp.candidate.median_ms,
                    cmp.baseline.median_ms, cmp.ratio);
      }
    std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
    return ok ? 0 : 1;
  }

  std::vector<Variant> variants = {
      {"step 7a m8n8k4", lab06::ata_tensor_core, true, 128},
      sm90<8, 32, 3>(),
      sm90<8, 16, 4>(),
      sm90<8, 16, 4, true>(),
      sm90<4, 16, 4>(),
      sm90<4, 16, 4, true>(),
      sm90<4, 16, 3, true>(),
      sm90<4, 16, 5, true>(),
      sm90<4, 16, 6, true>(),
      sm90<4, 8, 6, true>(),
      sm90<4, 8, 8, true>(),
      sm90<4, 32, 3, true>(),
  };
  if (!quick) {
    variants.push_back(sm90<16, 32, 3>());
    variants.push_back(sm90<16, 16, 4>());
    variants.push_back(sm90<8, 16, 3>());
  }
  variants.push_back({"lab06::ata_tensor_core_sm90", lab06::ata_tensor_core_sm90, true, 0});

  struct Shape {
    int M, N;
  };
  std::vector<Shape> shapes = {{8192, 8192}};
  if (!quick) shapes.push_back({8192, 4096}), shapes.push_back({3001, 2999});

  bool all_ok = true;
  for (const Shape& s : shapes) {
    Problem p(s.M, s.N, dgemm);
    const int M = p.M, N = p.N;
    const double* A = p.A.data();
    double* C = p.C.data();
    const double flops = 2.0 * M * double(N) * N;

    std::printf("\nM = %d, N = %d  (effective TFLOP/s = 2 M N^2 / time; real = work actually done)\n", M, N);
    std::printf("%-24s %9s %9s %9s %8s %8s  %s\n", "variant", "ms", "eff TF/s", "real TF/s", "/dgemm", "/dsyrk",
                "check vs dgemm");
    labkit::TimingOptions opt;
    opt.warmup = 2;
    opt.min_repeats = 7;
    opt.budget_ms = 400;
    // Baselines: Dsyrk timed against Dgemm.
    const auto base = labkit::compare_speed([&](int) { dgemm(M, N, A, C); }, [&](int) { dsyrk(M, N, A, C); }, opt);
    const double t_gemm = base.baseline.median_ms, t_syrk = base.candidate.median_ms;
    std::printf("%-24s %9.3f %9.2f %9.2f %8.3f %8.3f\n", "cublasDgemm", t_gemm, flops / (t_gemm * 1e9),
                flops / (t_gemm * 1e9), 1.0, t_syrk / t_gemm);
    std::printf("%-24s %9.3f %9.2f %9.2f %8.3f %8.3f  (one triangle)\n", "cublasDsyrk", t_syrk,
                flops / (t_syrk * 1e9), M * double(N) * (N + 1) / (t_syrk * 1e9), base.ratio, 1.0);

    for (const Variant& v : variants) {
      const Check ck = p.run(v);
      const bool ok = passes(ck);
      all_ok = all_ok && ok;
      const auto cmp = labkit::compare_speed([&](int) { dgemm(M, N, A, C); }, [&](int) { v.fn(M, N, A, C); }, opt);
      const double ms = cmp.candidate.median_ms;
      double real = flops;
      if (v.symmetric && v.tile > 0) {
        const double T = (N + v.tile - 1) / v.tile;
        real = 2.0 * M * (T * (T + 1) / 2) * double(v.tile) * v.tile;  // whole tiles, padding included
      }
      std::printf("%-24s %9.3f %9.2f %9.2f %8.3f %8.3f  %s rel %.2e asym %zu unwritten %zu\n", v.name.c_str(), ms,
                  flops / (ms * 1e9), v.tile > 0 ? real / (ms * 1e9) : 0.0, cmp.ratio,
                  t_syrk / ms, ok ? "ok  " : "FAIL", ck.rel, ck.asym, ck.nonfinite);
    }
  }
  std::printf("\n* = the configuration ata_tensor_core_sm90 uses (KM %d, BK %d, stages %d%s)\n", lab06::kTunedKM,
              lab06::kTunedBK, lab06::kTunedStages, lab06::kTunedPrefetch ? ", fragments one k-step ahead" : "");
  std::printf("%s\n", all_ok ? "all checks passed" : "SOME CHECKS FAILED");
  return all_ok ? 0 : 1;
}
