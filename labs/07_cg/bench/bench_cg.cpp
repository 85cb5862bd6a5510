// Lab 07 bench: time per call of every building block and time per CG iteration, for 2D Poisson matrices from 10^3
// to 10^7 rows, against cuBLAS / cuSPARSE; achieved GFLOP/s and GB/s and the fraction of the bandwidth bound
// (bytes moved / measured memcpy bandwidth). Three runs of each (median of repeats within a run). Writes CSV;
// bench/plot_cg.py draws it.
//   lab07_bench_solution [--csv FILE] [--quick] [--max N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "cg.h"
#include "labkit/bench.h"
#include "labkit/buffer.h"
#include "labkit/cublas.h"
#include "labkit/cusparse.h"
#include "labkit/device.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "labkit/sparse.h"
#include "labkit/timing.h"
#include "tests/cusparse_baseline.h"

namespace {

constexpr int kShort = 16, kLong = 48;  // per-iteration time = (t(48 iterations) - t(16)) / 32

// What every size shares: the handles, the measured copy bandwidth, the CSV, the number of runs, the timing options.
struct Bench {
  labkit::CublasHandle& blas;
  labkit::CusparseHandle& sparse;
  double bw;  // device-to-device memcpy GB/s (read + write): the bandwidth bound
  std::ofstream csv;
  int runs;
  labkit::TimingOptions opt;
};

// The arrays of one size on the device: the 2D Poisson matrix, four random vectors, the partial sums and four
// scalars (the first two 1e-9 and -1e-9, the cuBLAS update's alphas).
struct Problem {
  labkit::Csr host;
  int n, nnz;
  labkit::DeviceBuffer<int> rp, ci;
  labkit::DeviceBuffer<double> vals;
  lab07::DeviceCsr A;
  labkit::DeviceBuffer<double> x, y, z, w, partials, scal;

  explicit Problem(int side)
      : host(labkit::poisson2d(side, side)), n(host.rows), nnz(host.nnz()), rp(host.row_ptr), ci(host.col_idx),
        vals(host.values), A{n, n, nnz, rp.data(), ci.data(), vals.data()}, x(n), y(n), z(n), w(n),
        partials(lab07::kMaxPartials), scal(4) {
    labkit::fill_random_device(x.data(), n, 1);
    labkit::fill_random_device(y.data(), n, 2);
    labkit::fill_random_device(z.data(), n, 3);
    labkit::fill_random_device(w.data(), n, 4);
    const double h_scal[2] = {1e-9, -1e-9};
    LABKIT_CUDA(cudaMemcpy(scal.data(), h_scal, sizeof h_scal, cudaMemcpyHostToDevice));
  }
};

struct Variant {
  std::string kase, name;
  double flops, bytes;
  std::function<void()> fn;      // one call (building blocks)
  std::function<void(int)> its;  // k iterations (solvers); per-iteration time by difference
};

// Milliseconds per call (building blocks) or per iteration (solvers, by difference of kShort and kLong iterations).
// The cuBLAS building blocks read their scalars from device memory; everything else runs in host pointer mode.
// Throws labkit::NotImplemented for a step not written yet.
double time_variant(const Variant& v, labkit::CublasHandle& blas, const labkit::TimingOptions& opt) {
  auto device_mode = [&](bool on) {
    LABKIT_CUBLAS(cublasSetPointerMode(blas, on ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
  };
  double ms = 0;
  try {
    const bool dev_ptr = v.name.rfind("cublas_", 0) == 0;  // the cuBLAS building blocks: device scalars
    device_mode(dev_ptr);
    if (v.fn) {
      ms = labkit::time_gpu([&](int) { v.fn(); }, opt).median_ms;
    } else {
      labkit::TimingOptions o = opt;
      o.warmup = 1;
      o.min_repeats = 3;
      const double t1 = labkit::time_gpu([&](int) { v.its(kShort); }, o).median_ms;
      const double t2 = labkit::time_gpu([&](int) { v.its(kLong); }, o).median_ms;
      ms = (t2 - t1) / (kLong - kShort);
    }
    device_mode(false);
  } catch (const labkit::NotImplemented&) {
    device_mode(false);
    throw;
  }
  return ms;
}

// One size: every building block and solver of the table (each with the flops and bytes it must do and move), every
// run, a CSV row each (and a table row for the last run).
void bench_size(Bench& b, int side) {
  Problem p(side);
  const int n = p.n, nnz = p.nnz;
  const lab07::DeviceCsr& A = p.A;
  auto& x = p.x;
  auto& y = p.y;
  auto& z = p.z;
  auto& w = p.w;
  auto& partials = p.partials;
  auto& scal = p.scal;
  auto& blas = b.blas;
  auto& sparse = b.sparse;
  lab07_baseline::CusparseSpmv cus(sparse, A, x.data(), y.data());
  const double spmv_bytes = 12.0 * nnz + 4.0 * (n + 1) + 16.0 * n;
  const double iter_bytes = spmv_bytes + 16.0 * n + 48.0 * n + 24.0 * n;
  const double iter_flops = 2.0 * nnz + 2.0 * n + 6.0 * n + 2.0 * n;
  lab07::CgOptions cg;
  cg.rel_tol = 0;
  const std::vector<Variant> variants = {
      {"dot", "cublas_ddot", 2.0 * n, 16.0 * n,
       [&] { LABKIT_CUBLAS(cublasDdot(blas, n, x.data(), 1, y.data(), 1, scal.data() + 2)); }, nullptr},
      {"dot", "step1_twopass", 2.0 * n, 16.0 * n,
       [&] { lab07::dot_twopass(n, x.data(), y.data(), partials.data(), scal.data() + 2); }, nullptr},
      {"dot", "step1_shuffle", 2.0 * n, 16.0 * n,
       [&] { lab07::dot_shuffle(n, x.data(), y.data(), partials.data(), scal.data() + 2); }, nullptr},
      {"update", "cublas_axpy_axpy_dot", 6.0 * n, 64.0 * n,
       [&] {
         LABKIT_CUBLAS(cublasDaxpy(blas, n, scal.data(), x.data(), 1, z.data(), 1));
         LABKIT_CUBLAS(cublasDaxpy(blas, n, scal.data() + 1, y.data(), 1, w.data(), 1));
         LABKIT_CUBLAS(cublasDdot(blas, n, w.data(), 1, w.data(), 1, scal.data() + 2));
       },
       nullptr},
      {"update", "step2_update_xr", 6.0 * n, 48.0 * n,
       [&] { lab07::update_xr(n, 1e-9, x.data(), y.data(), z.data(), w.data(), partials.data(), scal.data() + 2); },
       nullptr},
      {"spmv", "cusparse_spmv", 2.0 * nnz, spmv_bytes, [&] { cus(x.data(), y.data()); }, nullptr},
      {"spmv", "step3_thread_per_row", 2.0 * nnz, spmv_bytes, [&] { lab07::spmv_thread_per_row(A, x.data(), y.data()); },
       nullptr},
      {"spmv", "step3_warp_per_row", 2.0 * nnz, spmv_bytes, [&] { lab07::spmv_warp_per_row(A, x.data(), y.data()); },
       nullptr},
      {"iteration", "cusparse_cublas_cg", iter_flops, iter_bytes, nullptr,
       [&](int k) { lab07_baseline::cusparse_cublas_cg(blas, sparse, A, x.data(), z.data(), 0.0, k); }},
      {"iteration", "step4_cg_loop", iter_flops, iter_bytes, nullptr,
       [&](int k) {
         cg.max_iter = k;
         lab07::cg_solve(A, x.data(), z.data(), cg);
       }},
      {"iteration", "step6_cg_graph", iter_flops, iter_bytes, nullptr,
       [&](int k) {
         cg.max_iter = k;
         lab07::cg_solve_graph(A, x.data(), z.data(), cg);
       }},
  };
  for (int run = 0; run < b.runs; ++run) {
    for (const auto& v : variants) {
      double ms = 0;
      try {
        ms = time_variant(v, blas, b.opt);
      } catch (const labkit::NotImplemented&) {
        continue;  // the student's tree: steps not written yet are left out
      }
      const double gflops = v.flops / (ms * 1e-3) / 1e9, gbs = v.bytes / (ms * 1e-3) / 1e9;
      b.csv << "07," << v.kase << "," << n << "," << nnz << "," << v.name << "," << run << "," << ms << "," << gflops
            << "," << gbs << "," << gbs / b.bw << "\n";
      if (run == b.runs - 1)
        std::printf("%-10s %10d  %-22s %10.4f %9.1f %9.0f %7.2f\n", v.kase.c_str(), n, v.name.c_str(), ms, gflops,
                    gbs, gbs / b.bw);
    }
  }
  b.csv.flush();
}

}  // namespace

int main(int argc, char** argv) {
  const labkit::BenchArgs args = labkit::parse_bench_args(argc, argv, "lab07", "lab07_bench.csv", 20000000, "N");
  const bool quick = args.quick;
  const long long max_n = static_cast<long long>(args.max);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto dev = labkit::device_info();
  labkit::CublasHandle blas;
  labkit::CusparseHandle sparse;
  const double bw = labkit::memcpy_bandwidth_gbs();
  std::printf("device-to-device memcpy: %.0f GB/s (read + write)\n", bw);

  std::vector<int> sides = quick ? std::vector<int>{32, 316, 3163} : std::vector<int>{32, 100, 316, 1000, 3163};
  Bench b{blas, sparse, bw, std::ofstream(args.csv), quick ? 1 : 3, {}};
  b.csv << "lab,case,n,nnz,variant,run,median_ms,gflops,gbs,bound_fraction\n";
  b.opt.warmup = 2;
  b.opt.min_repeats = quick ? 3 : 5;
  b.opt.budget_ms = quick ? 50 : 150;
  std::printf("%-10s %10s  %-22s %10s %9s %9s %7s\n", "case", "n", "variant", "ms", "GFLOP/s", "GB/s", "/bound");

  for (int side : sides) {
    if (double(side) * side > double(max_n)) continue;
    if (elapsed_s() > 75) {
      std::cout << "time box reached: larger sizes skipped\n";
      break;
    }
    bench_size(b, side);
  }
  std::cout << "wrote " << args.csv << " in " << elapsed_s() << " s\n";
  return 0;
}
