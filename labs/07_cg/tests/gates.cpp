// Lab 07 gates. Correctness: each building block over sizes from 0 to 10^7 (primes, one past every power of two
// a kernel might assume), fresh random inputs per run, guard bands around every array, poisoned outputs, inputs
// checked unmodified, two runs compared bit for bit (all kernels here are deterministic: fixed grids, no atomics).
// The solvers: convergence on 2D/3D Poisson, random SPD and Matrix Market files the gates write themselves, the
// true residual recomputed on the CPU, and the failures (indefinite, singular, b = 0, max_iter) reported with a
// finite x. Speed: ratios measured in one process against cuBLAS, cuSPARSE, or the bytes-moved floor at cudaMemcpy
// speed, on fresh inputs for every timed call, the output of the last one verified.
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
#include <string>
#include <vector>

#include "cg.h"
#include "cusparse_baseline.h"
#include "labkit/cublas.h"
#include "labkit/cusparse.h"
#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/guard.h"
#include "labkit/mmio.h"
#include "labkit/random.h"
#include "labkit/reference.h"
#include "labkit/report.h"
#include "labkit/sparse.h"
#include "tools/cg_args.h"

namespace {

constexpr double kU = 0x1p-53;  // unit roundoff of double

labkit::CublasHandle& cublas() {
  static labkit::CublasHandle handle;  // created once per process: handle creation costs ~100 ms
  return handle;
}
labkit::CusparseHandle& cusparse() {
  static labkit::CusparseHandle handle;
  return handle;
}

// Dot product and 2-norm accumulated in long double (the references for the GPU reductions).
double dot_ld(const std::vector<double>& a, const std::vector<double>& b) {
  long double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (long double)a[i] * b[i];
  return double(s);
}
double norm_ld(const std::vector<double>& a) { return std::sqrt(dot_ld(a, a)); }

void sync() { LABKIT_CUDA(cudaDeviceSynchronize()); }  // a fault inside a kernel surfaces here, in this step

// An absolute error bound turned into compare.h's relative tolerance (relative to ||expected||_inf, or absolute
// when expected is all zero, which is what check_close does then).
double rel_tolerance(double abs_bound, const std::vector<double>& expected) {
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
  labkit::Csr host;
  labkit::GuardedBuffer<int> row_ptr, col_idx;
  labkit::GuardedBuffer<double> values;
  explicit DevCsr(labkit::Csr A)
      : host(std::move(A)),
        row_ptr(guarded(host.row_ptr, "A.row_ptr")),
        col_idx(guarded(host.col_idx, "A.col_idx")),
        values(guarded(host.values, "A.values")) {}
  lab07::DeviceCsr view() const {
    return {host.rows, host.cols, host.nnz(), row_ptr.data(), col_idx.data(), values.data()};
  }
  void require_unmodified(const std::string& ctx) const {
    ::require_unmodified(row_ptr, host.row_ptr, ctx);
    ::require_unmodified(col_idx, host.col_idx, ctx);
    ::require_unmodified(values, host.values, ctx);
  }
};

std::string describe(const labkit::Csr& A) {
  std::ostringstream os;
  os << A.rows << " x " << A.cols << ", nnz " << A.nnz();
  return os.str();
}

// ---- Step 1 ---------------------------------------------------------------------------------------------------------
enum class DotKind { twopass, shuffle };
const char* name(DotKind k) { return k == DotKind::twopass ? "step 1a (dot_twopass)" : "step 1b (dot_shuffle)"; }

void run_dot(DotKind k, int n, const double* x, const double* y, double* partials, double* result, int bps) {
  if (k == DotKind::twopass) lab07::dot_twopass(n, x, y, partials, result, bps);
  else lab07::dot_shuffle(n, x, y, partials, result, bps);
}

void check_dot(DotKind kind, int n, int bps) {
  std::ostringstream c;
  c << name(kind) << ", n = " << n << ", blocks_per_sm = " << bps;
  const std::string ctx = c.str();
  const auto hx = labkit::random_doubles(std::size_t(n), labkit::gate::seed("dot x " + std::to_string(n)));
  const auto hy = labkit::random_doubles(std::size_t(n), labkit::gate::seed("dot y " + std::to_string(n)));
  auto x = guarded(hx, "x"), y = guarded(hy, "y");
  labkit::GuardedBuffer<double> partials(lab07::kMaxPartials, "partials"), result(1, "result");
  auto once = [&] {
    partials.poison();
    result.poison();
    // Only the step's own kernels may run (labkit/launches.h); the cuSPARSE/cuBLAS baselines run outside.
    labkit::gate::own_kernels(name(kind),
                              [&] { run_dot(kind, n, x.data(), y.data(), partials.data(), result.data(), bps); });
    sync();
    return result.download();
  };
  const auto got = once();
  require_guards(partials, ctx);
  require_guards(result, ctx);
  require_unmodified(x, hx, ctx);
  require_unmodified(y, hy, ctx);

  // Tolerance: any summation order of n products has |error| <= ~ n * u * sum |x_i y_i| (each partial sum is
  // rounded at most n times); x 2 for the rounding of the products themselves. The bound is relative to the sum
  // of magnitudes, not to the result: random +-1 inputs cancel, so the result is ~sqrt(n) while the sum of
  // magnitudes is ~n/4. A lost or doubled element shifts the result by a whole product, far above it.
  double mag = 0;
  for (int i = 0; i < n; ++i) mag += std::fabs(hx[i] * hy[i]);
  const std::vector<double> expected{dot_ld(hx, hy)};
  labkit::CheckOptions opt;
  opt.name = "x^T y";
  opt.tolerance = rel_tolerance(2.0 * (n + 1) * kU * mag, expected);
  labkit::gate::require(labkit::check_close(got, expected, opt), ctx);
  labkit::gate::require(labkit::check_same_runs(got, once(), opt), ctx + " (two runs)");

  // All ones: every partial sum is an integer below 2^53, exact in any order, so the answer is exactly n. This
  // catches a skipped or repeated element even where the random products happen to be tiny.
  if (n > 0) {
    const std::vector<double> ones(std::size_t(n), 1.0);
    x.upload(ones);
    y.upload(ones);
    const auto got1 = once();
    labkit::CheckOptions o1;
    o1.name = "sum of n ones";
    labkit::gate::require(labkit::check_equal(got1, std::vector<double>{double(n)}, o1), ctx + ", x = y = 1");
  }
}

const std::vector<int> kDotSizes = {0, 1, 2, 31, 32, 33, 255, 256, 257, 1000, 4097, 65537, (1 << 20) + 3, 10000019};

// ---- Step 2 ---------------------------------------------------------------------------------------------------------
const std::vector<int> kUpdateSizes = {0, 1, 2, 33, 257, 1000, 65537, (1 << 20) + 3, 10000019};

// Under compute-sanitizer (labkit::gate::under_sanitizer) the vectors of more than 2^21 elements (n = 10000019 in
// steps 1 and 2) are left out: the rest still has n = 0, 1, warp and block edges, primes and (1 << 20) + 3, where
// every thread of the largest grid loops several times.
constexpr double kSanitizerCap = double(1 << 21);

void check_axpy_xpby(int n) {
  const std::string sz = "n = " + std::to_string(n);
  const auto hx = labkit::random_doubles(std::size_t(n), labkit::gate::seed("upd x " + sz));
  const auto hy = labkit::random_doubles(std::size_t(n), labkit::gate::seed("upd y " + sz));
  const double a = labkit::uniform_double(labkit::gate::seed("upd a " + sz), 0, 0.5, 2.0);
  auto x = guarded(hx, "x");
  labkit::GuardedBuffer<double> y(std::size_t(n), "y");
  for (int which = 0; which < 2; ++which) {
    const std::string ctx = std::string(which == 0 ? "step 2 (axpy: y = a x + y)" : "step 2 (xpby: y = x + b y)") +
                            ", " + sz + ", a = " + std::to_string(a);
    auto once = [&] {
      y.upload(hy);
      labkit::gate::own_kernels(ctx, [&] {
        if (which == 0) lab07::axpy(n, a, x.data(), y.data());
        else lab07::xpby(n, x.data(), a, y.data());
      });
      sync();
      return y.download();
    };
    const auto got = once();
    require_guards(y, ctx);
    require_unmodified(x, hx, ctx);
    std::vector<double> expected(static_cast<std::size_t>(n)), wrong(static_cast<std::size_t>(n));
    double mag = 0;
    for (int i = 0; i < n; ++i) {
      if (which == 0) {
        expected[i] = double((long double)a * hx[i] + hy[i]);
        wrong[i] = a * hx[i];
        mag = std::max(mag, std::fabs(a * hx[i]) + std::fabs(hy[i]));
      } else {
        expected[i] = double(hx[i] + (long double)a * hy[i]);
        wrong[i] = a * hx[i] + hy[i];
        mag = std::max(mag, std::fabs(hx[i]) + std::fabs(a * hy[i]));
      }
    }
    labkit::CheckOptions opt;
    opt.name = "y";
    opt.initial = hy.data();
    // One product and one sum, each rounded once (or one fma): error <= 2 u (|first| + |second|) per element.
    opt.tolerance = rel_tolerance(2.0 * kU * mag, expected);
    if (n > 0 && n <= 100000)
      opt.hypotheses.push_back({which == 0 ? "y = a x: the + y is missing (y overwritten instead of updated)"
                                           : "y = b x + y: the roles of x and y are swapped",
                                wrong});
    labkit::gate::require(labkit::check_close(got, expected, opt), ctx);
    labkit::gate::require(labkit::check_same_runs(got, once(), opt), ctx + " (two runs)");
  }
}

void check_update_xr(int n, int bps) {
  const std::string sz = "n = " + std::to_string(n);
  const std::string ctx = "step 2 (update_xr), " + sz + ", blocks_per_sm = " + std::to_string(bps);
  const auto hp = labkit::random_doubles(std::size_t(n), labkit::gate::seed("xr p " + sz));
  const auto hAp = labkit::random_doubles(std::size_t(n), labkit::gate::seed("xr Ap " + sz));
  const auto hx0 = labkit::random_doubles(std::size_t(n), labkit::gate::seed("xr x " + sz));
  const auto hr0 = labkit::random_doubles(std::size_t(n), labkit::gate::seed("xr r " + sz));
  const double alpha = labkit::uniform_double(labkit::gate::seed("xr alpha " + sz), 0, 0.5, 2.0);
  auto p = guarded(hp, "p"), Ap = guarded(hAp, "Ap");
  labkit::GuardedBuffer<double> x(std::size_t(n), "x"), r(std::size_t(n), "r");
  labkit::GuardedBuffer<double> partials(lab07::kMaxPartials, "partials"), rr(1, "rr");
  struct Out {
    std::vector<double> x, r, rr;
  };
  auto once = [&] {
    x.upload(hx0);
    r.upload(hr0);
    partials.poison();
    rr.poison();
    labkit::gate::own_kernels("step 2 (update_xr)", [&] {
      lab07::update_xr(n, alpha, p.data(), Ap.data(), x.data(), r.data(), partials.data(), rr.data(), bps);
    });
    sync();
    return Out{x.download(), r.download(), rr.download()};
  };
  const Out got = once();
  for (const auto* b : {&x, &r, &partials, &rr}) require_guards(*b, ctx);
  require_unmodified(p, hp, ctx);
  require_unmodified(Ap, hAp, ctx);

  std::vector<double> ex(static_cast<std::size_t>(n)), er(static_cast<std::size_t>(n)), wrong_r(static_cast<std::size_t>(n));
  double mag_x = 0, mag_r = 0, sq = 0;
  long double rr_ref = 0, rr_old = 0;
  for (int i = 0; i < n; ++i) {
    ex[i] = double(hx0[i] + (long double)alpha * hp[i]);
    er[i] = double(hr0[i] - (long double)alpha * hAp[i]);
    wrong_r[i] = hr0[i] + alpha * hAp[i];
    mag_x = std::max(mag_x, std::fabs(hx0[i]) + std::fabs(alpha * hp[i]));
    const double m = std::fabs(hr0[i]) + std::fabs(alpha * hAp[i]);
    mag_r = std::max(mag_r, m);
    sq += (std::fabs(er[i]) + m) * (std::fabs(er[i]) + m);
    rr_ref += (long double)er[i] * er[i];
    rr_old += (long double)hr0[i] * hr0[i];
  }
  labkit::CheckOptions ox, orr, os;
  ox.name = "x";
  ox.initial = hx0.data();
  ox.tolerance = rel_tolerance(2.0 * kU * mag_x, ex);  // one fma or a product and a sum per element
  orr.name = "r";
  orr.initial = hr0.data();
  orr.tolerance = rel_tolerance(2.0 * kU * mag_r, er);
  if (n > 0 && n <= 100000) orr.hypotheses.push_back({"r = r + alpha Ap: the sign of the update is wrong", wrong_r});
  labkit::gate::require(labkit::check_close(got.x, ex, ox), ctx);
  labkit::gate::require(labkit::check_close(got.r, er, orr), ctx);
  // r^T r: the kernel's r differs from the exact one by <= 2u(|r0| + |alpha Ap|) per element, and the sum adds
  // <= n u sum r^2: a bound of (2n + 8) u sum (|r| + |r0| + |alpha Ap|)^2 covers both with room.
  const std::vector<double> erq{double(rr_ref)};
  os.name = "rr";
  os.tolerance = rel_tolerance((2.0 * n + 8) * kU * sq, erq);
  const auto v = labkit::check_close(got.rr, erq, os);
  if (!v.ok && n > 0 && std::fabs(got.rr[0] - double(rr_old)) <= 1e-9 * double(rr_old))
    FAIL(ctx << ": rr equals r^T r of the OLD r (" << got.rr[0]
             << "): the sum must use the updated r[i]\n  " << labkit::gate::reproduce_hint());
  labkit::gate::require(v, ctx);
  const Out again = once();
  labkit::gate::require(labkit::check_same_runs(got.x, again.x, ox), ctx + " (two runs)");
  labkit::gate::require(labkit::check_same_runs(got.r, again.r, orr), ctx + " (two runs)");
  labkit::gate::require(labkit::check_same_runs(got.rr, again.rr, os), ctx + " (two runs)");
}

// ---- Step 3 ---------------------------------------------------------------------------------------------------------
enum class SpmvKind { thread, warp };
const char* name(SpmvKind k) {
  return k == SpmvKind::thread ? "step 3a (spmv_thread_per_row)" : "step 3b (spmv_warp_per_row)";
}
void run_spmv(SpmvKind k, const lab07::DeviceCsr& A, const double* x, double* y) {
  if (k == SpmvKind::thread) lab07::spmv_thread_per_row(A, x, y);
  else lab07::spmv_warp_per_row(A, x, y);
}

// Row i's error is <= (len_i + 1) u sum_j |a_ij x_j| for any order of its sum; x 2 for the products.
double spmv_abs_bound(const labkit::Csr& A, const std::vector<double>& x) {
  double worst = 0;
  for (int i = 0; i < A.rows; ++i) {
    double m = 0;
    for (int k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) m += std::fabs(A.values[k] * x[A.col_idx[k]]);
    worst = std::max(worst, 2.0 * (A.row_ptr[i + 1] - A.row_ptr[i] + 1) * kU * m);
  }
  return worst;
}

void check_spmv(SpmvKind kind, const DevCsr& A, const std::string& label) {
  const std::string ctx = std::string(name(kind)) + ", " + label + " (" + describe(A.host) + ")";
  const auto hx = labkit::random_doubles(std::size_t(A.host.cols), labkit::gate::seed("spmv x " + label));
  auto x = guarded(hx, "x");
  labkit::GuardedBuffer<double> y(std::size_t(A.host.rows), "y");
  auto once = [&] {
    y.poison();
    labkit::gate::own_kernels(name(kind), [&] { run_spmv(kind, A.view(), x.data(), y.data()); });
    sync();
    return y.download();
  };
  const auto got = once();
  require_guards(y, ctx);
  require_unmodified(x, hx, ctx);
  A.require_unmodified(ctx);
  const auto expected = labkit::spmv_ref(A.host, hx);
  labkit::CheckOptions opt;
  opt.name = "y";
  opt.tolerance = rel_tolerance(spmv_abs_bound(A.host, hx), expected);
  labkit::gate::require(labkit::check_close(got, expected, opt), ctx);
  labkit::gate::require(labkit::check_same_runs(got, once(), opt), ctx + " (two runs)");
}

// A rectangular matrix with empty rows (their y must still be written: 0) and one row longer than 32 warps.
labkit::Csr irregular_matrix(std::uint64_t seed) {
  const int rows = 100, cols = 2500;
  std::vector<int> ri, ci;
  std::vector<double> v;
  std::uint64_t k = 0;
  for (int j = 0; j < cols; ++j) ri.push_back(0), ci.push_back(j), v.push_back(labkit::uniform_double(seed, k++, -1, 1));
  for (int i = 1; i < rows; ++i) {
    if (i >= 10 && i < 20) continue;  // empty rows
    for (int e = 0; e < 3; ++e) {
      ri.push_back(i);
      ci.push_back(int(labkit::uniform_int(seed, k++, 0, cols - 1)));
      v.push_back(labkit::uniform_double(seed, k++, -1, 1));
    }
  }
  return labkit::from_triplets(rows, cols, ri, ci, v);
}

// ---- Steps 4 and 6: the solvers -------------------------------------------------------------------------------------
enum class Solver { loop, graph };
const char* name(Solver s) { return s == Solver::loop ? "step 4 (cg_solve)" : "step 6 (cg_solve_graph)"; }
lab07::CgResult solve(Solver s, const lab07::DeviceCsr& A, const double* b, double* x, const lab07::CgOptions& o) {
  return s == Solver::loop ? lab07::cg_solve(A, b, x, o) : lab07::cg_solve_graph(A, b, x, o);
}

enum class Expect { converge, max_iterations, not_spd, not_converged };

struct Problem {
  std::string label;
  labkit::Csr A;
  std::vector<double> b;
  double tol = 1e-8;
  int max_iter = 2000;
  Expect expect = Expect::converge;
  int graph_iterations = 16;
  std::vector<double> exact;  // when known (b = A * ones): the solution
};

double rel_true_residual(const labkit::Csr& A, const std::vector<double>& b, const std::vector<double>& x) {
  const auto Ax = labkit::spmv_ref(A, x);
  std::vector<double> r(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) r[i] = b[i] - Ax[i];
  const double bn = norm_ld(b);
  return bn > 0 ? norm_ld(r) / bn : 0.0;
}

void check_solve(Solver s, const Problem& pr) {
  const std::string ctx = std::string(name(s)) + ", " + pr.label + " (" + describe(pr.A) + ", tol " +
                          std::to_string(pr.tol) + ", max_iter " + std::to_string(pr.max_iter) + ")";
  DevCsr A(pr.A);
  auto b = guarded(pr.b, "b");
  labkit::GuardedBuffer<double> x(pr.b.size(), "x");
  lab07::CgOptions opt;
  opt.rel_tol = pr.tol;
  opt.max_iter = pr.max_iter;
  opt.graph_iterations = pr.graph_iterations;
  std::vector<int> seen;
  opt.progress = [&](int it, double) { seen.push_back(it); };
  auto once = [&] {
    x.poison();
    seen.clear();
    lab07::CgResult res;
    labkit::gate::own_kernels(name(s), [&] { res = solve(s, A.view(), b.data(), x.data(), opt); });
    sync();
    return res;
  };
  const lab07::CgResult res = once();
  const auto hx = x.download();
  require_guards(x, ctx);
  require_unmodified(b, pr.b, ctx);
  A.require_unmodified(ctx);
  INFO(ctx << "\n  the solver said: " << res.message);

  for (std::size_t i = 0; i < hx.size(); ++i)
    if (!std::isfinite(hx[i]))
      FAIL(ctx << ": x[" << i << "] = " << hx[i] << (labkit::is_poison(hx[i]) ? " (never written)" : "")
               << ": x must be finite on return, whatever the status (" << labkit::to_string(res.status) << ")\n  "
               << labkit::gate::reproduce_hint());
  if (res.iterations < 0 || res.iterations > pr.max_iter)
    FAIL(ctx << ": " << res.iterations << " iterations reported, the limit was " << pr.max_iter);
  for (std::size_t i = 0; i < seen.size(); ++i)
    if ((i > 0 && seen[i] <= seen[i - 1]) || seen[i] > res.iterations || seen[i] < 1)
      FAIL(ctx << ": progress was called with iteration " << seen[i] << " after "
               << (i > 0 ? std::to_string(seen[i - 1]) : std::string("none")) << " (the solve did " << res.iterations
               << "): iteration numbers must grow and stay within the iterations done");
  if (res.iterations > 0 && seen.empty()) FAIL(ctx << ": progress was never called");

  const double truth = rel_true_residual(pr.A, pr.b, hx);
  // The solver's own true residual (double on the GPU) against the CPU's (long double): ||b - Ax|| is computed
  // with cancellation, but here the rounding of Ax is ~u ||A|| ||x|| / ||b|| << 5% of any residual above 1e-12.
  // Not for the singular problems: there x may grow along the null space until that rounding dominates both.
  if (pr.expect != Expect::not_converged && !(std::fabs(res.relative_residual - truth) <= 0.05 * truth + 1e-13))
    FAIL(ctx << ": relative_residual reports " << res.relative_residual << ", but ||b - A x|| / ||b|| of the x "
             << "returned is " << truth << ": report the TRUE residual of x (spmv, b - Ax, its norm)");

  switch (pr.expect) {
    case Expect::converge: {
      if (!res.converged()) FAIL(ctx << ": did not converge: " << res.message);
      if (!(truth <= 1.1 * pr.tol + 1e-15))
        FAIL(ctx << ": reports convergence, but the true residual of x is " << truth << " > tolerance " << pr.tol);
      const auto ref = labkit::cg_ref(pr.A, pr.b, pr.tol, pr.max_iter);
      // Same algorithm, different rounding: the iteration counts agree closely (a wrong alpha or beta costs many
      // more; running on past convergence inside a graph batch shows up as extra iterations).
      const int slack = std::max(5, ref.iterations / 10);
      if (std::abs(res.iterations - ref.iterations) > slack)
        FAIL(ctx << ": converged in " << res.iterations << " iterations, the CPU reference CG in " << ref.iterations
                 << " (allowed difference " << slack << "): check alpha = r^T r / p^T A p, beta = r_new^T r_new / "
                 << "r^T r, p = r + beta p, and that no iteration runs after convergence");
      if (!pr.exact.empty()) {
        double err = 0;
        for (std::size_t i = 0; i < hx.size(); ++i) err = std::max(err, std::fabs(hx[i] - pr.exact[i]));
        if (err > 1e-4) FAIL(ctx << ": max |x - x_exact| = " << err << " (b = A * ones, so x should be all ones)");
      }
      break;
    }
    case Expect::max_iterations: {
      if (res.status != labkit::CgStatus::max_iterations || res.iterations != pr.max_iter)
        FAIL(ctx << ": expected status max_iterations after exactly " << pr.max_iter << " iterations, got "
                 << labkit::to_string(res.status) << " after " << res.iterations);
      // Exactly max_iter iterations of the same recurrence: x matches the CPU reference's x after as many.
      const auto ref = labkit::cg_ref(pr.A, pr.b, 0.0, pr.max_iter);
      labkit::CheckOptions o;
      o.name = "x after " + std::to_string(pr.max_iter) + " iterations";
      // A few iterations of CG on a well-conditioned start amplify rounding only mildly: 1e-9 relative leaves
      // orders of magnitude over double rounding and is far below a wrong alpha or beta (errors of O(1)).
      o.tolerance = 1e-9;
      labkit::gate::require(labkit::check_close(hx, ref.x, o), ctx + " (compared with labkit::cg_ref)");
      break;
    }
    case Expect::not_spd:
      if (res.status != labkit::CgStatus::not_spd)
        FAIL(ctx << ": A is negative definite, so p^T A p < 0 at the first iteration: expected status not_spd, got "
                 << labkit::to_string(res.status) << " (" << res.message << ")");
      break;
    case Expect::not_converged:
      if (res.converged())
        FAIL(ctx << ": A is singular and b is not in its range: no x solves it, yet the solver reports "
                 << "convergence with true residual " << truth);
      break;
  }
  // Deterministic kernels: a second solve gives the same x and the same iteration count.
  const lab07::CgResult again = once();
  if (again.iterations != res.iterations || again.status != res.status)
    FAIL(ctx << ": a second identical solve ended differently (" << again.iterations << " iterations, "
             << labkit::to_string(again.status) << " vs " << res.iterations << ", " << labkit::to_string(res.status)
             << "): a race (missing barrier) or a non-deterministic reduction (atomics)");
  labkit::CheckOptions o;
  o.name = "x";
  labkit::gate::require(labkit::check_same_runs(hx, x.download(), o), ctx + " (two solves)");
}

std::vector<double> ones_rhs(const labkit::Csr& A) { return labkit::spmv_ref(A, std::vector<double>(A.cols, 1.0)); }

// The pure Neumann Laplacian: each diagonal = the number of neighbours, so every row sums to 0 and A * ones = 0:
// singular, positive semi-definite. A b with a component along ones has no solution.
labkit::Csr neumann2d(int nx, int ny) {
  labkit::Csr A = labkit::poisson2d(nx, ny);
  for (int i = 0; i < A.rows; ++i) {
    int neighbours = 0, diag = -1;
    for (int k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      if (A.col_idx[k] == i) diag = k;
      else ++neighbours;
    }
    A.values[diag] = neighbours;
  }
  return A;
}

std::filesystem::path scratch_dir(const std::string& what) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(labkit::gate::seed(what)));
  auto dir = std::filesystem::temp_directory_path() / ("lab07_" + what + "_" + buf);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<Problem> problems(Solver s) {
  const std::string tag = s == Solver::loop ? "4" : "6";
  auto seed = [&](const std::string& l) { return labkit::gate::seed("step" + tag + " " + l); };
  std::vector<Problem> ps;
  auto add = [&](Problem p) { ps.push_back(std::move(p)); };
  {
    Problem p{"2D Poisson 40 x 30, random b", labkit::poisson2d(40, 30), {}};
    p.b = labkit::random_doubles(std::size_t(p.A.rows), seed("b1"));
    if (s == Solver::graph) p.graph_iterations = 64;  // batch larger than the iteration count: must stop inside
    add(std::move(p));
  }
  {
    Problem p{"3D Poisson 12 x 10 x 9, random b", labkit::poisson3d(12, 10, 9), {}};
    p.b = labkit::random_doubles(std::size_t(p.A.rows), seed("b2"));
    if (s == Solver::graph) p.graph_iterations = 7;
    add(std::move(p));
  }
  {
    Problem p{"random SPD n = 3000, 9 per row", labkit::random_spd(3000, 9, seed("A3")), {}};
    p.b = labkit::random_doubles(std::size_t(p.A.rows), seed("b3"));
    if (s == Solver::graph) p.graph_iterations = 1;
    add(std::move(p));
  }
  {
    Problem p{"random SPD n = 2000, 33 per row, margin 0.05", labkit::random_spd(2000, 33, seed("A4"), 0.05), {}};
    p.b = labkit::random_doubles(std::size_t(p.A.rows), seed("b4"));
    add(std::move(p));
  }
  {
    // A Matrix Market file written by the gate (symmetric: one triangle on disk) and read back.
    const auto dir = scratch_dir("mtx" + tag);
    const std::string path = (dir / "poisson_25x20.mtx").string();
    labkit::write_matrix_market(path, labkit::poisson2d(25, 20), true);
    Problem p{"Matrix Market file " + path, labkit::read_matrix_market(path), {}};
    p.b = ones_rhs(p.A);
    p.exact.assign(std::size_t(p.A.rows), 1.0);
    add(std::move(p));
    // ... and a general (both triangles) file of a random SPD matrix.
    const std::string path2 = (dir / "random_spd_general.mtx").string();
    labkit::write_matrix_market(path2, labkit::random_spd(700, 7, seed("A5")), false);
    Problem q{"Matrix Market file " + path2, labkit::read_matrix_market(path2), {}};
    q.b = ones_rhs(q.A);
    q.exact.assign(std::size_t(q.A.rows), 1.0);
    add(std::move(q));
    std::filesystem::remove_all(dir);
  }
  {
    // Hand-written text with comments and blank lines, lower triangle of a tridiagonal SPD matrix.
    const std::string text =
        "%%MatrixMarket matrix coordinate real symmetric\n% a 5 x 5 tridiagonal matrix, lower triangle\n\n"
        "5 5 9\n1 1 4\n2 1 -1\n2 2 4\n% comment between entries\n3 2 -1\n3 3 4\n\n4 3 -1\n4 4 4\n5 4 -1\n5 5 4\n";
    Problem p{"hand-written Matrix Market text", labkit::parse_matrix_market(text, "tridiag.mtx"), {1, 2, 3, 4, 5}};
    add(std::move(p));
  }
  {
    Problem p{"b = 0", labkit::poisson2d(10, 10), std::vector<double>(100, 0.0)};
    add(std::move(p));
  }
  {
    Problem p{"max_iter = 0", labkit::poisson2d(10, 10), {}};
    p.b = labkit::random_doubles(100, seed("b6"));
    p.max_iter = 0;
    p.expect = Expect::max_iterations;
    add(std::move(p));
  }
  {
    Problem p{"max_iter = 13 (not a multiple of the graph batch)", labkit::poisson2d(30, 30), {}};
    p.b = labkit::random_doubles(900, seed("b7"));
    p.tol = 1e-14;
    p.max_iter = 13;
    p.graph_iterations = 8;
    p.expect = Expect::max_iterations;
    add(std::move(p));
  }
  {
    labkit::Csr A = labkit::poisson2d(20, 20);
    for (double& v : A.values) v = -v;
    Problem p{"negative definite (-Poisson)", std::move(A), {}};
    p.b = labkit::random_doubles(400, seed("b8"));
    p.expect = Expect::not_spd;
    add(std::move(p));
  }
  {
    // diag(1, ..., 1, 0) with b = ones, n = 2^10 + 1: in exact arithmetic the second direction is e_n, and all the
    // numbers involved are powers of two, so p^T A p is exactly 0 at iteration 2 (not_spd). Any report but
    // "converged" with a finite x is accepted.
    const int n = 1025;
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::vector<double> d(n, 1.0);
    d[n - 1] = 0.0;
    Problem p{"singular diag(1, ..., 1, 0)", labkit::from_triplets(n, n, idx, idx, d), std::vector<double>(n, 1.0)};
    p.expect = Expect::not_converged;
    add(std::move(p));
  }
  {
    Problem p{"singular Neumann Laplacian 16 x 16, inconsistent b", neumann2d(16, 16), {}};
    p.b = labkit::random_doubles(256, seed("b9"), 0.0, 1.0);  // all positive: not orthogonal to ones
    p.max_iter = 300;
    p.expect = Expect::not_converged;
    add(std::move(p));
  }
  return ps;
}

void check_solver_arguments(Solver s) {
  DevCsr rect(irregular_matrix(1));
  DevCsr sq(labkit::poisson2d(4, 4));
  labkit::GuardedBuffer<double> b(2500, "b"), x(2500, "x");
  b.upload(std::vector<double>(2500, 1.0));
  lab07::CgOptions o;
  CHECK_THROWS_AS(solve(s, rect.view(), b.data(), x.data(), o), std::invalid_argument);
  o.rel_tol = -1;
  CHECK_THROWS_AS(solve(s, sq.view(), b.data(), x.data(), o), std::invalid_argument);
  o.rel_tol = 1e-8;
  o.max_iter = -1;
  CHECK_THROWS_AS(solve(s, sq.view(), b.data(), x.data(), o), std::invalid_argument);
}

void check_solver(Solver s) {
  check_solver_arguments(s);
  for (const Problem& p : problems(s)) check_solve(s, p);
}

// ---- Speed ------------------------------------------------------------------------------------------------------------
constexpr int kPoissonSide = 3163;  // 3163^2 = 10,004,569 rows: the 10^7-row 2D Poisson matrix

const labkit::Csr& big_poisson() {
  static const labkit::Csr A = labkit::poisson2d(kPoissonSide, kPoissonSide);
  return A;
}

// Device pointer mode for the duration of a timing (scalars stay on the device, as in the candidates).
struct DevicePointerMode {
  DevicePointerMode() { LABKIT_CUBLAS(cublasSetPointerMode(cublas(), CUBLAS_POINTER_MODE_DEVICE)); }
  ~DevicePointerMode() { cublasSetPointerMode(cublas(), CUBLAS_POINTER_MODE_HOST); }
};

labkit::TimingOptions speed_options() {
  labkit::TimingOptions o;
  o.warmup = 2;
  o.min_repeats = 10;
  o.budget_ms = 200;
  return o;
}

// Every speed gate uses the TimedCase form of labkit::compare_speed: refresh(rep), untimed, before every timed call
// gives the inputs new random contents (a seed per rep) and poisons the candidate's outputs, so that a step that
// keeps its last answer (keyed on pointers, sizes or sampled values) or returns at once leaves a wrong output;
// verify(), untimed, checks the candidate's last timed output against a trusted result for that call's inputs.
std::uint64_t speed_seed(const std::string& what, int rep) {
  return labkit::gate::seed("speed " + what + ", timed call " + std::to_string(rep));
}

// compare_speed calls refresh(k) before call k (k counts every call, the baseline's too) and verify() right after
// the candidate's last call; this names the inputs that call read.
class LastCandidateCall {
 public:
  void inputs_now(int rep) { inputs_rep_ = rep; }      // in refresh()
  void called() { rep_ = inputs_rep_; }                // after the candidate's timed call: nanoseconds
  int rep(const std::string& ctx) const {              // in verify()
    sync();
    if (rep_ < 0 || rep_ != inputs_rep_) FAIL(ctx << ": the last timed call was not the candidate's");
    return rep_;
  }

 private:
  int inputs_rep_ = -1, rep_ = -1;
};

void poison(double* dev, std::size_t n) { LABKIT_CUDA(cudaMemset(dev, 0xFF, n * sizeof(double))); }  // NaNs

// Bytes one CG iteration must move at least, as this lab structures it: SpMV (values + col_idx per entry, row_ptr,
// p, Ap), p^T Ap (p, Ap), the fused update (read p, Ap, x, r; write x, r), p = r + beta p (read r, p; write p).
double iteration_floor_bytes(const labkit::Csr& A) {
  const double n = A.rows, nnz = A.nnz();
  return 12.0 * nnz + 4.0 * (n + 1) + 16.0 * n + 16.0 * n + 48.0 * n + 24.0 * n;
}

// Time per iteration of a solver, without its setup and final residual: (t(k2) - t(k1)) / (k2 - k1).
constexpr int kItersShort = 16, kItersLong = 48;  // multiples of the default graph batch (16)

// `make_case(iters)` gives the TimedCase of runs of `iters` iterations (each verifies its own last call).
labkit::SpeedComparison per_iteration(const std::function<void(int)>& baseline,
                                      const std::function<void(int)>& candidate,
                                      const std::function<labkit::TimedCase(int)>& make_case) {
  labkit::TimingOptions o;
  o.warmup = 1;
  o.min_repeats = 3;
  o.budget_ms = 120;
  const auto shrt = labkit::compare_speed([&](int) { baseline(kItersShort); }, [&](int) { candidate(kItersShort); },
                                          make_case(kItersShort), o);
  const auto lng = labkit::compare_speed([&](int) { baseline(kItersLong); }, [&](int) { candidate(kItersLong); },
                                         make_case(kItersLong), o);
  labkit::SpeedComparison c;
  const double k = kItersLong - kItersShort;
  c.baseline.median_ms = (lng.baseline.median_ms - shrt.baseline.median_ms) / k;
  c.candidate.median_ms = (lng.candidate.median_ms - shrt.candidate.median_ms) / k;
  c.baseline.repeats = std::min(lng.baseline.repeats, shrt.baseline.repeats);
  c.candidate.repeats = std::min(lng.candidate.repeats, shrt.candidate.repeats);
  c.ratio = c.candidate.median_ms > 0 ? c.baseline.median_ms / c.candidate.median_ms : 0;
  // Work hidden from the timer in either run length is hidden from the difference too.
  c.escaped = shrt.escaped || lng.escaped;
  c.escaped_ms = std::max(shrt.escaped_ms, lng.escaped_ms);
  return c;
}

// The candidate solver's x after `iters` iterations from x0 = 0, against the cuSPARSE + cuBLAS CG's on the same b.
// `x` already holds the candidate's result.
void require_solver_matches(const DevCsr& A, const double* b, const labkit::GuardedBuffer<double>& x,
                            int iters, double tolerance, const std::string& ctx) {
  const int n = A.host.rows;
  labkit::DeviceBuffer<double> xb(static_cast<std::size_t>(n));
  lab07_baseline::cusparse_cublas_cg(cublas(), cusparse(), A.view(), b, xb.data(), 0.0, iters);
  sync();
  require_guards(x, ctx);
  const auto hb = xb.download();
  labkit::CheckOptions opt;
  opt.name = "x";
  opt.tolerance = tolerance;
  labkit::gate::require(labkit::check_close(x.download(), std::vector<double>(hb.begin(), hb.end()), opt),
                        ctx + " (compared with the cuSPARSE + cuBLAS CG)");
}

// The candidate solver's x after a few iterations at the timed size, against the cuSPARSE + cuBLAS CG's.
void check_solver_at_size(Solver s, const DevCsr& A, const labkit::DeviceBuffer<double>& b) {
  const int n = A.host.rows, iters = 5;
  labkit::GuardedBuffer<double> x(std::size_t(n), "x");
  x.poison();
  lab07::CgOptions o;
  o.rel_tol = 0;
  o.max_iter = iters;
  lab07::CgResult res;
  labkit::gate::own_kernels(name(s), [&] { res = solve(s, A.view(), b.data(), x.data(), o); });
  sync();
  const std::string ctx = std::string(name(s)) + " at the timed size (" + describe(A.host) + "), " +
                          std::to_string(iters) + " iterations";
  if (res.iterations != iters) FAIL(ctx << ": did " << res.iterations << " iterations: " << res.message);
  // Two CG runs that differ only in rounding (summation orders) stay within ~1e-12 of each other after 5
  // iterations; 1e-8 is far above that and far below any wrong kernel.
  require_solver_matches(A, b.data(), x, iters, 1e-8, ctx);
}

// The TimedCase of a solver timed over runs of `iters` iterations from x0 = 0: a fresh b before every call (the
// baseline's b too, so both do the same work), x poisoned; afterwards the x of the candidate's last call against
// the trusted CG on that call's b. Two CG implementations differ only in rounding (other summation orders perturb
// alpha and beta by ~1e-16 relative); over 48 iterations that stays far below 1e-6 of ||x||_inf (5 iterations are
// held to 1e-8 above), while an x for another b, or after another number of iterations, is off by O(1).
labkit::TimedCase solver_case(Solver s, const DevCsr& A, labkit::DeviceBuffer<double>& b,
                              labkit::GuardedBuffer<double>& x, LastCandidateCall& last, int iters) {
  labkit::TimedCase tc;
  const int n = A.host.rows;
  // Pointers, not references, in the captures: the case outlives this call (the objects live in the gate).
  const DevCsr* pA = &A;
  labkit::DeviceBuffer<double>* pb = &b;
  labkit::GuardedBuffer<double>* px = &x;
  LastCandidateCall* pl = &last;
  // A seed of its own per run length: the short and the long runs never share a b.
  const std::string label = "b, " + std::to_string(iters) + " iterations";
  tc.refresh = [=](int rep) {
    labkit::fill_random_device(pb->data(), std::size_t(n), speed_seed(label, rep));
    px->poison();
    sync();
    pl->inputs_now(rep);
  };
  tc.verify = [=] {
    const std::string ctx = std::string(name(s)) + " at the timed size, the x of the last timed call (" +
                            std::to_string(iters) + " iterations from a fresh b)";
    pl->rep(ctx);  // b still holds that call's contents
    require_solver_matches(*pA, pb->data(), *px, iters, 1e-6, ctx);
  };
  return tc;
}

}  // namespace

// ================================================================================================================
TEST_CASE("cpu.reference", "[lab07][cpu]") {
  // The CPU references every gate trusts, on examples small enough to check by hand.
  const labkit::Csr A = labkit::from_dense(3, 3, {4, -1, 0, -1, 4, -1, 0, -1, 4});
  CHECK(labkit::spmv_ref(A, {1, 2, 3}) == std::vector<double>{2, 4, 10});
  const auto P = labkit::poisson2d(10, 10);
  const auto res = labkit::cg_ref(P, std::vector<double>(100, 1.0), 1e-10, 1000);
  CHECK(res.converged);
  CHECK(res.relative_residual <= 1e-10);
  CHECK(rel_true_residual(P, std::vector<double>(100, 1.0), res.x) <= 1e-10);
  // Matrix Market: write one triangle, read back the whole matrix, bit for bit.
  const auto R = labkit::random_spd(50, 5, 7);
  std::stringstream ss;
  labkit::write_matrix_market(ss, R, true);
  const auto back = labkit::read_matrix_market(ss, "round trip");
  CHECK(back.row_ptr == R.row_ptr);
  CHECK(back.col_idx == R.col_idx);
  CHECK(back.values == R.values);
  // The Neumann Laplacian the singular gates use: rows sum to zero.
  const auto N = neumann2d(5, 4);
  for (double v : labkit::spmv_ref(N, std::vector<double>(20, 1.0))) CHECK(v == 0.0);
}

TEST_CASE("cpu.cli_args", "[lab07][cpu]") {
  using lab07_cli::parse_cg_args;
  const auto a = parse_cg_args({"A.mtx", "--tol", "1e-10", "--maxit=500", "--rhs", "b.txt", "--solver", "loop",
                                "--blocks-per-sm", "3", "--out", "x.txt", "--every", "10", "--quiet"});
  CHECK(a.matrix == "A.mtx");
  CHECK(a.tol == 1e-10);
  CHECK(a.maxit == 500);
  CHECK(a.rhs == "b.txt");
  CHECK(a.solver == "loop");
  CHECK(a.blocks_per_sm == 3);
  CHECK(a.out == "x.txt");
  CHECK(a.every == 10);
  CHECK(a.quiet);
  const auto d = parse_cg_args({"m.mtx"});
  CHECK(d.tol == 1e-8);
  CHECK(d.maxit == -1);
  CHECK(d.solver == "auto");
  CHECK(d.blocks_per_sm == 0);
  CHECK(parse_cg_args({"--help"}).help);
  CHECK(parse_cg_args({"m.mtx", "--blocks-per-sm=auto"}).blocks_per_sm == 0);
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{},
                                             {"m.mtx", "--tol"},
                                             {"m.mtx", "--tol", "abc"},
                                             {"m.mtx", "--tol", "1e-8x"},
                                             {"m.mtx", "--tol", "-1"},
                                             {"m.mtx", "--tol", "nan"},
                                             {"m.mtx", "--maxit", "-3"},
                                             {"m.mtx", "--maxit", "2.5"},
                                             {"m.mtx", "--solver", "fast"},
                                             {"m.mtx", "--blocks-per-sm", "0"},
                                             {"m.mtx", "--blocks-per-sm", "17"},
                                             {"m.mtx", "--frobnicate"},
                                             {"m.mtx", "n.mtx"},
                                             {"m.mtx", "--quiet=yes"}}) {
    INFO("arguments: " << [&] {
      std::string s;
      for (const auto& x : bad) s += x + " ";
      return s;
    }());
    CHECK_THROWS_AS(parse_cg_args(bad), std::invalid_argument);
  }
  CHECK(lab07_cli::default_maxit(10) == 100);
  CHECK(lab07_cli::default_maxit(5000) == 10000);
  CHECK(lab07_cli::default_maxit(10000000) == 1000000);
}

TEST_CASE("step1.correct", "[lab07][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements");
  for (DotKind k : {DotKind::twopass, DotKind::shuffle}) {
    for (int n : kDotSizes)
      if (!cap.skips(n, std::string(name(k)) + ", n = " + std::to_string(n)))
        check_dot(k, n, lab07::kDefaultBlocksPerSm);
    for (int bps : {1, 3, lab07::kMaxBlocksPerSm}) check_dot(k, 65537, bps);
    check_dot(k, (1 << 20) + 3, lab07::kMaxBlocksPerSm);
    labkit::DeviceBuffer<double> v(4), part(lab07::kMaxPartials), res(1);
    CHECK_THROWS_AS(run_dot(k, -1, v.data(), v.data(), part.data(), res.data(), 4), std::invalid_argument);
    CHECK_THROWS_AS(run_dot(k, 4, v.data(), v.data(), part.data(), res.data(), 0), std::invalid_argument);
    CHECK_THROWS_AS(run_dot(k, 4, v.data(), v.data(), part.data(), res.data(), lab07::kMaxBlocksPerSm + 1),
                    std::invalid_argument);
  }
}

TEST_CASE("step2.correct", "[lab07][step2][correctness]") {
  LABKIT_REQUIRE_GPU();
  labkit::gate::SanitizerCap cap(kSanitizerCap, "elements");
  for (int n : kUpdateSizes) {
    if (cap.skips(n, "n = " + std::to_string(n) + " (axpy, xpby, update_xr)")) continue;
    check_axpy_xpby(n);
    check_update_xr(n, lab07::kDefaultBlocksPerSm);
  }
  check_update_xr(65537, 1);
  check_update_xr((1 << 20) + 3, lab07::kMaxBlocksPerSm);
  labkit::DeviceBuffer<double> v(4);
  CHECK_THROWS_AS(lab07::axpy(-1, 1.0, v.data(), v.data()), std::invalid_argument);
  CHECK_THROWS_AS(lab07::xpby(-1, v.data(), 1.0, v.data()), std::invalid_argument);
}

TEST_CASE("step3.correct", "[lab07][step3][correctness]") {
  LABKIT_REQUIRE_GPU();
  std::vector<std::pair<std::string, labkit::Csr>> ms;
  ms.emplace_back("2D Poisson 1 x 1", labkit::poisson2d(1, 1));
  ms.emplace_back("2D Poisson 7 x 1", labkit::poisson2d(7, 1));
  ms.emplace_back("2D Poisson 33 x 17", labkit::poisson2d(33, 17));
  ms.emplace_back("3D Poisson 5 x 6 x 7", labkit::poisson3d(5, 6, 7));
  ms.emplace_back("2D Poisson 300 x 301", labkit::poisson2d(300, 301));
  ms.emplace_back("random SPD n = 1000, 9 per row", labkit::random_spd(1000, 9, labkit::gate::seed("spmv A1")));
  ms.emplace_back("random SPD n = 2000, 65 per row", labkit::random_spd(2000, 65, labkit::gate::seed("spmv A2")));
  ms.emplace_back("100 x 2500 with empty rows and a 2500-entry row", irregular_matrix(labkit::gate::seed("spmv A3")));
  for (SpmvKind k : {SpmvKind::thread, SpmvKind::warp}) {
    for (const auto& [label, A] : ms) check_spmv(k, DevCsr(A), label);
    // No rows: nothing to do, and nothing may be launched with a grid of 0 blocks.
    labkit::Csr empty;
    empty.cols = 5;
    DevCsr E(empty);
    labkit::DeviceBuffer<double> x(5), y(1);
    run_spmv(k, E.view(), x.data(), y.data());
    sync();
  }
}

TEST_CASE("step4.correct", "[lab07][step4][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_solver(Solver::loop);
}

TEST_CASE("step5.correct", "[lab07][step5][correctness]") {
  LABKIT_REQUIRE_GPU();
  namespace fs = std::filesystem;
  const int n = 1 << 22;
  const auto dev = labkit::device_info();
  auto require_rule = [&](const lab07::TuneResult& t, const std::string& ctx) {
    INFO(ctx);
    std::ostringstream times;
    for (std::size_t i = 0; i < t.ms.size(); ++i) times << (i ? ", " : "") << (i + 1) << ": " << t.ms[i] << " ms";
    INFO("blocks per SM chosen: " << t.blocks_per_sm << "; times tried: " << times.str());
    REQUIRE(t.blocks_per_sm >= 1);
    REQUIRE(t.blocks_per_sm <= lab07::kMaxBlocksPerSm);
    REQUIRE(!t.from_cache);
    const int c = t.blocks_per_sm, m = int(t.ms.size());
    for (double v : t.ms) REQUIRE((std::isfinite(v) && v > 0));
    // The first local minimum: times fall up to c, and the count after c (if any was tried) is not faster.
    for (int i = 1; i < c; ++i) REQUIRE(t.ms[i] < t.ms[i - 1]);
    if (c < lab07::kMaxBlocksPerSm) {
      REQUIRE(m == c + 1);
      REQUIRE(t.ms[c] >= t.ms[c - 1]);
    } else {
      REQUIRE(m == lab07::kMaxBlocksPerSm);
    }
    REQUIRE(t.cache_key.find(dev.name) != std::string::npos);
  };
  const fs::path dir = scratch_dir("tune");
  const std::string cache = (dir / "nested" / "folder" / "cache.tsv").string();

  const auto first = lab07::tune_blocks_per_sm(n, cache);
  require_rule(first, "first call, no cache file yet");
  {
    std::ifstream in(cache);
    std::stringstream ss;
    ss << in.rdbuf();
    INFO("cache file " << cache << ":\n" << ss.str());
    REQUIRE(ss.str().find(first.cache_key + "\t" + std::to_string(first.blocks_per_sm)) != std::string::npos);
  }
  const auto second = lab07::tune_blocks_per_sm(n, cache);
  CHECK(second.from_cache);
  CHECK(second.blocks_per_sm == first.blocks_per_sm);

  {  // a corrupt cache: ignored, the choice is timed again
    std::ofstream out(cache, std::ios::trunc);
    out << "garbage without a tab\n" << first.cache_key << "\tnot-a-number\n" << first.cache_key << "\t99\n";
  }
  require_rule(lab07::tune_blocks_per_sm(n, cache), "corrupt cache file");
  {  // an unwritable cache (its folder would have to be a regular file): a note, not an error
    const fs::path file = dir / "plain_file";
    std::ofstream(file) << "x";
    require_rule(lab07::tune_blocks_per_sm(n, (file / "cache.tsv").string()), "unwritable cache path");
  }
  require_rule(lab07::tune_blocks_per_sm(n, ""), "no cache");
  CHECK_THROWS_AS(lab07::tune_blocks_per_sm(0, ""), std::invalid_argument);
  fs::remove_all(dir);
}

TEST_CASE("step6.correct", "[lab07][step6][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_solver(Solver::graph);
}

// ---- speed ---------------------------------------------------------------------------------------------------------
TEST_CASE("step1.speed", "[lab07][step1][speed]") {
  LABKIT_REQUIRE_GPU();
  const int n = 10000000;
  labkit::DeviceBuffer<double> x(n), y(n), partials(lab07::kMaxPartials), result(1), ref(1);
  // result of x^T y for the inputs of timed call `rep` (-1: the check before timing), against long double.
  auto require_dot = [&](int rep, const std::string& ctx) {
    const auto hx = labkit::random_doubles(n, speed_seed("x", rep)), hy = labkit::random_doubles(n, speed_seed("y", rep));
    double mag = 0;
    for (int i = 0; i < n; ++i) mag += std::fabs(hx[i] * hy[i]);
    const std::vector<double> expected{dot_ld(hx, hy)};
    labkit::CheckOptions o;
    o.name = "x^T y";
    o.tolerance = rel_tolerance(2.0 * (n + 1) * kU * mag, expected);  // as in step1.correct
    labkit::gate::require(labkit::check_close(result.download(), expected, o), ctx);
  };
  auto fill = [&](int rep) {  // fill_random_device gives random_doubles(n, seed) bit for bit
    labkit::fill_random_device(x.data(), n, speed_seed("x", rep));
    labkit::fill_random_device(y.data(), n, speed_seed("y", rep));
  };
  fill(-1);
  lab07::dot_shuffle(n, x.data(), y.data(), partials.data(), result.data(), lab07::kDefaultBlocksPerSm);
  sync();
  require_dot(-1, "step 1b at the timed size n = 10^7");
  LastCandidateCall last;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    fill(rep);
    poison(result.data(), 1);
    sync();
    last.inputs_now(rep);
  };
  tc.verify = [&] {
    const std::string ctx = "step 1b at the timed size, the result of the last timed call (fresh x and y)";
    require_dot(last.rep(ctx), ctx);
  };
  DevicePointerMode mode;
  const auto cmp = labkit::compare_speed(
      [&](int) { LABKIT_CUBLAS(cublasDdot(cublas(), n, x.data(), 1, y.data(), 1, ref.data())); },
      [&](int) {
        lab07::dot_shuffle(n, x.data(), y.data(), partials.data(), result.data());
        last.called();
      },
      tc, speed_options());
  labkit::gate::require_speedup(cmp, "cublasDdot", "step 1b (dot_shuffle)", 16.0 * n / 1e9, "GB");
}

TEST_CASE("step2.speed", "[lab07][step2][speed]") {
  LABKIT_REQUIRE_GPU();
  const int n = 10000000;
  const double alpha = 1e-6;
  // The candidate updates x, r in place; the baseline its own copies xb, rb (same contents), so that neither
  // overwrites the other's result.
  labkit::DeviceBuffer<double> p(n), Ap(n), x(n), r(n), xb(n), rb(n), partials(lab07::kMaxPartials), rr(1), rrb(1),
      scal(2);
  auto fill = [&](int rep) {
    labkit::fill_random_device(p.data(), n, speed_seed("p", rep));
    labkit::fill_random_device(Ap.data(), n, speed_seed("Ap", rep));
    labkit::fill_random_device(x.data(), n, speed_seed("x", rep));
    labkit::fill_random_device(r.data(), n, speed_seed("r", rep));
    LABKIT_CUDA(cudaMemcpy(xb.data(), x.data(), sizeof(double) * n, cudaMemcpyDeviceToDevice));
    LABKIT_CUDA(cudaMemcpy(rb.data(), r.data(), sizeof(double) * n, cudaMemcpyDeviceToDevice));
  };
  // x, r and r^T r after one update of the inputs of timed call `rep`: each new element is one multiply-add
  // (relative error <= u of |old| + |alpha * other|, so 4u of the largest is safe); r^T r as in step2.correct.
  auto require_update = [&](int rep, const std::string& ctx) {
    const auto hp = labkit::random_doubles(n, speed_seed("p", rep)), hAp = labkit::random_doubles(n, speed_seed("Ap", rep));
    auto hx = labkit::random_doubles(n, speed_seed("x", rep)), hr = labkit::random_doubles(n, speed_seed("r", rep));
    long double sum = 0;
    double mag = 0;
    for (int i = 0; i < n; ++i) {
      mag = std::max(mag, std::fabs(hr[i]) + std::fabs(alpha * hAp[i]));
      hx[i] = double(hx[i] + (long double)alpha * hp[i]);
      const long double ri = hr[i] - (long double)alpha * hAp[i];
      hr[i] = double(ri);
      sum += ri * ri;
    }
    labkit::CheckOptions o;
    o.tolerance = 4 * kU;
    o.name = "x";
    labkit::gate::require(labkit::check_close(x.download(), hx, o), ctx);
    o.name = "r";
    labkit::gate::require(labkit::check_close(r.download(), hr, o), ctx);
    const std::vector<double> expected{double(sum)};
    o.name = "r^T r";
    o.tolerance = rel_tolerance((2.0 * n + 8) * kU * (2 * mag) * (2 * mag) * n, expected);  // as in step2.correct
    labkit::gate::require(labkit::check_close(rr.download(), expected, o), ctx);
  };
  fill(-1);
  lab07::update_xr(n, alpha, p.data(), Ap.data(), x.data(), r.data(), partials.data(), rr.data());
  sync();
  require_update(-1, "step 2 update_xr at the timed size");
  LastCandidateCall last;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    fill(rep);
    poison(rr.data(), 1);  // x and r are in-out: their fresh contents are the reset
    sync();
    last.inputs_now(rep);
  };
  tc.verify = [&] {
    const std::string ctx = "step 2 update_xr at the timed size, the x, r and r^T r of the last timed call";
    require_update(last.rep(ctx), ctx);
  };
  const double h_scal[2] = {alpha, -alpha};
  LABKIT_CUDA(cudaMemcpy(scal.data(), h_scal, sizeof h_scal, cudaMemcpyHostToDevice));
  DevicePointerMode mode;
  const auto cmp = labkit::compare_speed(
      [&](int) {
        LABKIT_CUBLAS(cublasDaxpy(cublas(), n, scal.data(), p.data(), 1, xb.data(), 1));
        LABKIT_CUBLAS(cublasDaxpy(cublas(), n, scal.data() + 1, Ap.data(), 1, rb.data(), 1));
        LABKIT_CUBLAS(cublasDdot(cublas(), n, rb.data(), 1, rb.data(), 1, rrb.data()));
      },
      [&](int) {
        lab07::update_xr(n, alpha, p.data(), Ap.data(), x.data(), r.data(), partials.data(), rr.data());
        last.called();
      },
      tc, speed_options());
  labkit::gate::require_speedup(cmp, "cuBLAS daxpy + daxpy + ddot", "step 2 (update_xr)", 48.0 * n / 1e9, "GB");
}

TEST_CASE("step3.speed", "[lab07][step3][speed]") {
  LABKIT_REQUIRE_GPU();
  const DevCsr A(big_poisson());
  const int n = A.host.rows;
  labkit::DeviceBuffer<double> x(static_cast<std::size_t>(n)), yb(static_cast<std::size_t>(n));
  labkit::GuardedBuffer<double> y(std::size_t(n), "y");
  auto require_spmv = [&](int rep, const std::string& ctx) {
    require_guards(y, ctx);
    const auto hx = labkit::random_doubles(std::size_t(n), speed_seed("x", rep));
    const auto expected = labkit::spmv_ref(A.host, hx);
    labkit::CheckOptions o;
    o.name = "y";
    o.tolerance = rel_tolerance(spmv_abs_bound(A.host, hx), expected);
    labkit::gate::require(labkit::check_close(y.download(), expected, o), ctx);
  };
  labkit::fill_random_device(x.data(), std::size_t(n), speed_seed("x", -1));
  y.poison();
  lab07::spmv_thread_per_row(A.view(), x.data(), y.data());
  sync();
  require_spmv(-1, "step 3a at the timed size (" + describe(A.host) + ")");
  LastCandidateCall last;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    labkit::fill_random_device(x.data(), std::size_t(n), speed_seed("x", rep));
    y.poison();
    sync();
    last.inputs_now(rep);
  };
  tc.verify = [&] {
    const std::string ctx = "step 3a at the timed size, the y of the last timed call (fresh x)";
    require_spmv(last.rep(ctx), ctx);
  };
  lab07_baseline::CusparseSpmv spmv(cusparse(), A.view(), x.data(), yb.data());
  const auto cmp = labkit::compare_speed([&](int) { spmv(x.data(), yb.data()); },
                                         [&](int) {
                                           lab07::spmv_thread_per_row(A.view(), x.data(), y.data());
                                           last.called();
                                         },
                                         tc, speed_options());
  const double bytes = 12.0 * A.host.nnz() + 4.0 * (n + 1) + 16.0 * n;
  labkit::gate::require_speedup(cmp, "cusparseSpMV", "step 3a (spmv_thread_per_row)", bytes / 1e9, "GB");
}

TEST_CASE("step4.speed", "[lab07][step4][speed]") {
  LABKIT_REQUIRE_GPU();
  const DevCsr A(big_poisson());
  const int n = A.host.rows;
  labkit::DeviceBuffer<double> b(static_cast<std::size_t>(n));
  labkit::GuardedBuffer<double> x(std::size_t(n), "x");
  labkit::fill_random_device(b.data(), std::size_t(n), speed_seed("b", -1));
  check_solver_at_size(Solver::loop, A, b);
  // The baseline is the bytes-moved floor at memcpy bandwidth, timed in the same process: one device-to-device
  // cudaMemcpy of the floor's bytes per iteration (a copy moves each byte twice, read and write, hence half).
  const double bytes = iteration_floor_bytes(A.host);
  const std::size_t half = static_cast<std::size_t>(bytes / 2);
  labkit::DeviceBuffer<unsigned char> copy_src(half), copy_dst(half);
  LABKIT_CUDA(cudaMemset(copy_src.data(), 1, half));
  auto baseline = [&](int iters) {
    for (int i = 0; i < iters; ++i)
      LABKIT_CUDA(cudaMemcpyAsync(copy_dst.data(), copy_src.data(), half, cudaMemcpyDeviceToDevice));
  };
  LastCandidateCall last;
  lab07::CgOptions o;
  o.rel_tol = 0;  // never met: every run does exactly max_iter iterations
  auto candidate = [&](int iters) {
    o.max_iter = iters;
    lab07::cg_solve(A.view(), b.data(), x.data(), o);
    last.called();
  };
  const auto cmp = per_iteration(baseline, candidate,
                                 [&](int iters) { return solver_case(Solver::loop, A, b, x, last, iters); });
  labkit::gate::require_speedup(cmp, "the bytes-moved floor at memcpy bandwidth (cudaMemcpy of those bytes)",
                                "step 4 (one CG iteration)", bytes / 1e9, "GB");
}

TEST_CASE("step6.speed", "[lab07][step6][speed]") {
  LABKIT_REQUIRE_GPU();
  const DevCsr A(big_poisson());
  const int n = A.host.rows;
  labkit::DeviceBuffer<double> b(static_cast<std::size_t>(n)), xb(static_cast<std::size_t>(n));
  labkit::GuardedBuffer<double> x(std::size_t(n), "x");
  labkit::fill_random_device(b.data(), std::size_t(n), speed_seed("b", -1));
  check_solver_at_size(Solver::graph, A, b);
  LastCandidateCall last;
  lab07::CgOptions o;
  o.rel_tol = 0;
  auto candidate = [&](int iters) {
    o.max_iter = iters;
    lab07::cg_solve_graph(A.view(), b.data(), x.data(), o);
    last.called();
  };
  auto baseline = [&](int iters) {  // its own x: never overwrites the candidate's
    lab07_baseline::cusparse_cublas_cg(cublas(), cusparse(), A.view(), b.data(), xb.data(), 0.0, iters);
  };
  const auto cmp = per_iteration(baseline, candidate,
                                 [&](int iters) { return solver_case(Solver::graph, A, b, x, last, iters); });
  const double bytes = iteration_floor_bytes(A.host);
  const double bw = labkit::memcpy_bandwidth_gbs();
  labkit::report::metric("floor_fraction", bytes / (bw * 1e9) * 1e3 / cmp.candidate.median_ms, "x");
  labkit::gate::require_speedup(cmp, "cuSPARSE + cuBLAS CG (one iteration)", "step 6 (one CG iteration)",
                                bytes / 1e9, "GB");
}
