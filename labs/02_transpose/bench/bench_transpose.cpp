// Lab 02 bench: effective bandwidth (bytes read + written per second) of every step and of cudaMemcpy
// device-to-device, over square sizes 256..16384 and rectangular / odd shapes. Small matrices rotate through
// several input/output sets so that repeats are not served from L2. Three runs each (median of repeats within a
// run). Writes CSV; bench/plot_transpose.py draws GB/s vs size from it.
//   lab02_bench_student [--csv FILE] [--quick]    (lab02_bench_solution: the same with the reference)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "labkit/bench.h"
#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "transpose.h"

namespace {
struct Case {
  int rows, cols;
  std::string kind;
};
}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab02", "lab02_bench.csv");
  const std::string csv_path = args.csv;
  const bool quick = args.quick;

  std::vector<Case> cases;
  for (int n : {256, 512, 1024, 2048, 4096, 8192, 16384})
    if (!quick || n <= 8192) cases.push_back({n, n, "square"});
  cases.push_back({16384, 1024, "rect"});
  cases.push_back({1024, 16384, "rect"});
  cases.push_back({4099, 3001, "odd"});
  cases.push_back({1, 1 << 24, "row"});

  using Fn = std::function<void(int, int, const float*, float*)>;
  struct Variant {
    std::string name;
    Fn fn;
  };
  const std::vector<Variant> variants = {
      {"memcpy_d2d",
       [](int r, int c, const float* in, float* out) {
         LABKIT_CUDA(cudaMemcpyAsync(out, in, std::size_t(r) * c * sizeof(float), cudaMemcpyDeviceToDevice));
       }},
      {"step1_copy_tiled", lab02::copy_tiled},
      {"step2_naive", lab02::transpose_naive},
      {"step3_shared", lab02::transpose_shared},
      {"step4_padded", lab02::transpose_padded},
      {"step5_tuned", lab02::transpose_tuned},
  };

  std::ofstream csv(csv_path);
  csv << "lab,case,rows,cols,variant,run,median_ms,gbs,ratio_to_memcpy\n";
  const int runs = quick ? 1 : 3;
  labkit::TimingOptions opt;
  opt.warmup = 2;
  opt.min_repeats = quick ? 3 : 10;
  opt.budget_ms = quick ? 20 : 60;
  std::printf("%-7s %6s %9s  %-18s %10s %9s %9s\n", "case", "rows", "cols", "variant", "ms", "GB/s", "/memcpy");
  for (const auto& c : cases) {
    const std::size_t n = std::size_t(c.rows) * c.cols;
    const double gb = 2.0 * n * sizeof(float) / 1e9;
    // Enough sets that two uses of one set are > 3x L2 apart; each set is an input and an output.
    const int sets = labkit::rotation_sets(2 * n * sizeof(float));
    std::vector<labkit::DeviceBuffer<float>> in, out;
    for (int s = 0; s < sets; ++s) {
      in.emplace_back(n);
      out.emplace_back(n);
      labkit::fill_random_device(in.back().data(), n, 1000 + s);
    }
    for (int run = 0; run < runs; ++run) {
      double t_memcpy = 0;
      for (const auto& v : variants) {
        double ms;
        try {
          ms = labkit::time_gpu([&](int rep) { v.fn(c.rows, c.cols, in[rep % sets].data(), out[rep % sets].data()); },
                                opt)
                   .median_ms;
        } catch (const labkit::NotImplemented&) {
          continue;  // the student's tree: steps not written yet are left out
        }
        if (v.name == "memcpy_d2d") t_memcpy = ms;
        const double ratio = t_memcpy > 0 ? t_memcpy / ms : 0;
        csv << "02," << c.kind << "," << c.rows << "," << c.cols << "," << v.name << "," << run << "," << ms << ","
            << gb / (ms * 1e-3) << "," << ratio << "\n";
        if (run == runs - 1)
          std::printf("%-7s %6d %9d  %-18s %10.4f %9.1f %9.3f\n", c.kind.c_str(), c.rows, c.cols, v.name.c_str(), ms,
                      gb / (ms * 1e-3), ratio);
      }
    }
  }
  std::cout << "wrote " << csv_path << "\n";
  return 0;
}
