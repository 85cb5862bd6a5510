// Lab 04 bench: keys per second of every step, thrust::sort, thrust::sort_by_key and std::sort (CPU) for n from
// 2^10 to 2^26 (plus a few sizes just above a power of two, where the network pays for the padding).
// Each timed run restores the unsorted input first (a device-to-device copy, included in every GPU figure).
// Three runs of each (median of repeats within a run). Writes CSV; plot it with
//   tools/plot_bench.py lab04_bench.csv --x n --y gkeys_per_s --series variant --where case=pow2 --logx --logy
//       --title "Lab 04: sorting 32-bit float keys on H100" --ylabel "Gkeys/s" --out lab04.png
//   lab04_bench_solution [--csv FILE] [--quick] [--max LOG2N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "bitonic_sort.h"
#include "labkit/bench.h"
#include "labkit/buffer.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "tests/thrust_sort.h"

namespace {

// One size to sort: n = 2^e ("pow2") or 2^e + 1 ("pow2+1", where the network pays for the padding).
struct Case {
  std::size_t n;
  std::string kind;
};

// 2^10 .. 2^max_log, every second power (every fourth with --quick), then 2^16+1, 2^20+1 and 2^24+1 up to 2^max_log.
std::vector<Case> bench_cases(int max_log, bool quick) {
  std::vector<Case> cases;
  for (int e = 10; e <= max_log; e += (quick ? 4 : 2)) cases.push_back({std::size_t(1) << e, "pow2"});
  for (int e : {16, 20, 24})
    if (e <= max_log) cases.push_back({(std::size_t(1) << e) + 1, "pow2+1"});
  return cases;
}

using Fn = std::function<void(float*, std::uint32_t*, std::size_t)>;
struct Variant {
  std::string name;
  Fn fn;
  bool pow2_only;
  std::size_t max_n;  // time box: the slow steps stop earlier
};

// thrust's two sorts and every step, in the order of the CSV and the table (thrust_sort first: the ratio column of
// the others is to it).
std::vector<Variant> sort_variants() {
  const std::size_t big = std::size_t(1) << 30;
  return {
      {"thrust_sort", [](float* k, std::uint32_t*, std::size_t n) { lab04::baseline::thrust_sort(k, n); }, false, big},
      {"thrust_sort_by_key", [](float* k, std::uint32_t* v, std::size_t n) { lab04::baseline::thrust_sort_by_key(k, v, n); },
       false, big},
      {"step1_global_pow2", [](float* k, std::uint32_t*, std::size_t n) { lab04::sort_global_pow2(k, n); }, true,
       std::size_t(1) << 24},
      {"step2_global", [](float* k, std::uint32_t*, std::size_t n) { lab04::sort_global(k, n, lab04::Order::ascending); },
       false, std::size_t(1) << 24},
      {"step3_shared", [](float* k, std::uint32_t*, std::size_t n) { lab04::sort_shared(k, n, lab04::Order::ascending); },
       false, big},
      {"step4_pairs",
       [](float* k, std::uint32_t* v, std::size_t n) { lab04::sort_pairs(k, v, n, lab04::Order::ascending); }, false,
       big},
      {"step5_fused", [](float* k, std::uint32_t*, std::size_t n) { lab04::sort_fused(k, n, lab04::Order::ascending); },
       false, big},
  };
}

// The CSV and the console table (their headings are written at once), the number of runs and the timing options.
struct Output {
  std::ofstream csv;
  bool quick;
  int runs;
  labkit::TimingOptions opt;

  Output(const std::string& path, bool quick_run) : csv(path), quick(quick_run), runs(quick_run ? 1 : 3) {
    csv << "lab,case,n,variant,run,median_ms,gkeys_per_s,ratio_to_thrust\n";
    opt.warmup = 1;
    opt.min_repeats = quick ? 3 : 5;
    opt.budget_ms = quick ? 50 : 150;
    std::printf("%-7s %10s  %-20s %10s %10s %9s\n", "case", "n", "variant", "ms", "Gkeys/s", "/thrust");
  }
  // One GPU sort's time: a CSV row for every run, a table row for the last one.
  void row(const Case& c, const std::string& variant, int run, double ms, double ratio) {
    const std::size_t n = c.n;
    csv << "04," << c.kind << "," << n << "," << variant << "," << run << "," << ms << "," << n / (ms * 1e6) << ","
        << ratio << "\n";
    if (run == runs - 1)
      std::printf("%-7s %10zu  %-20s %10.3f %10.3f %9.3f\n", c.kind.c_str(), n, variant.c_str(), ms, n / (ms * 1e6),
                  ratio);
  }
};

// Every variant that sorts this size, in each run. Each timed sort first restores the unsorted keys and the values
// 0..n-1 (device-to-device copies, counted in its time).
void bench_gpu(Output& out, const Case& c, const std::vector<Variant>& variants) {
  const std::size_t n = c.n;
  labkit::DeviceBuffer<float> src(n), keys(n);
  labkit::DeviceBuffer<std::uint32_t> idx(n), values(n);
  labkit::fill_random_device(src.data(), n, 1);
  {
    std::vector<std::uint32_t> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = std::uint32_t(i);
    idx.upload(h);
  }
  auto timed = [&](const Variant& v) {
    return labkit::time_gpu(
               [&](int) {
                 LABKIT_CUDA(cudaMemcpyAsync(keys.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice));
                 LABKIT_CUDA(cudaMemcpyAsync(values.data(), idx.data(), n * sizeof(std::uint32_t),
                                             cudaMemcpyDeviceToDevice));
                 v.fn(keys.data(), values.data(), n);
               },
               out.opt)
        .median_ms;
  };
  for (int run = 0; run < out.runs; ++run) {
    double t_thrust = 0;
    for (const auto& v : variants) {
      if (n > v.max_n || (v.pow2_only && (n & (n - 1)))) continue;
      double ms;
      try {
        ms = timed(v);
      } catch (const labkit::NotImplemented&) {
        continue;  // the student's tree: steps not written yet are left out
      }
      if (v.name == "thrust_sort") t_thrust = ms;
      const double ratio = t_thrust > 0 ? t_thrust / ms : 0;
      out.row(c, v.name, run, ms, ratio);
    }
  }
}

// CPU baseline: std::sort of the same keys (one core), up to 2^24 (about 1.5 s there).
void bench_std_sort(Output& out, const Case& c) {
  const std::size_t n = c.n;
  if (n > (std::size_t(1) << (out.quick ? 22 : 24))) return;
  auto h = labkit::random_floats(n, 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::sort(h.begin(), h.end());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.csv << "04," << c.kind << "," << n << ",std_sort_cpu,0," << ms << "," << n / (ms * 1e6) << ",\n";
  std::printf("%-7s %10zu  %-20s %10.3f %10.3f\n", c.kind.c_str(), n, "std_sort_cpu", ms, n / (ms * 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab04", "lab04_bench.csv", 26, "LOG2N");
  const int max_log = args.quick ? std::min(static_cast<int>(args.max), 24) : static_cast<int>(args.max);
  const std::vector<Variant> variants = sort_variants();
  Output out(args.csv, args.quick);
  for (const auto& c : bench_cases(max_log, args.quick)) {
    bench_gpu(out, c, variants);
    bench_std_sort(out, c);
  }
  std::cout << "wrote " << args.csv << "\n";
  return 0;
}
