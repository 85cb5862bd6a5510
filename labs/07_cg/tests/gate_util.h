// Lab 07 gates: what the gate files share (handles, guarded buffers, the host CSR matrix and its device copy, the
// CPU-side helpers several steps use). Files: gates_cpu.cpp (CPU tests), gates_blocks.cpp (steps 1-3),
// gates_solvers.cpp (steps 4-6), gates_speed.cpp (every speed gate).
#pragma once
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "cg.h"
#include "cusparse_baseline.h"
#include "labkit/compare_device.h"
#include "labkit/cublas.h"
#include "labkit/cusparse.h"
#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/guard.h"
#include "labkit/mmio.h"
#include "labkit/random.h"
#include "labkit/reference.h"
#include "labkit/relabel.h"
#include "labkit/report.h"
#include "labkit/sparse.h"

namespace lab07_gates {

constexpr double kU = 0x1p-53;  // unit roundoff of double

// Under compute-sanitizer (labkit::gate::under_sanitizer) the vectors of more than 2^21 elements are left out
// (n = 10000019 in steps 1 and 2, step 5's tuning at 2^22): the rest still has n = 0, 1, warp and block edges,
// primes and (1 << 20) + 3, where every thread of the largest grid loops several times.
constexpr double kSanitizerCap = double(1 << 21);

labkit::CublasHandle& cublas();  // created once per process: handle creation costs ~100 ms
labkit::CusparseHandle& cusparse();

// Dot product and 2-norm accumulated in long double (the references for the GPU reductions).
inline double dot_ld(const std::vector<double>& a, const std::vector<double>& b) {
  long double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (long double)a[i] * b[i];
  return double(s);
}
inline double norm_ld(const std::vector<double>& a) { return std::sqrt(dot_ld(a, a)); }

inline void sync() { LABKIT_CUDA(cudaDeviceSynchronize()); }  // a fault inside a kernel surfaces here, in this step

// An absolute error bound turned into compare.h's relative tolerance (relative to ||expected||_inf, or absolute
// when expected is all zero, which is what check_close does then).
inline double rel_tolerance(double abs_bound, const std::vector<double>& expected) {
  double norm = 0;
  for (double e : expected) norm = std::max(norm, std::fabs(e));
  return abs_bound / (norm > 0 ? norm : 1.0);
}

template <class T>
void require_guards(const labkit::GuardedBuffer<T>& buf, const std::string& ctx) {
  const auto g = buf.check_guards();
  if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
}

template <class T>
void require_unmodified(const labkit::GuardedBuffer<T>& buf, const std::vector<T>& before, const std::string& ctx) {
  require_guards(buf, ctx);
  labkit::gate::require(labkit::check_unmodified(buf.download(), before, buf.name()), ctx);
}

template <class T>
labkit::GuardedBuffer<T> guarded(const std::vector<T>& host, const std::string& name) {
  labkit::GuardedBuffer<T> b(host.size(), name);
  b.upload(host);
  return b;
}

// A host CSR matrix and its guarded device copy.
struct DevCsr {
  std::shared_ptr<const labkit::Csr> owned;  // the matrix, when this DevCsr holds a copy of its own
  const labkit::Csr& host;
  labkit::GuardedBuffer<int> row_ptr, col_idx;
  labkit::GuardedBuffer<double> values;
  explicit DevCsr(labkit::Csr A) : DevCsr(std::make_shared<const labkit::Csr>(std::move(A))) {}
  // A matrix that outlives this DevCsr (the speed gates' 10^7-row Poisson, 650 MB) is read in place, not copied:
  // only the device copy, which the step could change, is made anew.
  explicit DevCsr(const labkit::Csr* lives_on) : DevCsr(lives_on, nullptr) {}
  DevCsr(const DevCsr&) = delete;
  DevCsr& operator=(const DevCsr&) = delete;

 private:
  explicit DevCsr(std::shared_ptr<const labkit::Csr> A) : DevCsr(A.get(), A) {}
  DevCsr(const labkit::Csr* A, std::shared_ptr<const labkit::Csr> keep)
      : owned(std::move(keep)),
        host(*A),
        row_ptr(guarded(host.row_ptr, "A.row_ptr")),
        col_idx(guarded(host.col_idx, "A.col_idx")),
        values(guarded(host.values, "A.values")) {}

 public:
  lab07::DeviceCsr view() const {
    return {host.rows, host.cols, host.nnz(), row_ptr.data(), col_idx.data(), values.data()};
  }
  void require_unmodified(const std::string& ctx) const {
    lab07_gates::require_unmodified(row_ptr, host.row_ptr, ctx);
    lab07_gates::require_unmodified(col_idx, host.col_idx, ctx);
    lab07_gates::require_unmodified(values, host.values, ctx);
  }
};

inline std::string describe(const labkit::Csr& A) {
  std::ostringstream os;
  os << A.rows << " x " << A.cols << ", nnz " << A.nnz();
  return os.str();
}

// ---- Steps 4 and 6: which solver ---------------------------------------------------------------------------------
enum class Solver { loop, graph };
inline const char* name(Solver s) { return s == Solver::loop ? "step 4 (cg_solve)" : "step 6 (cg_solve_graph)"; }
inline lab07::CgResult solve(Solver s, const lab07::DeviceCsr& A, const double* b, double* x,
                             const lab07::CgOptions& o) {
  return s == Solver::loop ? lab07::cg_solve(A, b, x, o) : lab07::cg_solve_graph(A, b, x, o);
}


// The largest row error bound of an SpMV, used by the step 3 gates (rows on every core; the largest bound does not
// depend on the split).
double spmv_abs_bound(const labkit::Csr& A, const std::vector<double>& x);
// A rectangular matrix with empty rows and one row longer than 32 warps (step 3, and the solvers' argument checks).
labkit::Csr irregular_matrix(std::uint64_t seed, bool transposed = false);
// ||b - A x|| / ||b|| in long double on the CPU.
double rel_true_residual(const labkit::Csr& A, const std::vector<double>& b, const std::vector<double>& x);
// The pure Neumann Laplacian (singular, positive semi-definite).
labkit::Csr neumann2d(int nx, int ny);
// The grid a reduction's first pass must launch: G = blocks_per_sm x (SMs of the current device), at most
// lab07::kMaxPartials (cg.h). Step 5 tunes blocks_per_sm by timing: a kernel that ignores the argument makes every
// count time the same, and the tuner's choice means nothing.
long long reduction_grid(int blocks_per_sm);
// "" when `ran` (the kernels of one call on n elements, labkit::gate::own_kernels_ran) holds a launch of exactly
// reduction_grid(bps) blocks, or when n is too small to demand one; else what went wrong, naming the grids that ran.
// Demanded where n >= 4 x G x the widest block that ran: a grid-stride loop with up to 4 elements per thread still
// has work for all G blocks there (fewer blocks for small n, as the reference launches, are fine). An empty `ran`
// (nothing recorded: under a sanitizer) demands nothing.
std::string reduction_grid_problem(const std::vector<labkit::launches::Kernel>& ran, long long n, int bps);
// A fresh folder under the temporary directory, named from the run's seed.
std::filesystem::path scratch_dir(const std::string& what);

}  // namespace lab07_gates
