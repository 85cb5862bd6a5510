// The command line of the cg tool (lab07_cg_student, lab07_cg_solution), parsed apart from main() so that the gates
// can test it on the CPU.
//   cg MATRIX.mtx [--rhs FILE] [--tol T] [--maxit N] [--solver auto|loop|graph] [--blocks-per-sm auto|N]
//                 [--out FILE] [--every K] [--quiet]
// Options take their value as the next argument or after '=' (--tol=1e-10).
#pragma once
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace lab07_cli {

struct CgArgs {
  std::string matrix;             // Matrix Market file (required)
  std::string rhs;                // right-hand side: Matrix Market array/coordinate n x 1, or n numbers; "" = A*ones
  std::string out;                // where to write x (one value per line); "" = nowhere
  double tol = 1e-8;              // relative residual ||b - A x|| / ||b||
  int maxit = -1;                 // -1: 2n clamped to [100, 10^6]
  std::string solver = "auto";    // auto: graph (step 6) if implemented, else loop (step 4)
  int blocks_per_sm = 0;          // 0: auto (step 5's tuner, cached)
  int every = 0;                  // print progress every K iterations; 0: about 20 lines per solve
  bool quiet = false;
  bool help = false;
};

inline const char* cg_usage() {
  return "usage: lab07_cg_student MATRIX.mtx [--rhs FILE] [--tol T] [--maxit N] [--solver auto|loop|graph]\n"
         "                        [--blocks-per-sm auto|N] [--out FILE] [--every K] [--quiet]\n"
         "Solves A x = b by conjugate gradient on the GPU (A symmetric positive definite, Matrix Market), with\n"
         "your steps (lab07_cg_solution: the same with the reference solution's).\n"
         "Without --rhs, b = A * ones, so the exact answer is x = 1 and the error is reported too.\n";
}

namespace detail {
inline double parse_double(const std::string& opt, const std::string& v) {
  std::size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || !std::isfinite(d))
    throw std::invalid_argument(opt + ": '" + v + "' is not a finite number");
  return d;
}
inline long long parse_int(const std::string& opt, const std::string& v) {
  std::size_t used = 0;
  long long i = 0;
  try {
    i = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw std::invalid_argument(opt + ": '" + v + "' is not an integer");
  return i;
}
}  // namespace detail

// Throws std::invalid_argument with a one-line reason for anything it cannot accept.
inline CgArgs parse_cg_args(const std::vector<std::string>& args) {
  CgArgs a;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string opt = args[i], value;
    bool has_value = false;
    if (opt.rfind("--", 0) == 0) {
      const auto eq = opt.find('=');
      if (eq != std::string::npos) {
        value = opt.substr(eq + 1);
        opt = opt.substr(0, eq);
        has_value = true;
      }
    }
    auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw std::invalid_argument(opt + " needs a value");
      return args[++i];
    };
    auto no_value = [&] {
      if (has_value) throw std::invalid_argument(opt + " takes no value");
    };
    if (opt == "-h" || opt == "--help") {
      no_value();
      a.help = true;
    } else if (opt == "--quiet" || opt == "-q") {
      no_value();
      a.quiet = true;
    } else if (opt == "--rhs") {
      a.rhs = take();
    } else if (opt == "--out") {
      a.out = take();
    } else if (opt == "--tol") {
      a.tol = detail::parse_double(opt, take());
      if (a.tol < 0) throw std::invalid_argument("--tol must be >= 0");
    } else if (opt == "--maxit") {
      const long long m = detail::parse_int(opt, take());
      if (m < 0 || m > 2147483647LL) throw std::invalid_argument("--maxit must be in [0, 2^31-1]");
      a.maxit = static_cast<int>(m);
    } else if (opt == "--every") {
      const long long e = detail::parse_int(opt, take());
      if (e < 1 || e > 2147483647LL) throw std::invalid_argument("--every must be >= 1");
      a.every = static_cast<int>(e);
    } else if (opt == "--solver") {
      a.solver = take();
      if (a.solver != "auto" && a.solver != "loop" && a.solver != "graph")
        throw std::invalid_argument("--solver must be auto, loop or graph, not '" + a.solver + "'");
    } else if (opt == "--blocks-per-sm") {
      const std::string v = take();
      if (v == "auto") {
        a.blocks_per_sm = 0;
      } else {
        const long long b = detail::parse_int(opt, v);
        if (b < 1 || b > 16) throw std::invalid_argument("--blocks-per-sm must be auto or in [1, 16]");
        a.blocks_per_sm = static_cast<int>(b);
      }
    } else if (opt.size() > 1 && opt[0] == '-') {
      throw std::invalid_argument("unknown option " + opt);
    } else if (a.matrix.empty()) {
      a.matrix = opt;
    } else {
      throw std::invalid_argument("one matrix file only ('" + a.matrix + "' and '" + opt + "' given)");
    }
  }
  if (a.matrix.empty() && !a.help) throw std::invalid_argument("no matrix file given");
  return a;
}

// The iteration limit for an n x n matrix when --maxit is not given: CG needs at most n steps in exact
// arithmetic; rounding can cost more, so 2n, within [100, 10^6].
inline int default_maxit(long long n) {
  const long long m = 2 * n;
  return static_cast<int>(m < 100 ? 100 : (m > 1000000 ? 1000000 : m));
}

}  // namespace lab07_cli
