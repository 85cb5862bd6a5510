// cg_multi: lab 08's solvers from the command line, on a Matrix Market file or a generated 2D Poisson matrix.
//
//   cg_multi (MATRIX.mtx | --poisson NX) [--devices N] [--virtual] [--scheme allgather|halo|device]
//            [--tol T] [--maxit N] [--quiet]
//
// --devices N: parts on GPUs 0..N-1 (default: every GPU); --virtual: all N parts on GPU 0 (default N = 2).
// b = A * ones, so the exact answer is x = 1 and the error is printed. Lab 07's `cg` is the one-GPU tool; this one
// is separate so that lab 07 builds without NCCL.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "labkit/mmio.h"
#include "multi_cg.h"

int main(int argc, char** argv) {
  std::string matrix, scheme = "device";
  int poisson = 0, devices = 0, maxit = -1;
  bool virt = false, quiet = false;
  double tol = 1e-8;
  const char* usage =
      "usage: cg_multi (MATRIX.mtx | --poisson NX) [--devices N] [--virtual] [--scheme allgather|halo|device]\n"
      "                [--tol T] [--maxit N] [--quiet]\n";
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--poisson") poisson = std::stoi(next());
      else if (a == "--devices") devices = std::stoi(next());
      else if (a == "--virtual") virt = true;
      else if (a == "--scheme") scheme = next();
      else if (a == "--tol") tol = std::stod(next());
      else if (a == "--maxit") maxit = std::stoi(next());
      else if (a == "--quiet") quiet = true;
      else if (a == "--help" || a == "-h") {
        std::cout << usage;
        return 0;
      } else if (!a.empty() && a[0] != '-' && matrix.empty()) matrix = a;
      else throw std::invalid_argument("unknown argument " + a);
    }
    if (matrix.empty() == (poisson == 0)) throw std::invalid_argument("give a matrix file or --poisson NX (one of them)");
    if (scheme != "allgather" && scheme != "halo" && scheme != "device")
      throw std::invalid_argument("--scheme must be allgather, halo or device");
    if (devices < 0) throw std::invalid_argument("--devices must be >= 1");
  } catch (const std::exception& e) {
    std::cerr << "cg_multi: " << e.what() << "\n" << usage;
    return 2;
  }
  try {
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // no NVLink multicast (see multi_cg.h); a value already set wins
    int count = 0;
    LABKIT_CUDA(cudaGetDeviceCount(&count));
    if (devices == 0) devices = virt ? 2 : count;
    if (!virt && devices > count)
      throw std::invalid_argument("--devices " + std::to_string(devices) + ": only " + std::to_string(count) + " GPUs");
    const labkit::Csr A = poisson ? labkit::poisson2d(poisson, poisson) : labkit::read_matrix_market(matrix);
    if (A.rows != A.cols) throw std::invalid_argument("the matrix is not square");
    const auto b = labkit::spmv_ref(A, std::vector<double>(std::size_t(A.cols), 1.0));
    std::vector<int> devs(static_cast<std::size_t>(devices));
    for (int k = 0; k < devices; ++k) devs[std::size_t(k)] = virt ? 0 : k;
    lab08::Team team(devs);
    std::unique_ptr<lab08::Solver> solver = scheme == "allgather" ? lab08::make_allgather_solver(team, A)
                                            : scheme == "halo"    ? lab08::make_halo_solver(team, A)
                                                                  : lab08::make_device_scalar_solver(team, A);
    lab08::CgOptions opt;
    opt.rel_tol = tol;
    opt.max_iter = maxit >= 0 ? maxit : std::clamp(2 * A.rows, 100, 1000000);
    if (!quiet)
      opt.progress = [&](int it, double res) {
        if (it % 100 == 0) std::printf("  iteration %7d  ||r||/||b|| = %.3e\n", it, res);
      };
    std::vector<double> x;
    const auto t0 = std::chrono::steady_clock::now();
    const auto res = solver->solve(b, x, opt);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double err = 0;
    for (double v : x) err = std::max(err, std::fabs(v - 1.0));
    std::printf("%s\n%d rows, %d entries; %s; %.1f ms (%.4f ms per iteration); max |x - 1| = %.3e\n",
                res.message.c_str(), A.rows, A.nnz(), team.describe().c_str(), ms,
                res.iterations ? ms / res.iterations : 0.0, err);
    return res.converged() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "cg_multi: " << e.what() << "\n";
    return 3;
  }
}
