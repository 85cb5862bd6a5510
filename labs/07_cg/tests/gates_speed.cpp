// Lab 07 speed gates: ratios measured in one process against cuBLAS, cuSPARSE, or the bytes-moved floor at cudaMemcpy
// speed, on fresh inputs for every timed call, the output of the last one verified.
#include <catch2/catch_test_macros.hpp>

#include <memory>

#include "gate_util.h"

using namespace lab07_gates;

namespace {

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
// verify(), untimed, checks the output of the candidate's call in a round the gate's secret picks, and of its last
// call, against a trusted result for that call's inputs;
// record (TimedCase::record) lets only the step's own kernels run in a timed round the gate's secret picks and in
// that last call. Steps 1-3 need no check before the timing: the last call is one at the timed size on inputs it
// never saw, with the same diagnosis. The solvers keep one (5 iterations held to 1e-8, before any timing).
std::uint64_t speed_seed(const std::string& what, int rep) {
  return labkit::gate::seed("speed " + what + ", timed call " + std::to_string(rep));
}

// compare_speed calls refresh(k) before call k (k counts every call, the baseline's too) and verify() on a candidate
// call (those its secret picks, and the last), restored after the timing with what the gate's KeptCalls holds of it,
// this object included: it names the inputs that call read.
class LastCandidateCall {
 public:
  void inputs_now(int rep) { inputs_rep_ = rep; }      // in refresh()
  void called() { rep_ = inputs_rep_; }                // after the candidate's timed call: nanoseconds
  int rep(const std::string& ctx) const {              // in verify()
    sync();
    if (rep_ < 0 || rep_ != inputs_rep_) FAIL(ctx << ": the verified call was not the candidate's");
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
constexpr int kItersShort = 16, kItersLong = 112;  // multiples of the default graph batch (16)
// What a solver call may cost beyond its iterations, in iterations of the baseline (labkit::limit_fixed_cost): the
// references' calls cost 1-2 ms more than their iterations, 2-4 baseline iterations on an H100 (allocations, the
// initial and final residuals). A solver that stalls when max_iter is small gains at most this much over the long
// run's 112 iterations: 7 %.
constexpr double kFixedAllowanceIters = 8;

// `make_case(iters)` gives the TimedCase of runs of `iters` iterations (each verifies its own last call).
labkit::TimingOptions per_iteration_options() {
  labkit::TimingOptions o;
  o.warmup = 1;
  o.min_repeats = 3;
  o.budget_ms = 120;
  return o;
}

labkit::SpeedComparison per_iteration(const std::function<void(int)>& baseline,
                                      const std::function<void(int)>& candidate,
                                      const std::function<labkit::TimedCase(int)>& make_case) {
  const labkit::TimingOptions o = per_iteration_options();
  const auto shrt = labkit::compare_speed([&](int) { baseline(kItersShort); }, [&](int) { candidate(kItersShort); },
                                          make_case(kItersShort), o);
  const auto lng = labkit::compare_speed([&](int) { baseline(kItersLong); }, [&](int) { candidate(kItersLong); },
                                         make_case(kItersLong), o);
  const auto diff = labkit::per_unit_difference(shrt, lng, kItersLong - kItersShort);
  // What a call costs beyond its iterations (set-up, allocations, the final residual), as the difference implies.
  labkit::report::metric("baseline_fixed_ms", shrt.baseline.median_ms - kItersShort * diff.baseline.median_ms, "ms");
  labkit::report::metric("candidate_fixed_ms", shrt.candidate.median_ms - kItersShort * diff.candidate.median_ms,
                         "ms");
  return labkit::limit_fixed_cost(diff, lng, kItersLong, kFixedAllowanceIters * diff.baseline.median_ms);
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
  labkit::CheckOptions opt;
  opt.name = "x";
  opt.tolerance = tolerance;
  // On the device (two 80 MB copies and a host pass saved); the host check, on downloads, only to diagnose.
  labkit::gate::require(labkit::device_or_host(labkit::check_close_device(x.data(), xb.data(), std::size_t(n), opt),
                                               [&] { return labkit::check_close(x.download(), xb.download(), opt); }),
                        ctx + " (compared with the cuSPARSE + cuBLAS CG)");
}

// The candidate solver's x after a few iterations at the timed size, against the cuSPARSE + cuBLAS CG's.
// b holds fill_random_device(b_seed) when called.
void check_solver_at_size(Solver s, DevCsr& A, labkit::DeviceBuffer<double>& b, std::uint64_t b_seed) {
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
  // The trusted CG reads b and A from the buffers the step was handed, which it could have written (a zero b has
  // the answer x = 0): b is checked against its seed (as solver_case's verify does), A written again.
  labkit::gate::require(labkit::check_unmodified_device(b.data(), std::size_t(n), b_seed, "b"), ctx);
  A.row_ptr.upload(A.host.row_ptr);
  A.col_idx.upload(A.host.col_idx);
  A.values.upload(A.host.values);
  // Two CG runs that differ only in rounding (summation orders) stay within ~1e-12 of each other after 5
  // iterations; 1e-8 is far above that and far below any wrong kernel.
  require_solver_matches(A, b.data(), x, iters, 1e-8, ctx);
}

// The TimedCase of a solver timed over runs of `iters` iterations from x0 = 0: a fresh b before every call (the
// baseline's b too, so both do the same work) and the matrix relabelled afresh, P A P^T (values carried: an SPD
// matrix still; the SpMV speed gate says why and how), x poisoned; afterwards the x of the candidate's last call
// against the trusted CG on that call's b. Two CG implementations differ only in rounding (other summation orders
// perturb alpha and beta by ~1e-16 relative); over 112 iterations that stays far below 1e-6 of ||x||_inf (5
// iterations are held to 1e-8 above), while an x for another b, or after another number of iterations, is off by
// O(1).
labkit::TimedCase solver_case(Solver s, DevCsr& A, labkit::DeviceRelabel& relabel, labkit::DeviceBuffer<double>& b,
                              labkit::GuardedBuffer<double>& x, LastCandidateCall& last, int iters) {
  labkit::TimedCase tc;
  const int n = A.host.rows;
  // Pointers, not references, in the captures: the case outlives this call (the objects live in the gate).
  DevCsr* pA = &A;
  labkit::DeviceRelabel* pr = &relabel;
  labkit::DeviceBuffer<double>* pb = &b;
  labkit::GuardedBuffer<double>* px = &x;
  LastCandidateCall* pl = &last;
  // A seed of its own per run length: the short and the long runs never share a b.
  const std::string label = "b, " + std::to_string(iters) + " iterations";
  const std::string labels = "A's labels, " + std::to_string(iters) + " iterations";
  tc.refresh = [=](int rep) {
    labkit::fill_random_device(pb->data(), std::size_t(n), speed_seed(label, rep));
    pr->draw(speed_seed(labels, rep), pA->row_ptr.data(), pA->col_idx.data(), pA->values.data());
    px->poison();
    sync();
    pl->inputs_now(rep);
  };
  tc.verify = [=] {
    const std::string ctx = std::string(name(s)) + " at the timed size, the x of " + labkit::verified_call() + " (" +
                            std::to_string(iters) + " iterations from a fresh b)";
    // The trusted CG reads b and the matrix from these buffers, which the step could have written (a zero b has
    // the answer x = 0): b is checked against its seed, the matrix drawn again.
    const int rep = pl->rep(ctx);
    labkit::gate::require(labkit::check_unmodified_device(pb->data(), std::size_t(n), speed_seed(label, rep), "b"),
                          ctx);
    pr->draw(speed_seed(labels, rep), pA->row_ptr.data(), pA->col_idx.data(), pA->values.data());
    require_solver_matches(*pA, pb->data(), *px, iters, 1e-6, ctx);
  };
  // b, x and the bookkeeping of every candidate call kept alike, so that the picked calls are checked after the
  // timing (labkit::KeptCalls); verify() draws the matrix again itself.
  auto kept = std::make_shared<labkit::KeptCalls>();
  kept->device(pb->data(), std::size_t(n)).device(px->data(), std::size_t(n)).host(*pl);
  labkit::KeptCalls::attach(kept, tc);
  // Every call recorded: both solvers run a few kernels an iteration, so the recorder's cost per kernel falls on
  // both sides alike (ratios within 2 % of two recorded calls on an H100).
  labkit::gate::record_timed_calls(tc, name(s), per_iteration_options(), labkit::RecordedCalls::every_call);
  return tc;
}

}  // namespace

// ---- speed ---------------------------------------------------------------------------------------------------------
TEST_CASE("step1.speed", "[lab07][step1][speed]") {
  LABKIT_REQUIRE_GPU();
  const int n = 10000000;
  labkit::DeviceBuffer<double> x(n), y(n), partials(lab07::kMaxPartials), result(1), ref(1);
  // result of x^T y for the inputs of timed call `rep`, against long double.
  // The inputs are regenerated per element (fill_random_device's values) on every core: no host copies.
  auto require_dot = [&](int rep, const std::string& ctx) {
    const std::uint64_t sx = speed_seed("x", rep), sy = speed_seed("y", rep);
    struct Part {
      long double dot = 0;
      double mag = 0;
    };
    long double dot = 0;
    double mag = 0;
    for (const Part& p : labkit::parallel_parts<Part>(std::size_t(n), [&](std::size_t b, std::size_t e) {
           Part part;
           for (std::size_t i = b; i < e; ++i) {
             const double xi = labkit::uniform_double(sx, i, -1.0, 1.0), yi = labkit::uniform_double(sy, i, -1.0, 1.0);
             part.dot += (long double)xi * yi;
             part.mag += std::fabs(xi * yi);
           }
           return part;
         })) {
      dot += p.dot;
      mag += p.mag;
    }
    const std::vector<double> expected{double(dot)};
    labkit::CheckOptions o;
    o.name = "x^T y";
    o.tolerance = rel_tolerance(2.0 * (n + 1) * kU * mag, expected);  // as in step1.correct
    labkit::gate::require(labkit::check_close(result.download(), expected, o), ctx);
  };
  auto fill = [&](int rep) {  // fill_random_device gives random_doubles(n, seed) bit for bit
    labkit::fill_random_device(x.data(), n, speed_seed("x", rep));
    labkit::fill_random_device(y.data(), n, speed_seed("y", rep));
  };
  LastCandidateCall last;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    fill(rep);
    poison(result.data(), 1);
    sync();
    last.inputs_now(rep);
  };
  tc.verify = [&] {
    const std::string ctx = "step 1b at the timed size, the result of " + labkit::verified_call() + " (fresh x and y)";
    require_dot(last.rep(ctx), ctx);
  };
  // The result of every call kept alike, so that the picked calls are checked after the timing (labkit::KeptCalls).
  labkit::KeptCalls kept;
  kept.device(result.data(), 1).host(last);
  kept.attach(tc);
  // Two recorded calls: on every call the recorder's cost per kernel took 8 % off this ~0.1 ms call (an H100).
  labkit::gate::record_timed_calls(tc, "step 1b (dot_shuffle)", speed_options(), labkit::RecordedCalls::two_calls);
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
  // The inputs are regenerated per element (fill_random_device's values) on every core, straight into the
  // expected x and r: no host copies of p, Ap, x and r.
  auto require_update = [&](int rep, const std::string& ctx) {
    const std::uint64_t sp = speed_seed("p", rep), sAp = speed_seed("Ap", rep), sx = speed_seed("x", rep),
                        sr = speed_seed("r", rep);
    std::vector<double> hx(n), hr(n);
    struct Part {
      long double sum = 0;
      double mag = 0;
    };
    long double sum = 0;
    double mag = 0;
    for (const Part& p : labkit::parallel_parts<Part>(std::size_t(n), [&](std::size_t b, std::size_t e) {
           Part part;
           for (std::size_t i = b; i < e; ++i) {
             const double pi = labkit::uniform_double(sp, i, -1.0, 1.0);
             const double Api = labkit::uniform_double(sAp, i, -1.0, 1.0);
             const double xi = labkit::uniform_double(sx, i, -1.0, 1.0), r0 = labkit::uniform_double(sr, i, -1.0, 1.0);
             part.mag = std::max(part.mag, std::fabs(r0) + std::fabs(alpha * Api));
             hx[i] = double(xi + (long double)alpha * pi);
             const long double ri = r0 - (long double)alpha * Api;
             hr[i] = double(ri);
             part.sum += ri * ri;
           }
           return part;
         })) {
      sum += p.sum;
      mag = std::max(mag, p.mag);
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
  LastCandidateCall last;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    fill(rep);
    poison(rr.data(), 1);  // x and r are in-out: their fresh contents are the reset
    sync();
    last.inputs_now(rep);
  };
  tc.verify = [&] {
    const std::string ctx = "step 2 update_xr at the timed size, the x, r and r^T r of " + labkit::verified_call();
    require_update(last.rep(ctx), ctx);
  };
  labkit::KeptCalls kept;  // as step 1b's
  kept.device(x.data(), n).device(r.data(), n).device(rr.data(), 1).host(last);
  kept.attach(tc);
  labkit::gate::record_timed_calls(tc, "step 2 (update_xr)", speed_options(),
                                   labkit::RecordedCalls::two_calls);  // as step 1b's
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
  // The Poisson matrix relabelled per call, B = P A P^T for a permutation drawn from the call's seed, with B's
  // values drawn afresh (as x is): a step that analysed the pattern once (a converted format kept, keyed on pointers
  // or sampled entries) or recognised the stencil's 4 and -1 meets a matrix it has not seen in every call. Each
  // unknown moves only within its window of 32 (labkit::DeviceRelabel), so x's gathers keep the cache lines, and
  // both sides the memory traffic, of the grid's own order.
  DevCsr A(&big_poisson());
  labkit::DeviceRelabel relabel(A.host);
  const int n = A.host.rows;
  const std::size_t nnz = A.host.values.size();
  labkit::DeviceBuffer<double> x(static_cast<std::size_t>(n)), yb(static_cast<std::size_t>(n));
  labkit::GuardedBuffer<double> y(std::size_t(n), "y");
  // The verified call's y against cusparseSpMV (the gate's own handle) on the call's matrix and x drawn again into
  // the gate's own buffers (the step's could have been written since), compared on the device: a host reference
  // (the pattern downloaded, 50 million values drawn, the product in long double) cost the gate about 0.4 s a check,
  // its GPU idle, three checks a run. Both products are sums of at most k = 5 terms |a x| <= 1 (values and x in
  // [-1, 1]): each is within (k + 1) u k of the exact one in any order of summation, so they differ by at most twice
  // that, and ||y||_inf <= k makes the relative check with scale k an absolute one. A wrong product (an entry lost or
  // misplaced) is off by ~0.1 or more. A failure is diagnosed on the host, on downloaded copies.
  int max_row = 0;
  for (int i = 0; i < n; ++i) max_row = std::max(max_row, A.host.row_ptr[i + 1] - A.host.row_ptr[i]);
  labkit::DeviceBuffer<int> g_row_ptr(std::size_t(n) + 1), g_col_idx(nnz);
  labkit::DeviceBuffer<double> g_values(nnz), g_x(static_cast<std::size_t>(n)), g_y(static_cast<std::size_t>(n));
  const lab07::DeviceCsr g_A{n, n, static_cast<int>(nnz), g_row_ptr.data(), g_col_idx.data(), g_values.data()};
  lab07_baseline::CusparseSpmv trusted(cusparse(), g_A, g_x.data(), g_y.data());
  auto require_spmv = [&](int rep, const std::string& ctx) {
    require_guards(y, ctx);
    relabel.draw(speed_seed("A pattern", rep), g_row_ptr.data(), g_col_idx.data(), nullptr);
    labkit::fill_random_device(g_values.data(), nnz, speed_seed("A values", rep));
    labkit::fill_random_device(g_x.data(), std::size_t(n), speed_seed("x", rep));
    trusted(g_x.data(), g_y.data());
    sync();
    labkit::CheckOptions o;
    o.name = "y";
    o.scale = max_row;                       // k, at least ||y||_inf
    o.tolerance = 2.0 * (max_row + 1) * kU;  // times the scale: 2 (k + 1) u k, absolute
    labkit::gate::require(
        labkit::device_or_host(labkit::check_close_device(y.data(), g_y.data(), std::size_t(n), o),
                               [&] { return labkit::check_close(y.download(), g_y.download(), o); }),
        ctx + " (compared with cusparseSpMV)");
  };
  LastCandidateCall last;
  labkit::TimedCase tc;
  tc.refresh = [&](int rep) {
    labkit::fill_random_device(x.data(), std::size_t(n), speed_seed("x", rep));
    relabel.draw(speed_seed("A pattern", rep), A.row_ptr.data(), A.col_idx.data(), nullptr);
    labkit::fill_random_device(A.values.data(), nnz, speed_seed("A values", rep));
    y.poison();
    sync();
    last.inputs_now(rep);
  };
  tc.verify = [&] {
    const std::string ctx =
        "step 3a at the timed size, the y of " + labkit::verified_call() + " (fresh x, matrix values and labels)";
    require_spmv(last.rep(ctx), ctx);
  };
  labkit::KeptCalls kept;  // as step 1b's
  kept.device(y.data(), std::size_t(n)).host(last);
  kept.attach(tc);
  labkit::gate::record_timed_calls(tc, "step 3a (spmv_thread_per_row)", speed_options(),
                                   labkit::RecordedCalls::two_calls);  // one short kernel a call, as step 1b's
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
  DevCsr A(&big_poisson());
  labkit::DeviceRelabel relabel(A.host);
  const int n = A.host.rows;
  labkit::DeviceBuffer<double> b(static_cast<std::size_t>(n));
  labkit::GuardedBuffer<double> x(std::size_t(n), "x");
  labkit::fill_random_device(b.data(), std::size_t(n), speed_seed("b", -1));
  check_solver_at_size(Solver::loop, A, b, speed_seed("b", -1));
  // The baseline is the bytes-moved floor at memcpy bandwidth with step 4's two host round trips, timed in the same
  // process. Per iteration: two device-to-device cudaMemcpy of a quarter of the floor's bytes each (a copy moves
  // each byte twice, read and write), each followed by what alpha and beta cost the host at least: an 8-byte copy
  // into pinned host memory, a synchronization and a read. The host's round-trip latency varies between processes
  // and with the machine's load; against a floor without round trips the reference measured 0.75-0.98 in thirteen
  // runs (H100, 2026-11-25). With the round trips on both sides the ratio measures the step's kernels and launches.
  const double bytes = iteration_floor_bytes(A.host);
  const std::size_t quarter = static_cast<std::size_t>(bytes / 4);
  labkit::DeviceBuffer<unsigned char> copy_src(quarter), copy_dst(quarter);
  labkit::DeviceBuffer<double> dev_scalar(1);
  labkit::PinnedBuffer<double> host_scalar(1);
  LABKIT_CUDA(cudaMemset(copy_src.data(), 1, quarter));
  LABKIT_CUDA(cudaMemset(dev_scalar.data(), 0, sizeof(double)));
  volatile double sink = 0;
  auto baseline = [&](int iters) {
    for (int i = 0; i < 2 * iters; ++i) {
      LABKIT_CUDA(cudaMemcpyAsync(copy_dst.data(), copy_src.data(), quarter, cudaMemcpyDeviceToDevice));
      LABKIT_CUDA(cudaMemcpyAsync(host_scalar.data(), dev_scalar.data(), sizeof(double), cudaMemcpyDeviceToHost));
      LABKIT_CUDA(cudaStreamSynchronize(0));
      sink = sink + host_scalar[0];
    }
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
                                 [&](int iters) { return solver_case(Solver::loop, A, relabel, b, x, last, iters); });
  labkit::gate::require_speedup(cmp, "the bytes-moved floor at memcpy bandwidth (cudaMemcpy of those bytes)",
                                "step 4 (one CG iteration)", bytes / 1e9, "GB");
}

TEST_CASE("step6.speed", "[lab07][step6][speed]") {
  LABKIT_REQUIRE_GPU();
  DevCsr A(&big_poisson());
  labkit::DeviceRelabel relabel(A.host);
  const int n = A.host.rows;
  labkit::DeviceBuffer<double> b(static_cast<std::size_t>(n)), xb(static_cast<std::size_t>(n));
  labkit::GuardedBuffer<double> x(std::size_t(n), "x");
  labkit::fill_random_device(b.data(), std::size_t(n), speed_seed("b", -1));
  check_solver_at_size(Solver::graph, A, b, speed_seed("b", -1));
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
                                 [&](int iters) { return solver_case(Solver::graph, A, relabel, b, x, last, iters); });
  const double bytes = iteration_floor_bytes(A.host);
  const double bw = labkit::memcpy_bandwidth_gbs();
  labkit::report::metric("floor_fraction", bytes / (bw * 1e9) * 1e3 / cmp.candidate.median_ms, "x");
  labkit::gate::require_speedup(cmp, "cuSPARSE + cuBLAS CG (one iteration)", "step 6 (one CG iteration)",
                                bytes / 1e9, "GB");
}
