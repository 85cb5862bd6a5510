// Lab 08 GPU correctness gates: the per-part SpMV and the three solvers on 1-4 "virtual devices" (all parts on
// device 0, exchanges by peer copies: what a one-GPU machine can check of the multi-device logic), then on 2..N real
// GPUs through NCCL (skipped with fewer than two GPUs), against labkit's CPU CG and SpMV references. What the gate
// files share is in gate_util.h; the CPU gates are in gates_cpu.cpp, the speed gates in gates_speed.cpp.
//
// Every call of the student's code runs in the launch recorder (labkit::gate::own_kernels, through `recorded`): each
// kernel must be compiled from the student's source, or be NCCL's in the multi-GPU gates (their rubric entries
// allow nccl), and the grader's racecheck learns which of the student's kernels use shared memory and instruments
// only those (on an H100 the race check of this lab took 18 s with every kernel instrumented, the longest of any
// lab's). Every answer is also checked against a CPU reference.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "gate_util.h"
#include "labkit/gate.h"
#include "labkit/guard.h"
#include "labkit/launches.h"
#include "labkit/random.h"
#include "labkit/sparse.h"
#include "multi_cg.h"

using namespace lab08_gates;

namespace {

constexpr double kU = 0x1p-53;

// ---- teams --------------------------------------------------------------------------------------------------------
// The grader's default memory and race checks (LABKIT_SANITIZER with LABKIT_SANITIZER_SMALL) instrument every
// launch, at milliseconds each, and a converging solve is hundreds of launches per part: on two H200s lab 08's
// racecheck ran out of its 120 s after three gates. There the gates keep two and three parts (2 and 3 virtual
// devices, and the first real pair) and the fixed-iteration and failure checks, which still run every kernel, every
// halo path and (memcheck; racecheck keeps only the 7 iterations) step 4's stop inside a batch; they leave out the
// converging solves and the 1- and 4-part teams.
// `labgrade --sanitize` (no LABKIT_SANITIZER_SMALL) runs every case.
void say_what_the_small_run_leaves_out() {
  if (labkit::gate::sanitizer_small_shapes())
    std::cout << "  [sanitizer] under compute-sanitizer (LABKIT_SANITIZER=" << labkit::gate::sanitizer_tool()
              << ", small shapes): left out the converging solves and the 1- and 4-part teams"
              << (labkit::gate::default_racecheck() ? ", and the 37 fixed iterations" : "") << "\n";
}

std::vector<std::vector<int>> virtual_teams() {
  if (labkit::gate::sanitizer_small_shapes()) return {{0, 0}, {0, 0, 0}};
  return {{0}, {0, 0}, {0, 0, 0}, {0, 0, 0, 0}};
}
std::vector<std::vector<int>> real_teams() {
  std::vector<std::vector<int>> out;
  const int n = labkit::gate::sanitizer_small_shapes() ? std::min(device_count(), 2) : device_count();
  for (int k = 2; k <= n; ++k) {
    std::vector<int> d(static_cast<std::size_t>(k));
    std::iota(d.begin(), d.end(), 0);
    out.push_back(d);
  }
  return out;
}

// One call of the student's code (`call` returns what the call returned, or anything for a void call) in the launch
// recorder; every device of the team is waited for inside the scope, so the kernels of all of them are recorded.
// The team's streams are non-blocking: work a step puts on the legacy default stream (a cudaMemsetAsync of x, a
// launch without a stream, an asynchronous copy of a result) is not ordered with them. The call's first
// milliseconds are spent (labkit::spin_on_streams) on the legacy stream of every device, or on the team's streams,
// which of the two drawn per call from the gate's secret (not alternated: the gates call make and solve in pairs,
// and every solve would get the same side): a step that counted on an order runs its two sides the wrong way round
// in the calls of one side, instead of only when a timing goes wrong. Not in the first call that launches a kernel
// of the step's: loading a kernel lazily (CUDA's default) waits for the device, spin included.
constexpr double kStreamSpinMs = 2.0;  // far above a launch's few microseconds, short beside a solve
long g_recorded_calls = 0;
template <class F>
auto recorded(std::string_view step, const lab08::Team& team, F&& call) {
  const bool spin_legacy =
      labkit::gate::seed("stream spin, call " + std::to_string(g_recorded_calls++)) % 2 == 0;
  std::optional<decltype(call())> out;
  std::vector<std::pair<int, cudaStream_t>> legacy, team_streams;
  for (int k = 0; k < team.parts(); ++k) {
    if (k == 0 || !team.virtual_devices()) legacy.emplace_back(team.device(k), cudaStreamLegacy);
    team_streams.emplace_back(team.device(k), team.stream(k));
    team_streams.emplace_back(team.device(k), team.comm_stream(k));
  }
  labkit::gate::own_kernels(step, [&] {
    labkit::spin_on_streams(spin_legacy ? legacy : team_streams, kStreamSpinMs);
    out.emplace(call());
    team.synchronize();
    for (const auto& [device, stream] : legacy) {  // the spin and what the step queued behind it, before any read
      LABKIT_CUDA(cudaSetDevice(device));
      LABKIT_CUDA(cudaStreamSynchronize(stream));
    }
    team.use(0);
  });
  return std::move(*out);
}

// ---- step 1 on the GPU --------------------------------------------------------------------------------------------
void check_spmv_parts(const lab08::Team& team, const labkit::Csr& A, const std::string& label) {
  const std::string ctx = "step 1 (distribute_rows + spmv_parts), " + label + " (" + describe(A) + "), " +
                          team.describe();
  const int P = team.parts();
  const auto bounds = ref_partition(A, P);
  const auto hx = labkit::random_doubles(std::size_t(A.cols), labkit::gate::seed("spmv x " + label));
  const auto expected = labkit::spmv_ref(A, hx);
  labkit::gate::allow_copies_only("step 1 (distribute_rows)");  // uploads: spmv_parts, beside it, runs the kernels
  const auto parts =
      recorded("step 1 (distribute_rows)", team, [&] { return lab08::distribute_rows(team, A, bounds); });
  if (int(parts.size()) != P) fail_at(ctx, "distribute_rows returned " + std::to_string(parts.size()) + " parts");
  std::vector<std::unique_ptr<labkit::GuardedBuffer<double>>> xs, ys;
  std::vector<const double*> xp;
  std::vector<double*> yp;
  for (int k = 0; k < P; ++k) {
    const auto& p = parts[std::size_t(k)];
    const int r0 = bounds[std::size_t(k)], r1 = bounds[std::size_t(k) + 1];
    if (p.row_begin != r0 || p.rows != r1 - r0 || p.nnz != A.row_ptr[std::size_t(r1)] - A.row_ptr[std::size_t(r0)] ||
        p.device != team.device(k))
      fail_at(ctx, "part " + std::to_string(k) + " describes rows from " + std::to_string(p.row_begin) + ", " +
                       std::to_string(p.rows) + " rows, " + std::to_string(p.nnz) + " entries on device " +
                       std::to_string(p.device) + "; expected rows [" + std::to_string(r0) + ", " +
                       std::to_string(r1) + ") on device " + std::to_string(team.device(k)));
    team.use(k);
    xs.push_back(std::make_unique<labkit::GuardedBuffer<double>>(hx.size(), "x"));
    xs.back()->upload(hx);
    // An empty part still gets a valid pointer (one poisoned element nobody may write).
    ys.push_back(std::make_unique<labkit::GuardedBuffer<double>>(std::max<std::size_t>(1, std::size_t(p.rows)), "y"));
    ys.back()->poison();
    xp.push_back(xs.back()->data());
    yp.push_back(ys.back()->data());
  }
  team.use(0);
  recorded("step 1 (spmv_parts)", team, [&] {
    lab08::spmv_parts(team, parts, xp, yp);
    return 0;
  });
  for (int k = 0; k < P; ++k) {
    team.use(k);
    LABKIT_CUDA(cudaDeviceSynchronize());
    const std::string pctx = ctx + ", part " + std::to_string(k);
    for (auto* b : {xs[std::size_t(k)].get(), ys[std::size_t(k)].get()}) {
      const auto g = b->check_guards();
      if (!g.ok) fail_at(pctx, g.message);
    }
    const int r0 = bounds[std::size_t(k)], r1 = bounds[std::size_t(k) + 1];
    std::vector<double> want(expected.begin() + r0, expected.begin() + r1);
    // Each row's sum in any order: error <= 2 (len + 1) u sum |a x|; rows here have at most ~70 entries of
    // magnitude <= 4 times |x| <= 1, so 2 * 72 * u * 300 bounds every row.
    labkit::CheckOptions opt;
    opt.name = "y (part " + std::to_string(k) + ", local row index)";
    opt.tolerance = 2.0 * 72 * kU * 300;
    auto got = ys[std::size_t(k)]->download();
    if (want.empty() && !labkit::is_poison(got[0])) fail_at(pctx, "an empty part wrote y[0]");
    got.resize(want.size());
    labkit::gate::require(labkit::check_close(got, want, opt), pctx);
  }
  team.use(0);
}

// ---- solvers ------------------------------------------------------------------------------------------------------
double rel_residual_ld(const labkit::Csr& A, const std::vector<double>& x, const std::vector<double>& b) {
  const auto Ax = labkit::spmv_ref(A, x);
  long double rr = 0, bb = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    rr += (long double)(b[i] - Ax[i]) * (b[i] - Ax[i]);
    bb += (long double)b[i] * b[i];
  }
  return bb > 0 ? double(std::sqrt(rr / bb)) : 0.0;
}
bool all_finite(const std::vector<double>& x) {
  return std::all_of(x.begin(), x.end(), [](double v) { return std::isfinite(v); });
}

void check_converges(Scheme s, const lab08::Team& team, const labkit::Csr& A, const std::string& label) {
  const std::string ctx = std::string(name(s)) + ", " + label + " (" + describe(A) + "), " + team.describe();
  const auto b = labkit::random_doubles(std::size_t(A.rows), labkit::gate::seed("b " + label));
  const double tol = 1e-8;
  const auto ref = labkit::cg_ref(A, b, tol, 5000);
  auto solver = recorded(name(s), team, [&] { return make(s, team, A); });
  lab08::CgOptions opt;
  opt.rel_tol = tol;
  opt.max_iter = 5000;
  int last = 0;
  bool monotone = true;
  opt.progress = [&](int it, double) {
    monotone = monotone && it > last;
    last = it;
  };
  std::vector<double> x;
  const auto res = recorded(name(s), team, [&] { return solver->solve(b, x, opt); });
  if (!res.converged()) fail_at(ctx, "did not converge: " + res.message + " (the CPU reference: " + ref.message + ")");
  if (x.size() != b.size() || !all_finite(x)) fail_at(ctx, "x has the wrong size or non-finite entries");
  const double truth = rel_residual_ld(A, x, b);
  // The solver confirms convergence with its own true residual in double; the CPU's long double one may differ by
  // a few units of roundoff times the condition-free size of the sums: 10% slack is ample.
  if (!(truth <= 1.1 * tol))
    fail_at(ctx, "reported converged, but ||b - A x|| / ||b|| = " + std::to_string(truth) + " on the CPU (tolerance " +
                     std::to_string(tol) + "); the solver said: " + res.message);
  // Splitting changes only the summation order: the iteration count stays within a few of the CPU's.
  const int slack = std::max(3, ref.iterations / 20);
  if (std::abs(res.iterations - ref.iterations) > slack)
    fail_at(ctx, std::to_string(res.iterations) + " iterations where the CPU reference needs " +
                     std::to_string(ref.iterations) + " (more than " + std::to_string(slack) +
                     " apart: a wrong alpha, beta or a stale p entry slows convergence)");
  if (!monotone) fail_at(ctx, "progress saw an iteration number that did not grow");
  if (std::abs(res.relative_residual - truth) > 0.5 * truth + 1e-14)
    fail_at(ctx, "reports relative_residual " + std::to_string(res.relative_residual) + ", the CPU finds " +
                     std::to_string(truth));
}

// A tolerance double precision cannot reach on A: the updated residual meets it long before b - A x does. Any status
// is right but a "converged" that the true residual denies (labkit::cg_ref ends in stagnation; lab 07's gate of the
// same name says why a loop that trusts the updated residual does not).
void check_unreachable(Scheme s, const lab08::Team& team, const labkit::Csr& A, const std::string& label) {
  const std::string ctx = std::string(name(s)) + ", " + label + " (" + describe(A) + "), tolerance 1e-16, which " +
                          "double precision cannot reach, " + team.describe();
  const auto b = labkit::random_doubles(std::size_t(A.rows), labkit::gate::seed("b unreachable " + label));
  const double tol = 1e-16;
  auto solver = recorded(name(s), team, [&] { return make(s, team, A); });
  lab08::CgOptions opt;
  opt.rel_tol = tol;
  opt.max_iter = 2000;
  std::vector<double> x;
  const auto res = recorded(name(s), team, [&] { return solver->solve(b, x, opt); });
  if (x.size() != b.size() || !all_finite(x)) fail_at(ctx, "x has the wrong size or non-finite entries");
  const double truth = rel_residual_ld(A, x, b);
  if (res.converged() && !(truth <= 1.1 * tol + 1e-15)) {
    std::ostringstream os;
    os << "reports convergence, but ||b - A x|| / ||b|| = " << truth << " on the CPU: confirm the updated residual "
       << "with the true one before reporting converged, and report stagnation when restarts stop improving it "
       << "(lab 07's step 4); the solver said: " << res.message;
    fail_at(ctx, os.str());
  }
}

// Exactly k iterations (rel_tol = 0): x must be the CPU's k-th iterate, which checks every stale or missing halo
// entry and every wrong scalar directly, not through convergence.
void check_fixed_iterations(Scheme s, const lab08::Team& team, const labkit::Csr& A, int iters, int batch,
                            const std::string& label, bool solve_twice = false) {
  const std::string ctx = std::string(name(s)) + ", " + label + " (" + describe(A) + "), max_iter = " +
                          std::to_string(iters) + ", " + team.describe();
  const auto b = labkit::random_doubles(std::size_t(A.rows), labkit::gate::seed("b fixed " + label));
  const auto ref = labkit::cg_ref(A, b, 0.0, iters);
  auto solver = recorded(name(s), team, [&] { return make(s, team, A); });
  lab08::CgOptions opt;
  opt.rel_tol = 0;
  opt.max_iter = iters;
  opt.graph_iterations = batch;
  std::vector<int> seen;
  opt.progress = [&](int it, double) { seen.push_back(it); };
  std::vector<double> x;
  const auto res = recorded(name(s), team, [&] { return solver->solve(b, x, opt); });
  if (res.status != labkit::CgStatus::max_iterations || res.iterations != iters)
    fail_at(ctx, "expected status max_iterations after exactly " + std::to_string(iters) + " iterations; got: " +
                     res.message);
  // progress after every iteration (steps 2 and 3) or every launch of opt.graph_iterations (step 4): never further
  // apart, so a batch of another size than the option's fails here (its iterate is the same).
  const int every = s == Scheme::device_scalars ? batch : 1;
  for (std::size_t i = 0; i <= seen.size(); ++i) {
    const int from = i ? seen[i - 1] : 0, to = i < seen.size() ? seen[i] : iters;
    if (to - from > every)
      fail_at(ctx, "progress was called with iteration " + (i < seen.size() ? std::to_string(to) : "none") + " after " +
                       (i ? std::to_string(from) : std::string("none")) + " of " + std::to_string(iters) +
                       (s == Scheme::device_scalars
                            ? ": call it after each launch of opt.graph_iterations = " + std::to_string(batch) +
                                  " iterations (a batch of another size ignores the option)"
                            : ": call it after each iteration"));
  }
  // A few iterations of CG on a well-conditioned matrix amplify rounding differences only mildly: 1e-9 relative to
  // ||x||_inf is far above a different summation order and far below one wrong entry of p.
  labkit::CheckOptions o;
  o.name = "x after " + std::to_string(iters) + " iterations";
  o.tolerance = 1e-9;
  labkit::gate::require(labkit::check_close(x, ref.x, o), ctx + " (compared with the CPU CG's iterate)");
  // The same solver object again, with another b: a solve must start from its own b and x = 0 whatever the last
  // one left in the solver's buffers (a stop flag, an iteration count, x or r kept on the device).
  if (!solve_twice) return;
  const auto b2 = labkit::random_doubles(std::size_t(A.rows), labkit::gate::seed("b fixed, second solve " + label));
  const auto ref2 = labkit::cg_ref(A, b2, 0.0, iters);
  std::vector<double> x2;
  const auto res2 = recorded(name(s), team, [&] { return solver->solve(b2, x2, opt); });
  if (res2.status != labkit::CgStatus::max_iterations || res2.iterations != iters)
    fail_at(ctx + ", a second solve on the same solver object",
            "expected status max_iterations after exactly " + std::to_string(iters) +
                " iterations; got: " + res2.message + " (state left over from the first solve?)");
  labkit::gate::require(labkit::check_close(x2, ref2.x, o),
                        ctx + ", a second solve on the same solver object with another b (compared with the CPU CG's "
                              "iterate: every solve starts from its own b and x = 0)");
}

void check_failures(Scheme s, const lab08::Team& team) {
  const std::string ctx = std::string(name(s)) + ", " + team.describe();
  // Negative definite (-Poisson): p^T A p < 0 in the first iteration.
  {
    auto A = labkit::poisson2d(17, 13);
    for (double& v : A.values) v = -v;
    auto solver = recorded(name(s), team, [&] { return make(s, team, A); });
    lab08::CgOptions opt;
    opt.max_iter = 200;
    std::vector<double> x;
    const auto res =
        recorded(name(s), team, [&] { return solver->solve(std::vector<double>(std::size_t(A.rows), 1.0), x, opt); });
    if (res.status != labkit::CgStatus::not_spd) fail_at(ctx + ", -Poisson", "expected not_spd; got: " + res.message);
    if (x.size() != std::size_t(A.rows) || !all_finite(x)) fail_at(ctx + ", -Poisson", "x is not finite");
  }
  // b's entries near 2^600: r^T r overflows to Inf at once (labkit::cg_ref: breakdown after 0 iterations, x = 0).
  // Any status but converged passes, with x finite: Inf <= tol^2 Inf is no convergence, and Inf / Inf no alpha.
  {
    const auto A = labkit::poisson2d(13, 11);
    auto b = labkit::random_doubles(std::size_t(A.rows), labkit::gate::seed("b overflow"));
    for (double& v : b) v = std::ldexp(v, 600);
    auto solver = recorded(name(s), team, [&] { return make(s, team, A); });
    lab08::CgOptions opt;
    opt.max_iter = 200;
    std::vector<double> x;
    const auto res = recorded(name(s), team, [&] { return solver->solve(b, x, opt); });
    if (res.converged())
      fail_at(ctx + ", b scaled by 2^600",
              "r^T r overflows to Inf in double, yet the solver reports convergence: stop with breakdown when a "
              "reduction is not finite (lab 07's step 4); the solver said: " + res.message);
    if (x.size() != std::size_t(A.rows) || !all_finite(x)) fail_at(ctx + ", b scaled by 2^600", "x is not finite");
  }
  // b = 0: x = 0 at once.
  {
    const auto A = labkit::poisson2d(13, 11);
    auto solver = recorded(name(s), team, [&] { return make(s, team, A); });
    std::vector<double> x(5, 7.0);
    const auto res =
        recorded(name(s), team, [&] { return solver->solve(std::vector<double>(std::size_t(A.rows), 0.0), x, {}); });
    if (!res.converged() || res.iterations != 0 || x.size() != std::size_t(A.rows) ||
        std::any_of(x.begin(), x.end(), [](double v) { return v != 0; }))
      fail_at(ctx + ", b = 0", "expected converged after 0 iterations with x = 0; got: " + res.message);
  }
}

void check_solver(Scheme s, const std::vector<std::vector<int>>& teams) {
  say_what_the_small_run_leaves_out();
  for (const auto& devices : teams) {
    const auto& team = team_of(devices);
    if (!labkit::gate::sanitizer_small_shapes()) {
      check_converges(s, team, labkit::poisson2d(45, 38), "2D Poisson 45 x 38");
      check_converges(s, team, labkit::random_spd(2003, 9, labkit::gate::seed("spd")), "random SPD");
      // On the largest team only: trusting the updated residual is the host loop's logic, the same on every team,
      // and each solve runs about 500 iterations of the team's exchanges (on two H200s, on all four virtual teams,
      // it added 3.3-4 s to each correctness gate).
      if (&devices == &teams.back()) check_unreachable(s, team, labkit::poisson2d(100, 100), "2D Poisson 100 x 100");
    }
    check_fixed_iterations(s, team, labkit::poisson3d(11, 9, 7), 7, 16, "3D Poisson 11 x 9 x 7", true);
    // 37 = 7 * 5 + 2: step 4 must stop inside its eighth batch of 5 (not the default 16). The default checks'
    // racecheck leaves it to memcheck: it runs the kernels of the 7 iterations above five times over, and racecheck
    // pays per launch (on an H100 these solves were two thirds of the lab's race check).
    if (!labkit::gate::default_racecheck())
      check_fixed_iterations(s, team, labkit::poisson2d(40, 31), 37, 5, "2D Poisson 40 x 31, batches of 5");
    check_failures(s, team);
  }
}

}  // namespace

// ---- GPU gates --------------------------------------------------------------------------------------------------------
TEST_CASE("step1.correct", "[lab08][step1][correctness]") {
  LABKIT_REQUIRE_GPU();
  auto teams = virtual_teams();
  for (const auto& t : real_teams()) teams.push_back(t);
  for (const auto& devices : teams) {
    const auto& team = team_of(devices);
    check_spmv_parts(team, labkit::poisson2d(37, 29), "2D Poisson 37 x 29");
    check_spmv_parts(team, skewed(1001, 40, 61), "skewed rows");
    check_spmv_parts(team, labkit::poisson2d(2, 1), "2 rows (empty parts)");
  }
}

TEST_CASE("step2.correct", "[lab08][step2][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_solver(Scheme::allgather, virtual_teams());
}
TEST_CASE("step3.correct", "[lab08][step3][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_solver(Scheme::halo, virtual_teams());
}
TEST_CASE("step4.correct", "[lab08][step4][correctness]") {
  LABKIT_REQUIRE_GPU();
  check_solver(Scheme::device_scalars, virtual_teams());
}

TEST_CASE("step2.multi_gpu", "[lab08][step2][correctness]") {
  require_two_gpus();
  check_solver(Scheme::allgather, real_teams());
}
TEST_CASE("step3.multi_gpu", "[lab08][step3][correctness]") {
  require_two_gpus();
  check_solver(Scheme::halo, real_teams());
}
TEST_CASE("step4.multi_gpu", "[lab08][step4][correctness]") {
  require_two_gpus();
  check_solver(Scheme::device_scalars, real_teams());
}
