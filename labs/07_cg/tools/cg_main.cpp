// cg: solve A x = b for a symmetric positive definite matrix in a Matrix Market file, on the GPU, with this lab's
// conjugate gradient. Two builds of it: lab07_cg_student (your steps) and lab07_cg_solution (the reference's, when
// solutions/ is present).
//   cg MATRIX.mtx [--rhs FILE] [--tol T] [--maxit N] [--solver auto|loop|graph] [--blocks-per-sm auto|N]
//      [--out FILE] [--every K] [--quiet]
// Exit status: 0 converged, 1 not converged (not SPD, stagnation, max iterations, ...), 2 bad arguments or input.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cg.h"
#include "labkit/buffer.h"
#include "labkit/device.h"
#include "labkit/mmio.h"
#include "labkit/not_implemented.h"
#include "labkit/sparse.h"
#include "tools/cg_args.h"
#include "tools/tuning_cache.h"

namespace {

// b from a file: a Matrix Market matrix of n x 1 (array or coordinate), or n plain numbers ('%' / '#' comments).
std::vector<double> read_rhs(const std::string& path, int n) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the right-hand side");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.rfind("%%MatrixMarket", 0) == 0) {
    const labkit::Csr B = labkit::parse_matrix_market(text, path);
    if (B.rows != n || B.cols != 1)
      throw std::runtime_error(path + ": the right-hand side is " + std::to_string(B.rows) + " x " +
                               std::to_string(B.cols) + ", expected " + std::to_string(n) + " x 1");
    return labkit::to_dense(B);
  }
  std::vector<double> b;
  std::istringstream lines(text);
  std::string line;
  long long lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    const auto c = line.find_first_of("%#");
    if (c != std::string::npos) line.resize(c);
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      std::size_t used = 0;
      double v = 0;
      try {
        v = std::stod(w, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != w.size() || !std::isfinite(v))
        throw std::runtime_error(path + ": line " + std::to_string(lineno) + ": '" + w + "' is not a finite number");
      b.push_back(v);
    }
  }
  if (b.size() != std::size_t(n))
    throw std::runtime_error(path + ": " + std::to_string(b.size()) + " values, the matrix has " + std::to_string(n) +
                             " rows");
  return b;
}

// The blocks per SM of the reductions: --blocks-per-sm N as given; auto (0): step 5's timed choice, or the default
// while step 5 is not written.
int choose_blocks_per_sm(const lab07_cli::CgArgs& args, int n) {
  int blocks_per_sm = args.blocks_per_sm;
  if (blocks_per_sm == 0) {
    blocks_per_sm = lab07::kDefaultBlocksPerSm;
    if (n > 0) {
      try {
        // Step 5 times the choice; this tool remembers it per GPU and size class (tools/tuning_cache.h).
        const std::string cache = lab07_cli::default_tuning_cache();
        const std::string key = lab07_cli::tuning_key(labkit::device_info().name, n);
        int bps = lab07_cli::cache_lookup(cache, key, lab07::kMaxBlocksPerSm);
        const bool cached = bps > 0;
        if (!cached) {
          bps = lab07::tune_blocks_per_sm(n).blocks_per_sm;
          lab07_cli::cache_store(cache, key, bps);
        }
        blocks_per_sm = bps;
        if (!args.quiet) std::printf("tuning  %d blocks per SM (%s)\n", bps, cached ? "cached" : "measured");
      } catch (const labkit::NotImplemented&) {
        if (!args.quiet) std::printf("tuning  step 5 not implemented: %d blocks per SM\n", blocks_per_sm);
      }
    }
  }
  return blocks_per_sm;
}

// The solve as --solver says: step 4's host loop, step 6's CUDA graph, or (auto) the graph, falling back to the loop
// while step 6 is not written. `used` names the one that ran.
lab07::CgResult solve(const std::string& solver, const lab07::DeviceCsr& dA, const double* db, double* dx,
                      const lab07::CgOptions& opt, std::string& used) {
  lab07::CgResult res;
  auto run_loop = [&] {
    used = "step 4 (host loop)";
    res = lab07::cg_solve(dA, db, dx, opt);
  };
  auto run_graph = [&] {
    used = "step 6 (CUDA graph)";
    res = lab07::cg_solve_graph(dA, db, dx, opt);
  };
  if (solver == "loop") {
    run_loop();
  } else if (solver == "graph") {
    run_graph();
  } else {
    try {
      run_graph();
    } catch (const labkit::NotImplemented&) {
      run_loop();
    }
  }
  return res;
}

// The outcome: status, residuals and times; with b = A * ones the error against the known x; x to --out.
void report(const lab07_cli::CgArgs& args, const lab07::CgResult& res, const std::string& used,
            const std::vector<double>& x, bool rhs_ones, double solve_s, std::chrono::steady_clock::time_point t0) {
  std::printf("status  %s (%s)\n", labkit::to_string(res.status), used.c_str());
  std::printf("        %d iterations, true residual ||b - Ax|| / ||b|| = %.3e, updated residual %.3e\n",
              res.iterations, res.relative_residual, res.updated_residual);
  std::printf("        solve %.3f s (%.3f ms per iteration), total %.3f s\n", solve_s,
              res.iterations ? 1e3 * solve_s / res.iterations : 0.0,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (rhs_ones) {
    double err = 0;
    for (double v : x) err = std::max(err, std::fabs(v - 1.0));
    std::printf("        b = A * ones: max |x - 1| = %.3e\n", err);
  }
  if (!res.converged()) std::printf("        %s\n", res.message.c_str());
  if (!args.out.empty()) {
    std::ofstream out(args.out);
    out.precision(17);
    for (double v : x) out << v << "\n";
    if (!out) throw std::runtime_error(args.out + ": cannot write x");
    if (!args.quiet) std::printf("wrote   x to %s\n", args.out.c_str());
  }
}

// Reads the matrix and b, solves on the GPU and reports; the exit status of main.
int run(const lab07_cli::CgArgs& args) {
  const auto t0 = std::chrono::steady_clock::now();
  labkit::MatrixMarketHeader header;
  const labkit::Csr A = labkit::read_matrix_market(args.matrix, {}, &header);
  if (A.rows != A.cols) throw std::runtime_error(args.matrix + ": the matrix is not square");
  const int n = A.rows;
  if (!args.quiet) {
    std::printf("matrix  %s: %d x %d, %d stored entries (%s %s %s)\n", args.matrix.c_str(), A.rows, A.cols, A.nnz(),
                header.format.c_str(), header.field.c_str(), header.symmetry.c_str());
    if (!labkit::is_symmetric(A, 1e-12)) std::printf("warning: the matrix is not symmetric; CG may fail\n");
  }
  const bool rhs_ones = args.rhs.empty();
  const std::vector<double> b = rhs_ones ? labkit::spmv_ref(A, std::vector<double>(std::size_t(n), 1.0))
                                         : read_rhs(args.rhs, n);
  if (!labkit::has_device()) throw std::runtime_error(labkit::no_device_reason());
  if (!args.quiet) std::printf("device  %s\n", labkit::describe(labkit::device_info()).c_str());

  labkit::DeviceBuffer<int> rp(A.row_ptr), ci(A.col_idx);
  labkit::DeviceBuffer<double> vals(A.values), db(b), dx(static_cast<std::size_t>(n));
  const lab07::DeviceCsr dA{A.rows, A.cols, A.nnz(), rp.data(), ci.data(), vals.data()};

  lab07::CgOptions opt;
  opt.rel_tol = args.tol;
  opt.max_iter = args.maxit >= 0 ? args.maxit : lab07_cli::default_maxit(n);
  opt.blocks_per_sm = choose_blocks_per_sm(args, n);
  const int every = args.every > 0 ? args.every : std::max(1, opt.max_iter / 20);
  int last_printed = 0;
  if (!args.quiet) {
    std::printf("solve   tolerance %.3g, at most %d iterations\n", opt.rel_tol, opt.max_iter);
    std::printf("%10s  %14s\n", "iteration", "||r|| / ||b||");
    opt.progress = [&](int it, double res) {
      if (it - last_printed >= every || it == 1) {
        std::printf("%10d  %14.6e\n", it, res);
        last_printed = it;
      }
    };
  }
  const auto ts = std::chrono::steady_clock::now();
  std::string used;
  const lab07::CgResult res = solve(args.solver, dA, db.data(), dx.data(), opt, used);
  const double solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
  const auto x = dx.download();
  report(args, res, used, x, rhs_ones, solve_s, t0);
  return res.converged() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  lab07_cli::CgArgs args;
  try {
    args = lab07_cli::parse_cg_args(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::cerr << "cg: " << e.what() << "\n" << lab07_cli::cg_usage();
    return 2;
  }
  if (args.help) {
    std::cout << lab07_cli::cg_usage();
    return 0;
  }
  try {
    return run(args);
  } catch (const labkit::NotImplemented& e) {
    std::cerr << "cg: " << e.what() << " (write steps 1-4 of lab 07 first)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cg: " << e.what() << "\n";
    return 2;
  }
}
