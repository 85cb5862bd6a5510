// Lab 03 bench, three experiments, one CSV (column `case`: offset | stride | sweep):
//   offset  GB/s of copy_offset for offsets 0..32 floats (n = 2^25 elements, 128 MB per array)
//   stride  GB/s (useful bytes) of copy_strided for strides 1..32 (n = 2^24; the input spans up to 2 GB)
//   sweep   GB/s of the row-major and diagonal transposes for every size of lab03::sweep_sizes(), with dips
//           (> 10 % below the median of the neighbours) flagged automatically
// cudaMemcpy device-to-device of the same byte count is measured alongside the copies as the ceiling.
// bench/plot_access_patterns.py draws the three figures from the CSV.
//   lab03_bench_student [--csv FILE] [--quick]    (lab03_bench_solution: the same with the reference)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "access_patterns.h"
#include "labkit/bench.h"
#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "sweep.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double gbs(std::size_t n, double ms) { return 2.0 * n * sizeof(float) / (ms * 1e-3) / 1e9; }

// One row of a copy experiment. ratio: GB/s relative to the first point of the series (offset 0 / stride 1).
void copy_row(std::ostream& csv, const char* kind, std::size_t n, int param, const char* variant, int run, double ms,
              double ratio) {
  csv << "03," << kind << ",1," << n << "," << param << "," << variant << "," << run << "," << ms << ","
      << gbs(n, ms) << "," << ratio << ",\n";
}

// What every experiment shares: the CSV, the number of runs and the timing options.
struct Bench {
  std::ofstream& csv;
  bool quick;
  int runs;
  labkit::TimingOptions opt;
};

Bench make_bench(std::ofstream& csv, bool quick) {
  Bench b{csv, quick, quick ? 1 : 3, {}};
  b.opt.warmup = 2;
  b.opt.min_repeats = quick ? 3 : 10;
  b.opt.budget_ms = quick ? 10 : 30;
  return b;
}

// ---- offset and stride ----
// One copy kernel over a range of its parameter (the offset 0..32 or the stride 1..32), each value's GB/s also
// relative to the first one, and cudaMemcpy of the same useful bytes as the ceiling.
struct CopySeries {
  const char* kind;     // the CSV's case and the table's first column: "offset" | "stride"
  const char* title;    // "offset copy" | "strided copy"
  const char* versus;   // the ratio column's heading
  const char* variant;  // the CSV's variant for the kernel
  std::size_t n, in_size, out_size;
  unsigned seed;
  int first, last;
  std::function<void(std::size_t, int, const float*, float*)> copy;
};

void bench_copies(const Bench& b, const CopySeries& c) {
  labkit::DeviceBuffer<float> in(c.in_size), out(c.out_size);
  labkit::fill_random_device(in.data(), in.size(), c.seed);
  std::printf("\n%s, n = %zu floats\n%8s %10s %9s %9s\n", c.title, c.n, c.kind, "ms", "GB/s", c.versus);
  try {
    for (int run = 0; run < b.runs; ++run) {
      const double t_memcpy =
          labkit::time_gpu([&](int) { LABKIT_CUDA(cudaMemcpyAsync(out.data(), in.data(), c.n * sizeof(float),
                                                                  cudaMemcpyDeviceToDevice)); }, b.opt)
              .median_ms;
      copy_row(b.csv, c.kind, c.n, c.first, "memcpy_d2d", run, t_memcpy, 0);
      double t_first = 0;
      for (int v = c.first; v <= c.last; ++v) {
        const double ms = labkit::time_gpu([&](int) { c.copy(c.n, v, in.data(), out.data()); }, b.opt).median_ms;
        if (v == c.first) t_first = ms;
        copy_row(b.csv, c.kind, c.n, v, c.variant, run, ms, t_first / ms);
        if (run == b.runs - 1) std::printf("%8d %10.4f %9.1f %9.3f\n", v, ms, gbs(c.n, ms), t_first / ms);
      }
      if (run == b.runs - 1) std::printf("%8s %10.4f %9.1f\n", "memcpy", t_memcpy, gbs(c.n, t_memcpy));
    }
  } catch (const labkit::NotImplemented& e) {
    std::printf("  skipped: %s\n", e.what());
  }
}

void bench_offset(const Bench& b) {
  const std::size_t n = b.quick ? (std::size_t(1) << 23) : (std::size_t(1) << 25);
  bench_copies(b, {"offset", "offset copy", "/off 0", "copy_offset", n, n + lab03::kMaxOffset, n + lab03::kMaxOffset,
                   1, 0, lab03::kMaxOffset, lab03::copy_offset});
}

void bench_stride(const Bench& b) {
  const std::size_t n = b.quick ? (std::size_t(1) << 22) : (std::size_t(1) << 24);
  bench_copies(b, {"stride", "strided copy", "/str 1", "copy_strided", n, (n - 1) * lab03::kMaxStride + 1, n, 2, 1,
                   lab03::kMaxStride, lab03::copy_strided});
}

// ---- sweep ----
// The sweep's timings: per run, one time per size for each ordering. Without step 3 (the student's tree) only the
// row-major transpose is timed and the diagonal column repeats it (have_diagonal false).
struct SweepTimes {
  std::vector<int> sizes;
  std::vector<std::vector<double>> row_ms, diag_ms;
  bool have_diagonal = true;
};

SweepTimes time_sweep(const Bench& b) {
  const int runs = b.runs;
  SweepTimes t;
  t.sizes = lab03::sweep_sizes();
  labkit::TimingOptions sopt = b.opt;
  sopt.budget_ms = b.quick ? 4 : 12;
  sopt.min_repeats = b.quick ? 3 : 7;
  t.row_ms.resize(runs);
  t.diag_ms.resize(runs);
  for (int run = 0; run < runs; ++run)
    for (int n : t.sizes) {
      if (t.have_diagonal) {
        try {
          const auto cmp = lab03::time_orderings(n, sopt);
          t.row_ms[run].push_back(cmp.baseline.median_ms);
          t.diag_ms[run].push_back(cmp.candidate.median_ms);
          continue;
        } catch (const labkit::NotImplemented& e) {
          std::printf("\nsweep: diagonal %s (row-major only)\n", e.what());
          t.have_diagonal = false;
        }
      }
      // Row-major only (the student's tree before step 3): time it alone; the diagonal column repeats it.
      labkit::DeviceBuffer<float> in(std::size_t(n) * n), out(std::size_t(n) * n);
      labkit::fill_random_device(in.data(), in.size(), 3);
      const double ms =
          labkit::time_gpu([&](int) { lab03::transpose_rowmajor(n, n, in.data(), out.data()); }, sopt).median_ms;
      t.row_ms[run].push_back(ms);
      t.diag_ms[run].push_back(ms);
    }
  return t;
}

// The sweep's CSV rows and table, with the dips flagged.
void report_sweep(std::ostream& csv, int runs, const SweepTimes& t) {
  const auto& sizes = t.sizes;
  const auto& row_ms = t.row_ms;
  const auto& diag_ms = t.diag_ms;
  const bool have_diagonal = t.have_diagonal;
  // Dips are flagged on the median over runs (one noisy repeat should not make a dip), and that flag is written
  // on every run's row of the size.
  std::vector<double> row_med(sizes.size()), diag_med(sizes.size()), row_g(sizes.size()), diag_g(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::vector<double> r, d;
    for (int run = 0; run < runs; ++run) r.push_back(row_ms[run][i]), d.push_back(diag_ms[run][i]);
    row_med[i] = median(r);
    diag_med[i] = median(d);
    row_g[i] = lab03::transpose_gbs(sizes[i], row_med[i]);
    diag_g[i] = lab03::transpose_gbs(sizes[i], diag_med[i]);
  }
  const auto row_dip = lab03::flag_dips(row_g), diag_dip = lab03::flag_dips(diag_g);
  for (int run = 0; run < runs; ++run) {
    if (have_diagonal) {
      lab03::write_sweep_rows(csv, sizes, row_ms[run], diag_ms[run], row_dip, diag_dip, run);
    } else {
      for (std::size_t i = 0; i < sizes.size(); ++i)
        csv << "03,sweep," << sizes[i] << "," << sizes[i] << "," << sizes[i] << ",rowmajor," << run << ","
            << row_ms[run][i] << "," << lab03::transpose_gbs(sizes[i], row_ms[run][i]) << ",1,"
            << int(row_dip[i]) << "\n";
    }
  }
  std::printf("\ntranspose sweep (median of %d runs)\n%6s %10s %10s %8s  %s\n", runs, "n", "row GB/s", "diag GB/s",
              "diag/row", "dips");
  int dips = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const bool dd = have_diagonal && diag_dip[i];
    dips += row_dip[i] + dd;
    std::printf("%6d %10.1f %10.1f %8.3f  %s%s\n", sizes[i], row_g[i], have_diagonal ? diag_g[i] : 0.0,
                have_diagonal ? row_med[i] / diag_med[i] : 0.0, row_dip[i] ? "DIP(row-major) " : "",
                dd ? "DIP(diagonal)" : "");
  }
  std::printf("%d dip(s) flagged over %zu sizes\n", dips, sizes.size());
}

}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab03", "lab03_bench.csv");
  std::ofstream csv(args.csv);
  csv << lab03::kSweepCsvHeader << "\n";
  const Bench b = make_bench(csv, args.quick);
  bench_offset(b);
  bench_stride(b);
  report_sweep(csv, b.runs, time_sweep(b));
  std::cout << "wrote " << args.csv << "\n";
  return 0;
}
