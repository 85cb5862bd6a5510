// Lab 01 bench: GFLOP/s of every step, cuBLAS and a blocked CPU matmul over square sizes 256..8192 and the
// rectangular M,N >> K cases. Three runs of each (median of repeats within a run). Writes CSV.
//   lab01_bench_student [--csv FILE] [--quick] [--max N]    (lab01_bench_solution: the same with the reference)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "labkit/bench.h"
#include "labkit/buffer.h"
#include "labkit/cublas.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "labkit/reference.h"
#include "labkit/timing.h"
#include "matmul.h"
#include "tests/cublas_baseline.h"

namespace {
struct Case {
  int M, N, K;
  std::string kind;
};
}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab01", "lab01_bench.csv", 8192, "N");
  const std::string csv_path = args.csv;
  const bool quick = args.quick;
  const int max_n = static_cast<int>(args.max);
  const auto dev = labkit::device_info();
  labkit::CublasHandle handle;

  std::vector<Case> cases;
  for (int n : {256, 512, 1024, 2048, 4096, 8192})
    if (n <= max_n) cases.push_back({n, n, n, "square"});
  for (int k : {32, 64, 128, 156}) cases.push_back({std::min(8192, max_n), std::min(8192, max_n), k, "rect"});

  using Fn = std::function<void(int, int, int, const float*, const float*, float*)>;
  struct Variant {
    std::string name;
    Fn fn;
    int max_n;  // skip larger sizes (the naive steps take seconds there)
  };
  std::vector<Variant> variants = {
      {"cublas", [&](int M, int N, int K, const float* A, const float* B, float* C) { lab01::matmul_cublas(handle, M, N, K, A, B, C); }, 1 << 30},
      {"step1_naive_col", lab01::matmul_naive_col, 4096},
      {"step2_naive_row", lab01::matmul_naive_row, 8192},
      {"step3_tiled", lab01::matmul_tiled, 8192},
      {"step4_regblock", lab01::matmul_regblock, 1 << 30},
      {"step5a_transposed_a", lab01::matmul_transposed_a, 1 << 30},
      {"step5b_conflict_free", lab01::matmul_conflict_free, 1 << 30},
      {"step5c_vector_loads", lab01::matmul_vector_loads, 1 << 30},
      {"step5d_double_buffer", lab01::matmul_double_buffer, 1 << 30},
      {"step5e_launch_bounds", lab01::matmul_launch_bounds, 1 << 30},
      // Step 5f keeps the column name of the results in docs/results (tools/reference_results.py numbers the
      // columns step1_ .. step5_; the lettered sub-steps are in the CSV beside them).
      {"step5_tuned", lab01::matmul_tuned, 1 << 30},
      {"step6_async_pipeline", lab01::matmul_async_pipeline, 1 << 30},
  };
  // The gates' cuBLAS call (tests/cublas_baseline.h, not the student's step 0) is the baseline column of the table.
  auto ref_cublas = [&](int M, int N, int K, const float* A, const float* B, float* C) {
    lab01::baseline::sgemm_rowmajor(handle, M, N, K, A, B, C);
  };

  std::ofstream csv(csv_path);
  csv << "lab,case,M,N,K,variant,run,median_ms,gflops,ratio_to_cublas\n";
  const int runs = quick ? 1 : 3;
  labkit::TimingOptions opt;
  opt.warmup = 2;
  opt.min_repeats = quick ? 3 : 5;
  opt.budget_ms = quick ? 100 : 250;
  std::printf("%-6s %6s %6s %6s  %-20s %10s %10s %8s\n", "case", "M", "N", "K", "variant", "ms", "GFLOP/s", "/cuBLAS");
  for (const auto& c : cases) {
    const std::size_t a = std::size_t(c.M) * c.K, b = std::size_t(c.K) * c.N, cc = std::size_t(c.M) * c.N;
    labkit::DeviceBuffer<float> A(a), B(b), C(cc);
    labkit::fill_random_device(A.data(), a, 1);
    labkit::fill_random_device(B.data(), b, 2);
    labkit::fill_random_device(C.data(), cc, 3);
    const double gflop = 2.0 * c.M * double(c.N) * c.K / 1e9;
    for (int run = 0; run < runs; ++run) {
      const double t_ref = labkit::time_gpu([&](int) { ref_cublas(c.M, c.N, c.K, A.data(), B.data(), C.data()); }, opt).median_ms;
      for (const auto& v : variants) {
        if (std::max({c.M, c.N, c.K}) > v.max_n) continue;
        double ms;
        try {
          ms = labkit::time_gpu([&](int) { v.fn(c.M, c.N, c.K, A.data(), B.data(), C.data()); }, opt).median_ms;
        } catch (const labkit::NotImplemented&) {
          continue;  // the student's tree: steps not written yet are left out
        }
        csv << "01," << c.kind << "," << c.M << "," << c.N << "," << c.K << "," << v.name << "," << run << "," << ms
            << "," << gflop / (ms * 1e-3) << "," << t_ref / ms << "\n";
        if (run == runs - 1)
          std::printf("%-6s %6d %6d %6d  %-20s %10.3f %10.1f %8.3f\n", c.kind.c_str(), c.M, c.N, c.K, v.name.c_str(),
                      ms, gflop / (ms * 1e-3), t_ref / ms);
      }
    }
    // CPU baseline (blocked, all cores) on the sizes where it finishes in reasonable time.
    if (double(c.M) * c.N * c.K <= 1024.0 * 1024 * 1024) {
      auto hA = labkit::random_floats(a, 1), hB = labkit::random_floats(b, 2), hC = labkit::random_floats(cc, 3);
      auto t0 = std::chrono::steady_clock::now();
      labkit::matmul_cpu_blocked(c.M, c.N, c.K, hA.data(), hB.data(), hC.data());
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      csv << "01," << c.kind << "," << c.M << "," << c.N << "," << c.K << ",cpu_blocked,0," << ms << ","
          << gflop / (ms * 1e-3) << ",\n";
      std::printf("%-6s %6d %6d %6d  %-20s %10.3f %10.1f\n", c.kind.c_str(), c.M, c.N, c.K, "cpu_blocked", ms,
                  gflop / (ms * 1e-3));
    }
  }
  std::cout << "wrote " << csv_path << "\n";
  return 0;
}
