// Lab 09's speed gate: step 3's overlap on two processes and two GPUs (see the comment below). An MPI gate like the
// others: gates.cpp starts and ends MPI and holds the correctness gates; gate_util.h what they share.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "blocking_comm.h"
#include "gate_util.h"
#include "labkit/cublas.h"
#include "labkit/gate.h"
#include "labkit/random.h"
#include "labkit/reference.h"
#include "labkit/report.h"
#include "summa.h"

using namespace lab09_gates;

// ---- step3.speed ------------------------------------------------------------------------------------------------
// Step 3's point is overlap: the broadcasts of panel k + 1 travel while the GPU multiplies panel k. The gate times,
// with its own code on the same 1 x 2 grid and the same arrays, the two phases of the product alone:
//   comm     every panel's communication as a blocking SUMMA does it (the owner stages the panel to pinned host
//            memory, both broadcasts, the receiver copies it to the device), and
//   updates  every local update (local_gemm, cuBLAS), no communication;
// then step 3 itself. Without overlap step 3 takes about comm + updates; with perfect overlap, the longer of the
// two. The graded figure is the share of the shorter phase that step 3 hides:
//   hidden = (comm + updates - step 3) / min(comm, updates)      0: none, 1: all of it.
// It measures the step, not the machine's MPI: on two H200s whose MPI broadcasts through host memory, one panel's
// communication (10.9 ms) takes twice its update (5.6 ms), so two processes cannot beat one GPU at N = 16384 however
// well they overlap; the ratio to one GPU's SGEMM of the whole product is measured and reported beside it
// (vs_one_gpu), not graded. Times are barrier to barrier, the slowest process's, median of three after a warm-up,
// the three measurements interleaved. A is drawn afresh before every repetition (nothing can be replayed) and the
// last product is checked on sampled elements of every process.
namespace {

constexpr int kSpeedN = 16384, kSpeedB = 1024;
constexpr int kRepetitions = 4;  // of the three measurements, the first a warm-up

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The engine the gate's own timings run on: a stream and a cuBLAS handle of the gate's, on engine()'s device, made
// before the step's first call. The step is handed engine() (not const), so a handle it left slowed
// (cublasSetSmCountTarget, a math mode, a workspace) or a stream it replaced would slow the updates the gate times
// alone, and so raise the step's `hidden`.
lab09::Engine& baseline_engine() {
  static lab09::Engine base = lab09::make_engine();
  return base;
}

// Milliseconds of fn on the slowest process, barrier to barrier, every GPU the process uses drained before the clock
// stops (work left running after the return is counted, also on a GPU other than the rank's own).
double timed_ms(const std::function<void()>& fn) {
  labkit::synchronize_devices_in_use();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  fn();
  labkit::synchronize_devices_in_use();
  double t = (MPI_Wtime() - t0) * 1e3;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

// For information: one cuBLAS SGEMM of the whole N x N product on rank 0's GPU; every process gets the time.
double one_gpu_sgemm_ms(lab09::Engine& e, int N, std::uint64_t seed) {
  double ms_median = 0;
  if (world_rank() == 0) {
    std::vector<float> h(std::size_t(N) * N);
    float *A, *B, *C;
    LABKIT_CUDA(cudaMalloc(&A, h.size() * 4));
    LABKIT_CUDA(cudaMalloc(&B, h.size() * 4));
    LABKIT_CUDA(cudaMalloc(&C, h.size() * 4));
    for (int which = 0; which < 2; ++which) {
      for (int j = 0; j < N; ++j)
        for (int i = 0; i < N; ++i) h[i + std::size_t(j) * N] = hashed(seed, which, i, j);
      LABKIT_CUDA(cudaMemcpy(which ? B : A, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    LABKIT_CUDA(cudaStreamSynchronize(0));  // the last pageable chunk may still be in flight; e.stream is non-blocking
    cudaEvent_t t0, t1;
    LABKIT_CUDA(cudaEventCreate(&t0));
    LABKIT_CUDA(cudaEventCreate(&t1));
    std::vector<double> ms;
    for (int rep = 0; rep < 4; ++rep) {
      LABKIT_CUDA(cudaMemsetAsync(C, 0, h.size() * 4, e.stream));
      LABKIT_CUDA(cudaEventRecord(t0, e.stream));
      lab09::local_gemm(e, N, N, N, A, N, B, N, C, N);
      LABKIT_CUDA(cudaEventRecord(t1, e.stream));
      LABKIT_CUDA(cudaEventSynchronize(t1));
      float t = 0;
      LABKIT_CUDA(cudaEventElapsedTime(&t, t0, t1));
      if (rep > 0) ms.push_back(t);
    }
    ms_median = median_of(ms);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    cudaFree(A), cudaFree(B), cudaFree(C);
  }
  MPI_Bcast(&ms_median, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return ms_median;
}

// This process's blocks of A (which = 0) or B (which = 1) at the speed gate's size; both have A's shape and layout.
// Columns on every core: half of a 16384^2 matrix per process, drawn again before every repetition.
std::vector<float> speed_blocks(const lab09::Grid& g, std::uint64_t seed, int which) {
  using namespace lab09;
  if (!g.member()) return {};
  const Dist d{kSpeedN, kSpeedN, kSpeedB};
  std::vector<float> out(local_size(d, g));
  const int rows = local_rows(d, g), ld = local_ld(d, g);
  labkit::parallel_for(std::size_t(local_cols(d, g)), [&](std::size_t begin, std::size_t end) {
    for (int lj = int(begin); lj < int(end); ++lj)
      for (int li = 0; li < rows; ++li)
        out[li + std::size_t(lj) * ld] =
            hashed(seed, which, global_index(li, kSpeedB, g.row, g.P), global_index(lj, kSpeedB, g.col, g.Q));
  });
  return out;
}

// The seed of A in repetition `rep` of the timing (the same on every process): A is drawn afresh before every
// repetition, so each timed call multiplies values no earlier call saw. Not A scaled by 2 or 1/2: the product
// scales with A, so a step could keep an earlier C and return it rescaled.
std::uint64_t a_seed(std::uint64_t seed, int rep) {
  return rep == 0 ? seed : labkit::derive_seed(seed, "A of repetition " + std::to_string(rep));
}

// A timed product (A from seed_a, B from seed_b) on 32 sampled elements of this process's C in device memory
// (a full check would cost N^3 on the CPU; only the sampled elements are copied back): "" or what is wrong.
std::string check_sampled_product(const lab09::Grid& g, std::uint64_t seed_a, std::uint64_t seed_b, const float* C) {
  using namespace lab09;
  const int N = kSpeedN, b = kSpeedB;
  const Dist dC{N, N, b};
  const int mc = local_rows(dC, g), nc = local_cols(dC, g), ldc = local_ld(dC, g);
  for (int s = 0; s < 32; ++s) {
    // Positions drawn from A's seed (the gate's secret and the repetition): fixed ones, readable in this file, would
    // tell a step which 32 elements to get right.
    const int li = int(labkit::random_bits(seed_a, 2 * std::uint64_t(s)) % unsigned(mc));
    const int lj = int(labkit::random_bits(seed_a, 2 * std::uint64_t(s) + 1) % unsigned(nc));
    const int i = global_index(li, b, g.row, g.P), j = global_index(lj, b, g.col, g.Q);
    double ref = 0, squares = 0;
    for (int p = 0; p < N; ++p) {
      const double t = double(hashed(seed_a, 0, i, p)) * hashed(seed_b, 1, p, j);
      ref += t, squares += t * t;
    }
    // The entries are random in [-1, 1), so rounding errors add up like a random walk: any order of N fp32
    // multiply-adds errs by about 0.2 u N rms(t) at most (a plain loop; cuBLAS's blocked sums far less), and this
    // bound is 8 u sqrt(N) ||t|| = 8 u N rms(t). Products of TF32-rounded inputs (10-bit mantissa) err by about
    // 2^-11 sqrt(N) rms(t), 6x the bound at N = 16384: simulated on the CPU, 80 % of TF32 samples exceed it, so
    // all 32 pass with a chance of 1e-22, where the worst-case bound 2 (N + 2) u sum|t| let TF32 or BF16 through.
    const double tol = 8.0 * 0x1p-24 * std::sqrt(double(N)) * std::sqrt(squares);
    float v = 0;
    LABKIT_CUDA(cudaMemcpy(&v, C + li + std::size_t(lj) * ldc, sizeof v, cudaMemcpyDeviceToHost));
    if (!(std::fabs(v - ref) <= tol))
      return where(g) + " C global (" + std::to_string(i) + ", " + std::to_string(j) + "): expected " +
             std::to_string(ref) + " (for the A drawn before the last timed call), got " + std::to_string(v);
  }
  return "";
}

struct OverlapTimes {
  double comm_ms = 0, updates_ms = 0, step3_ms = 0;
  std::string problem;  // this process's: the first repetition whose product is wrong
};

// The communication alone, the local updates alone and step 3, interleaved, on the grid's processes (the others
// only join the barriers).
OverlapTimes time_overlap(const lab09::Grid& g, lab09::Engine& e, lab09::Engine& base, std::uint64_t seed) {
  using namespace lab09;
  const int N = kSpeedN, b = kSpeedB, steps = (N + b - 1) / b;
  const Dist d{N, N, b};
  const int mloc = g.member() ? local_rows(d, g) : 0, nloc = g.member() ? local_cols(d, g) : 0;
  const int ld = g.member() ? local_ld(d, g) : 1;
  std::vector<float> a = speed_blocks(g, seed, 0), bb = speed_blocks(g, seed, 1), c(a.size(), 0.0f);
  EngineArray A(e, a), B(e, bb), C(e, c);
  float *stage_a = nullptr, *stage_b = nullptr, *panel = nullptr;
  if (g.member()) {
    LABKIT_CUDA(cudaMallocHost(&stage_a, std::size_t(mloc) * b * 4));
    LABKIT_CUDA(cudaMallocHost(&stage_b, std::size_t(b) * nloc * 4));
    LABKIT_CUDA(cudaMalloc(&panel, std::size_t(std::max(mloc, nloc)) * b * 4));
  }
  // The blocking SUMMA's communication, the gate's own code: the same bytes step 3 must move.
  auto comm_alone = [&] { blocking_comm(g, base, d, A.ptr(), B.ptr(), stage_a, stage_b, panel); };
  // Every local update alone: the same m x n x w products, from the process's own blocks (the time of a cuBLAS
  // SGEMM does not depend on the values).
  auto updates_alone = [&] {
    if (!g.member()) return;
    for (int kb = 0; kb < steps; ++kb)
      local_gemm(base, mloc, nloc, std::min(b, N - kb * b), A.ptr() + std::size_t(kb / g.Q) * b * ld, ld,
                 B.ptr() + std::size_t(kb / g.P) * b, ld, C.ptr(), ld);
  };
  std::vector<double> comm, upd, step3;
  OverlapTimes t;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const double t_comm = timed_ms(comm_alone), t_upd = timed_ms(updates_alone);
    if (g.member()) {
      if (rep > 0) {  // a fresh A (a_seed); the upload returns once the copy has landed
        a = speed_blocks(g, a_seed(seed, rep), 0);
        if (e.gpu) A.dev.upload(a);
      }
      LABKIT_CUDA(cudaMemsetAsync(C.ptr(), 0, c.size() * 4, e.stream));
    }
    const double t_step3 = timed_ms([&] {
      collective_call(g, "summa_overlap, N = 16384 on a 1 x 2 grid",
                      [&] { summa_overlap(g, e, N, N, N, b, A.ptr(), B.ptr(), C.ptr()); });
    });
    if (rep > 0) comm.push_back(t_comm), upd.push_back(t_upd), step3.push_back(t_step3);
    // The updates alone run with the gate's handle in the default math mode: a step that switched the handle it is
    // handed to tensor-core math (TF32) would be timed against fp32 products it does not compute.
    if (g.member() && e.gpu && t.problem.empty()) {
      cublasMath_t mode = CUBLAS_DEFAULT_MATH;
      LABKIT_CUBLAS(cublasGetMathMode(e.blas, &mode));
      const int math = int(mode) & ~int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);  // a flag, fp32 still
      if (math != CUBLAS_DEFAULT_MATH && math != CUBLAS_PEDANTIC_MATH)
        t.problem = "repetition " + std::to_string(rep) + ": " + where(g) + " the step left the engine's cuBLAS " +
                    "handle in math mode " + std::to_string(int(mode)) + " (tensor-core or reduced-precision " +
                    "math); the products must be fp32 (CUBLAS_DEFAULT_MATH)";
    }
    // Every repetition's product, not only the last: a step that knows the gate's repetition count could skip its
    // broadcasts in the timed ones (two local GEMMs, no deadlock) and work only in the last.
    if (g.member() && t.problem.empty()) {
      t.problem = check_sampled_product(g, a_seed(seed, rep), seed, C.ptr());
      if (!t.problem.empty()) t.problem = "repetition " + std::to_string(rep) + ": " + t.problem;
    }
  }
  t.comm_ms = median_of(comm), t.updates_ms = median_of(upd), t.step3_ms = median_of(step3);
  if (g.member()) cudaFreeHost(stage_a), cudaFreeHost(stage_b), cudaFree(panel);
  return t;
}

}  // namespace

TEST_CASE("step3.speed", "[lab09][step3][speed]") {
  using namespace lab09;
  LABKIT_REQUIRE_GPU();
  Engine& e = engine();
  Engine& base = baseline_engine();  // before the step's first call
  int devices = 0;
  LABKIT_CUDA(cudaGetDeviceCount(&devices));
  if (world_size() < 2) SKIP("this gate runs 2 processes: start it under mpirun -np 2 (or more)");
  if (devices < 2)
    SKIP("this gate needs 2 processes on 2 GPUs; this machine has " + std::to_string(devices) + " GPU");
  const int N = kSpeedN;
  const std::uint64_t seed = shared_seed("speed");
  const double one_gpu_ms = one_gpu_sgemm_ms(base, N, seed);
  Grid g = make_grid(MPI_COMM_WORLD, 1, 2);
  const OverlapTimes t = time_overlap(g, e, base, seed);
  free_grid(g);
  require_all(t.problem, "step 3 at N = 16384 on a 1 x 2 grid, after the timed calls:");

  const double hidden = (t.comm_ms + t.updates_ms - t.step3_ms) / std::min(t.comm_ms, t.updates_ms);
  labkit::report::metric("comm_ms", t.comm_ms, "ms");
  labkit::report::metric("updates_ms", t.updates_ms, "ms");
  labkit::report::metric("candidate_ms", t.step3_ms, "ms");
  labkit::report::metric("candidate_rate", 2.0 * N * double(N) * N / t.step3_ms / 1e9, "TFLOP/s");
  labkit::report::metric("broadcast_gb", double(N) * N / 2 * 4 / 1e9, "GB");  // A's panels each process receives
  labkit::report::metric("one_gpu_ms", one_gpu_ms, "ms");
  labkit::report::metric("vs_one_gpu", one_gpu_ms / t.step3_ms, "x");
  labkit::report::metric("hidden", hidden, "");
  const double threshold = labkit::gate::threshold();
  const auto* rg = labkit::gate::rubric().find("step3.speed");
  std::ostringstream os;
  os << std::setprecision(4) << "step 3 took " << t.step3_ms << " ms on 2 processes; alone, the communication takes "
     << t.comm_ms << " ms and the local updates " << t.updates_ms << " ms (the gate's own code): step 3 hid " << hidden
     << " of the shorter phase (0 = no overlap, 1 = all of it); one GPU's SGEMM of the whole product: " << one_gpu_ms
     << " ms";
  // The GPU must run every update: finishing sooner than the updates alone means the timed call skipped work.
  if (t.step3_ms < 0.9 * t.updates_ms)
    FAIL(os.str() << ": faster than its local updates alone, which no overlap allows: the timed call did not do "
                     "all of its products before it returned");
  if (hidden < threshold)
    FAIL(os.str() << "; the gate needs " << threshold << (rg && !rg->hint.empty() ? "\n  hint: " + rg->hint : ""));
  if (world_rank() == 0) std::cout << "  " << os.str() << std::endl;
}
