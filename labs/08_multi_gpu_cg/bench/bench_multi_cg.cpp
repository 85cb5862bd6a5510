// Lab 08 bench: time per CG iteration of each scheme on 1..N GPUs against the one-GPU baseline, 2D Poisson, with
// the bytes of p each scheme moves between GPUs per iteration (computed from the partition and the halo plan)
// printed beside the times, and the exchange rate those bytes imply.
//
//   lab08_bench_solution [--grids 3163,10000] [--devices N] [--virtual] [--iters 200] [--csv FILE]
//
// --grids: 2D Poisson grid sides (3163^2 ~ 10^7 rows; 10000^2 = 10^8 rows needs ~10 GB on one GPU, ~5 GB per GPU
// on two, and ~20 GB of host memory for the matrix and the halo plans). --virtual: put 1..N parts on device 0
// (checks the code paths on a one-GPU machine; the times then say nothing about scaling).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "labkit/check.h"
#include "labkit/not_implemented.h"
#include "labkit/random.h"
#include "multi_cg.h"
#include "tests/baseline_cg.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Median wall time of f(), 3 runs after one warm-up.
double median_ms(const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < 3; ++i) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[1];
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> grids{3163, 10000};
  int devices = 0, iters = 200;
  bool virt = false;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--grids") grids = parse_list(next());
    else if (a == "--devices") devices = std::stoi(next());
    else if (a == "--iters") iters = std::stoi(next());
    else if (a == "--virtual") virt = true;
    else if (a == "--csv") csv = next();
    else {
      std::cerr << "usage: " << argv[0] << " [--grids 3163,10000] [--devices N] [--virtual] [--iters 200] [--csv FILE]\n";
      return a == "--help" ? 0 : 2;
    }
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // no NVLink multicast (see multi_cg.h); a value already set wins
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::cerr << "lab08 bench: no CUDA device\n";
    return 1;
  }
  if (devices <= 0) devices = virt ? 4 : count;
  if (!virt && devices > count) {
    std::cerr << "lab08 bench: --devices " << devices << " but only " << count << " GPUs\n";
    return 2;
  }
  std::ofstream out;
  if (!csv.empty()) {
    out.open(csv);
    out << "rows,nnz,scheme,parts,virtual,ms_per_iter,baseline_ms_per_iter,speedup,exchange_bytes,exchange_gbs\n";
  }
  std::printf("%12s %-15s %5s %12s %12s %8s %14s %12s\n", "rows", "scheme", "parts", "ms/iter", "1-GPU ms", "speedup",
              "p bytes/iter", "implied GB/s");
  const int short_iters = 10, long_iters = short_iters + iters;
  for (int g : grids) {
    const labkit::Csr A = labkit::poisson2d(g, g);
    const auto b = labkit::random_doubles(std::size_t(A.rows), 42);
    LABKIT_CUDA(cudaSetDevice(0));
    double base_ms = 0;
    {
      lab08_baseline::OneGpuCg base(A);
      base.set_b(b);
      base_ms = (median_ms([&] { base.run(long_iters); }) - median_ms([&] { base.run(short_iters); })) / iters;
    }
    for (int P = 1; P <= devices; ++P) {
      std::vector<int> devs(static_cast<std::size_t>(P));
      for (int k = 0; k < P; ++k) devs[std::size_t(k)] = virt ? 0 : k;
      lab08::Team team(devs);
      double bytes[3] = {0, 0, 0};
      try {
        const auto bounds = lab08::partition_rows(A, P);
        bytes[0] = lab08::allgather_bytes(bounds);
        bytes[1] = bytes[2] = lab08::halo_bytes(lab08::plan_halo(A, bounds));
      } catch (const labkit::NotImplemented& e) {
        std::cerr << "  (" << e.what() << ": bytes left at 0)\n";
      }
      const char* names[3] = {"allgather", "halo", "device_scalars"};
      for (int s = 0; s < 3; ++s) {
        try {
          std::unique_ptr<lab08::Solver> solver = s == 0   ? lab08::make_allgather_solver(team, A)
                                                  : s == 1 ? lab08::make_halo_solver(team, A)
                                                           : lab08::make_device_scalar_solver(team, A);
          std::vector<double> x;
          lab08::CgOptions opt;
          opt.rel_tol = 0;
          auto run = [&](int k) {
            opt.max_iter = k;
            solver->solve(b, x, opt);
          };
          const double ms =
              (median_ms([&] { run(long_iters); }) - median_ms([&] { run(short_iters); })) / iters;
          const double gbs = ms > 0 ? bytes[s] / (ms * 1e6) : 0;
          std::printf("%12d %-15s %5d %12.4f %12.4f %8.2f %14.3e %12.1f\n", A.rows, names[s], P, ms, base_ms,
                      base_ms / ms, bytes[s], gbs);
          if (out)
            out << A.rows << "," << A.nnz() << "," << names[s] << "," << P << "," << (virt ? 1 : 0) << "," << ms << ","
                << base_ms << "," << base_ms / ms << "," << bytes[s] << "," << gbs << "\n";
        } catch (const labkit::NotImplemented& e) {
          std::printf("%12d %-15s %5d   (%s)\n", A.rows, names[s], P, e.what());
        } catch (const std::exception& e) {
          std::printf("%12d %-15s %5d   failed: %s\n", A.rows, names[s], P, e.what());
        }
      }
    }
  }
  return 0;
}
