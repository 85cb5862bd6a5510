// Lab 05 bench: bandwidth (GB/s) of every saxpy step, cublasSaxpy and a cudaMemcpy D2D copy of the same bytes
// over n = 2^10 .. 2^28 floats; fused vs unfused saxpy+norm; and the phases of the device fill and of the
// host -> device -> sort -> sum -> host round trip. Three runs of each (median of repeats within a run). CSV:
//   lab,case,n,variant,run,median_ms,gbs,ratio_to_memcpy
// (gbs counts the bytes the operation must move: 12n for a saxpy, 4n for a fill, 4n per copy direction; for sort
// it is the keys' bytes per second, for information).
//   lab05_bench_solution [--csv FILE] [--quick] [--max LOG2N]
#include <cstdio>
#include <cstdlib>
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
#include "labkit/timing.h"
#include "saxpy.h"

namespace {

// The sizes: n = 2^10 .. 2^max_log2, every second power (every sixth with --quick), always ending at 2^max_log2.
std::vector<int> sizes_log2(int max_log2, bool quick) {
  std::vector<int> log2s;
  for (int l = 10; l <= max_log2; l += quick ? 6 : 2) log2s.push_back(l);
  if (log2s.back() != max_log2) log2s.push_back(max_log2);
  return log2s;
}

using Fn = std::function<void(std::size_t, float, const float*, float*)>;
struct Variant {
  std::string name;
  Fn fn;
};

// Every saxpy-shaped step, in the order of the CSV.
std::vector<Variant> saxpy_variants(labkit::CublasHandle& handle) {
  return {
      {"step1_kernel", lab05::saxpy_kernel},
      {"step2_thrust_functor", lab05::saxpy_thrust_functor},
      {"step3_thrust_lambda", lab05::saxpy_thrust_lambda},
      {"step4_cublas", [&](std::size_t n, float a, const float* x, float* y) { lab05::saxpy_cublas(handle, n, a, x, y); }},
      {"step5_unfused_norm", [](std::size_t n, float a, const float* x, float* y) { lab05::saxpy_norm_unfused(n, a, x, y); }},
      {"step5_fused_norm", [](std::size_t n, float a, const float* x, float* y) { lab05::saxpy_norm_fused(n, a, x, y); }},
  };
}

// The CSV and the console table, one row each per measurement; the number of runs and the timing options.
struct Output {
  std::ofstream csv;
  int runs;
  labkit::TimingOptions opt;

  Output(const std::string& path, bool quick) : csv(path), runs(quick ? 1 : 3) {
    csv << "lab,case,n,variant,run,median_ms,gbs,ratio_to_memcpy\n";
    opt.warmup = 2;
    opt.min_repeats = quick ? 3 : 5;
    opt.max_repeats = 100;
    opt.budget_ms = quick ? 20 : 60;
    std::printf("%-6s %10s  %-22s %10s %10s %9s\n", "case", "n", "variant", "ms", "GB/s", "/memcpy");
  }
  void row(const char* kase, std::size_t n, const std::string& variant, int run, double ms, double gbs, double ratio,
           bool print) {
    csv << "05," << kase << "," << n << "," << variant << "," << run << "," << ms << "," << gbs << ",";
    if (ratio > 0) csv << ratio;
    csv << "\n";
    if (print) std::printf("%-6s %10zu  %-22s %10.4f %10.1f %9.3f\n", kase, n, variant.c_str(), ms, gbs, ratio);
  }
};

// Every saxpy and the cudaMemcpy of the same bytes, then step 7a's device fill, at each size.
void bench_bandwidth(Output& out, const std::vector<int>& log2s, const std::vector<Variant>& saxpys) {
  const int runs = out.runs;
  const labkit::TimingOptions& opt = out.opt;
  for (int l : log2s) {
    const std::size_t n = std::size_t(1) << l;
    labkit::DeviceBuffer<float> x(n), y(n);
    labkit::fill_random_device(x.data(), n, 1);
    labkit::fill_random_device(y.data(), n, 2);
    // Small arrays live in L2 (50 MB) between repeats: their "bandwidth" is L2's and launch overhead's, which is
    // what the sweep shows on its left; from ~2^24 on, every repeat goes to DRAM.
    const std::size_t copy_bytes = 6 * n;  // same traffic as a saxpy: 6n read + 6n written
    labkit::DeviceBuffer<unsigned char> src(copy_bytes), dst(copy_bytes);
    src.fill_bytes(1);
    const double gb = 12.0 * n / 1e9;
    for (int run = 0; run < runs; ++run) {
      const bool last = run == runs - 1;
      const double t_copy = labkit::time_gpu([&](int) {
        LABKIT_CUDA(cudaMemcpyAsync(dst.data(), src.data(), copy_bytes, cudaMemcpyDeviceToDevice));
      }, opt).median_ms;
      out.row("saxpy", n, "memcpy_d2d", run, t_copy, gb / (t_copy * 1e-3), 1.0, last);
      for (const auto& v : saxpys) {
        double ms;
        try {
          ms = labkit::time_gpu([&](int) { v.fn(n, 0.5f, x.data(), y.data()); }, opt).median_ms;
        } catch (const labkit::NotImplemented&) {
          continue;  // the student's tree: steps not written yet are left out
        }
        // Fused/unfused: GB/s of the 12n bytes the result needs (the unfused one actually moves 16n).
        out.row("saxpy", n, v.name, run, ms, gb / (ms * 1e-3), t_copy / ms, last);
      }
      // Step 7a: a device fill writes 4n bytes.
      try {
        const double ms = labkit::time_gpu([&](int rep) { lab05::fill_uniform(y.data(), n, rep, -1.f, 1.f); }, opt)
                              .median_ms;
        out.row("fill", n, "step7_fill_uniform", run, ms, 4.0 * n / 1e9 / (ms * 1e-3), 0, last);
      } catch (const labkit::NotImplemented&) {
      }
    }
  }
}

// Step 7b: the round trip, phase by phase, up to 2^26 floats (256 MB of pageable host memory).
void bench_round_trip(Output& out, const std::vector<int>& log2s) {
  const int runs = out.runs;
  for (int l : log2s) {
    if (l > 26) break;
    const std::size_t n = std::size_t(1) << l;
    for (int run = 0; run < runs; ++run) {
      std::vector<float> data = labkit::random_floats(n, 7 + run, -1000.f, 1000.f);
      lab05::SortSumReport r;
      try {
        r = lab05::sort_and_sum(data);
      } catch (const labkit::NotImplemented&) {
        break;
      }
      const double mb = 4.0 * n / 1e9;
      const bool last = run == runs - 1;
      out.row("sort", n, "step7_h2d", run, r.h2d_ms, mb / (r.h2d_ms * 1e-3), 0, last);
      out.row("sort", n, "step7_sort", run, r.sort_ms, mb / (r.sort_ms * 1e-3), 0, last);
      out.row("sort", n, "step7_reduce", run, r.reduce_ms, mb / (r.reduce_ms * 1e-3), 0, last);
      out.row("sort", n, "step7_d2h", run, r.d2h_ms, mb / (r.d2h_ms * 1e-3), 0, last);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab05", "lab05_bench.csv", 28, "LOG2N");
  const int max_log2 = static_cast<int>(args.max);
  if (max_log2 < 10 || max_log2 > 29) {
    std::cerr << "--max must be in 10..29\n";
    return 2;
  }
  const auto dev = labkit::device_info();
  labkit::CublasHandle handle;
  const std::vector<int> log2s = sizes_log2(max_log2, args.quick);
  const std::vector<Variant> saxpys = saxpy_variants(handle);
  Output out(args.csv, args.quick);
  bench_bandwidth(out, log2s, saxpys);
  bench_round_trip(out, log2s);
  std::cout << "wrote " << args.csv << "\n";
  return 0;
}
