// Lab 06 bench: time and effective GFLOP/s (2*M*N^2 / time) of every step, cublasDgemm and cublasDsyrk (+ the
// mirror, i.e. step 1b) over square A (N x N) and the seed's N x 2N A (M = n, N = 2n: C is 2n x 2n). Slow
// variants are time-boxed: a variant whose predicted time at the next size exceeds the box is skipped there.
// Writes CSV (one row per measurement) and prints a table.
//   lab06_bench_solution [--csv FILE] [--quick] [--max N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "ata.h"
#include "labkit/bench.h"
#include "labkit/buffer.h"
#include "labkit/cublas.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "labkit/timing.h"

namespace {
struct Case {
  int M, N;
  std::string kind;
};
}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab06", "lab06_bench.csv", 16384, "N");
  const std::string csv_path = args.csv;
  const bool quick = args.quick;
  const int max_n = static_cast<int>(args.max);
  const auto dev = labkit::device_info();
  labkit::CublasHandle handle;

  // Square sizes, then the N x 2N table (A is n x 2n). The largest C (16384^2 doubles) is 2 GiB, A as much.
  std::vector<Case> cases;
  for (int n : {1024, 2048, 4096, 8192, 16384})
    if (n <= max_n && (!quick || n <= 4096)) cases.push_back({n, n, "square"});
  for (int n : {1024, 2048, 4096, 8192})
    if (2 * n <= max_n && (!quick || n <= 2048)) cases.push_back({n, 2 * n, "nx2n"});

  using Fn = std::function<void(int, int, const double*, double*)>;
  struct Variant {
    std::string name;
    Fn fn;
  };
  const std::vector<Variant> variants = {
      {"cublas_dgemm", [&](int M, int N, const double* A, double* C) { lab06::ata_cublas_gemm(handle, M, N, A, C); }},
      {"cublas_dsyrk_mirror",
       [&](int M, int N, const double* A, double* C) { lab06::ata_cublas_syrk(handle, M, N, A, C); }},
      {"step2_naive", lab06::ata_naive},
      {"step3_tiled", lab06::ata_tiled},
      {"step4_regblock", lab06::ata_regblock},
      {"step5_regblock4", lab06::ata_regblock4},
      {"step6_symmetric", lab06::ata_symmetric},
      {"step7a_tensor_core", lab06::ata_tensor_core},
      {"step7b_tensor_core_sm90", lab06::ata_tensor_core_sm90},
  };
  // The reference library calls (not the student's step 1) give the baseline columns of the table.
  auto ref_dgemm = [&](int M, int N, const double* A, double* C) {
    const double one = 1.0, zero = 0.0;
    LABKIT_CUBLAS(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, N, N, M, &one, A, N, A, N, &zero, C, N));
  };
  auto ref_dsyrk = [&](int M, int N, const double* A, double* C) {  // one triangle only
    const double one = 1.0, zero = 0.0;
    LABKIT_CUBLAS(cublasDsyrk(handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, N, M, &one, A, N, &zero, C, N));
  };

  std::ofstream csv(csv_path);
  csv << "lab,case,M,N,variant,run,median_ms,gflops,ratio_to_dgemm,ratio_to_dsyrk\n";
  const int runs = quick ? 1 : 2;
  const double box_ms = quick ? 150 : 300;  // time box per call; the timing loop makes ~5 calls per run
  labkit::TimingOptions opt;
  opt.warmup = 1;
  opt.min_repeats = 3;
  opt.budget_ms = quick ? 80 : 150;
  std::map<std::string, double> last_ms_per_flop;  // time box: predicted time = flops * this
  std::printf("%-7s %6s %6s  %-20s %10s %10s %8s %8s\n", "case", "M", "N", "variant", "ms", "GFLOP/s", "/dgemm",
              "/dsyrk");
  for (const auto& c : cases) {
    const std::size_t a = std::size_t(c.M) * c.N, cc = std::size_t(c.N) * c.N;
    labkit::DeviceBuffer<double> A(a), C(cc);
    labkit::fill_random_device(A.data(), a, 1);
    const double flops = 2.0 * c.M * double(c.N) * c.N;
    const double gflop = flops / 1e9;
    for (int run = 0; run < runs; ++run) {
      const double t_gemm = labkit::time_gpu([&](int) { ref_dgemm(c.M, c.N, A.data(), C.data()); }, opt).median_ms;
      const double t_syrk = labkit::time_gpu([&](int) { ref_dsyrk(c.M, c.N, A.data(), C.data()); }, opt).median_ms;
      if (run == 0) {
        csv << "06," << c.kind << "," << c.M << "," << c.N << ",ref_dgemm,0," << t_gemm << "," << gflop / (t_gemm * 1e-3)
            << ",1," << t_syrk / t_gemm << "\n";
        csv << "06," << c.kind << "," << c.M << "," << c.N << ",ref_dsyrk_triangle,0," << t_syrk << ","
            << gflop / (t_syrk * 1e-3) << "," << t_gemm / t_syrk << ",1\n";
      }
      for (const auto& v : variants) {
        auto it = last_ms_per_flop.find(v.name);
        if (it != last_ms_per_flop.end() && it->second * flops > box_ms) continue;  // would take too long
        double ms;
        try {
          ms = labkit::time_gpu([&](int) { v.fn(c.M, c.N, A.data(), C.data()); }, opt).median_ms;
        } catch (const labkit::NotImplemented&) {
          continue;  // the student's tree: steps not written yet are left out
        }
        last_ms_per_flop[v.name] = ms / flops;
        csv << "06," << c.kind << "," << c.M << "," << c.N << "," << v.name << "," << run << "," << ms << ","
            << gflop / (ms * 1e-3) << "," << t_gemm / ms << "," << t_syrk / ms << "\n";
        if (run == runs - 1)
          std::printf("%-7s %6d %6d  %-20s %10.3f %10.1f %8.3f %8.3f\n", c.kind.c_str(), c.M, c.N, v.name.c_str(), ms,
                      gflop / (ms * 1e-3), t_gemm / ms, t_syrk / ms);
      }
      if (run == runs - 1)
        std::printf("%-7s %6d %6d  %-20s %10.3f %10.1f   (dsyrk: one triangle only)\n", c.kind.c_str(), c.M, c.N,
                    "ref_dsyrk_triangle", t_syrk, gflop / (t_syrk * 1e-3));
    }
  }
  std::cout << "wrote " << csv_path << "\n";
  return 0;
}
