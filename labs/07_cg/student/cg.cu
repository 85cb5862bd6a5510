// Lab 07 - your implementation. Replace each `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab07      (or: labgrade 07)
// The walkthrough (labs/07_cg/README.md) explains each step and what its gates check. The argument checks at
// the top of each function are given: keep them (the gates call the functions with impossible sizes too).
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "cg.h"
#include "labkit/labkit.h"
#include "labkit/timing.h"

namespace lab07 {

namespace {
void check_n(int n, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string("lab07: ") + what + ": n must be >= 0");
}
void check_ptr(const void* p, int n, const char* what) {
  if (n > 0 && !p) throw std::invalid_argument(std::string("lab07: ") + what + ": null pointer for a non-empty array");
}
void check_bps(int bps) {
  if (bps < 1 || bps > kMaxBlocksPerSm)
    throw std::invalid_argument("lab07: blocks_per_sm must be in [1, " + std::to_string(kMaxBlocksPerSm) + "]");
}
void check_csr(const DeviceCsr& A, const char* what) {
  if (A.rows < 0 || A.cols < 0 || A.nnz < 0)
    throw std::invalid_argument(std::string("lab07: ") + what + ": negative matrix size");
  if (!A.row_ptr) throw std::invalid_argument(std::string("lab07: ") + what + ": row_ptr is null");
  check_ptr(A.col_idx, A.nnz, what);
  check_ptr(A.values, A.nnz, what);
}
void check_solver_args(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt, const char* what) {
  check_csr(A, what);
  if (A.rows != A.cols) throw std::invalid_argument(std::string("lab07: ") + what + ": CG needs a square matrix");
  check_ptr(b, A.rows, what);
  check_ptr(x, A.rows, what);
  if (!(opt.rel_tol >= 0)) throw std::invalid_argument(std::string("lab07: ") + what + ": rel_tol must be >= 0");
  if (opt.max_iter < 0) throw std::invalid_argument(std::string("lab07: ") + what + ": max_iter must be >= 0");
  check_bps(opt.blocks_per_sm);
  if (opt.graph_iterations < 1) throw std::invalid_argument(std::string("lab07: ") + what + ": graph_iterations >= 1");
}
}  // namespace

// Step 1a. Kernel 1: each thread sums x[i]*y[i] over a grid-stride loop (i += gridDim.x * blockDim.x), writes its
// sum to a __shared__ array, and the block halves the active threads level by level (a __syncthreads() after
// every level) until thread 0 holds the block's sum: partials[blockIdx.x]. Kernel 2: ONE block does the same over
// the partials and writes *result. Grid: blocks_per_sm * SM count (cudaDevAttrMultiProcessorCount), at most
// kMaxPartials, at least 1 (n == 0 must give 0). Use size_t for i: i + stride can pass 2^31.
void dot_twopass(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  check_n(n, "dot_twopass");
  check_bps(blocks_per_sm);
  check_ptr(x, n, "dot_twopass");
  check_ptr(y, n, "dot_twopass");
  if (!partials || !result) throw std::invalid_argument("lab07: dot_twopass: partials and result must not be null");
  throw labkit::NotImplemented("step 1: dot_twopass");
}

// Step 1b. Same two passes; reduce inside each warp with __shfl_down_sync (offsets 16, 8, 4, 2, 1), then the
// warps' sums (one shared slot per warp, one barrier) in warp 0. Two accumulators per thread keep more loads in
// flight. The summation order must not depend on timing: the gates compare two runs bit for bit.
void dot_shuffle(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  check_n(n, "dot_shuffle");
  check_bps(blocks_per_sm);
  check_ptr(x, n, "dot_shuffle");
  check_ptr(y, n, "dot_shuffle");
  if (!partials || !result) throw std::invalid_argument("lab07: dot_shuffle: partials and result must not be null");
  throw labkit::NotImplemented("step 1: dot_shuffle");
}

// Step 2. One thread per element; y[i] = fma(a, x[i], y[i]). Skip the launch when n == 0 (a grid of 0 blocks is
// an invalid configuration).
void axpy(int n, double a, const double* x, double* y) {
  check_n(n, "axpy");
  check_ptr(x, n, "axpy");
  check_ptr(y, n, "axpy");
  throw labkit::NotImplemented("step 2: axpy");
}

// Step 2. y[i] = x[i] + b * y[i] (p = r + beta p).
void xpby(int n, const double* x, double b, double* y) {
  check_n(n, "xpby");
  check_ptr(x, n, "xpby");
  check_ptr(y, n, "xpby");
  throw labkit::NotImplemented("step 2: xpby");
}

// Step 2. The fused update: in ONE grid-stride loop x[i] += alpha p[i], r[i] -= alpha Ap[i], and accumulate the new
// r[i]^2; then the block reduction of step 1b and the second pass into *rr. Count the bytes: 48 per element here,
// 64 for axpy + axpy + dot.
void update_xr(int n, double alpha, const double* p, const double* Ap, double* x, double* r, double* partials,
               double* rr, int blocks_per_sm) {
  check_n(n, "update_xr");
  check_bps(blocks_per_sm);
  check_ptr(p, n, "update_xr");
  check_ptr(Ap, n, "update_xr");
  check_ptr(x, n, "update_xr");
  check_ptr(r, n, "update_xr");
  if (!partials || !rr) throw std::invalid_argument("lab07: update_xr: partials and rr must not be null");
  throw labkit::NotImplemented("step 2: update_xr");
}

// Step 3a. Thread i computes y[i] = sum over k in [row_ptr[i], row_ptr[i+1]) of values[k] * x[col_idx[k]]. An empty
// row gives 0 (it must still be written). Nothing to launch when A.rows == 0.
void spmv_thread_per_row(const DeviceCsr& A, const double* x, double* y) {
  check_csr(A, "spmv_thread_per_row");
  check_ptr(x, A.cols, "spmv_thread_per_row");
  check_ptr(y, A.rows, "spmv_thread_per_row");
  throw labkit::NotImplemented("step 3: spmv_thread_per_row");
}

// Step 3b. Warp w computes row w: lane l takes entries begin + l, begin + l + 32, ...; a shuffle reduction; lane 0
// writes. 32 * rows threads in all (compute the grid in 64 bits). The early return for warps past the last row is
// safe with the full shuffle mask only because the whole warp returns together.
void spmv_warp_per_row(const DeviceCsr& A, const double* x, double* y) {
  check_csr(A, "spmv_warp_per_row");
  check_ptr(x, A.cols, "spmv_warp_per_row");
  check_ptr(y, A.rows, "spmv_warp_per_row");
  throw labkit::NotImplemented("step 3: spmv_warp_per_row");
}

// Step 4. x = 0, r = p = b, rr = r^T r; then per iteration: Ap = A p; pAp = p^T Ap (to the host); stop with not_spd
// when pAp <= 0, with breakdown when it is not finite; alpha = rr / pAp; update_xr; ++iterations; progress; when
// ||r|| / ||b|| <= rel_tol compute the TRUE residual b - A x (spmv + xpby with b = -1): converged if it agrees,
// else restart from it (r = b - A x, p = r) and give up with stagnation after a few restarts that do not improve
// it; beta = rr_new / rr; p = r + beta p. Handle b == 0 (x = 0, converged) and max_iter == 0. Fill every field of
// CgResult, the true residual included. x must be finite on return. labkit::cg_ref (common/src/sparse.cpp) is
// the same algorithm on the CPU.
CgResult cg_solve(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  check_solver_args(A, b, x, opt, "cg_solve");
  throw labkit::NotImplemented("step 4: cg_solve");
}

// Given (not a step): where the tuning cache lives.
std::string default_tuning_cache() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg && *xdg) base = fs::path(xdg);
  else if (home && *home) base = fs::path(home) / ".cache";
  else return "";
  return (base / "cuda-labs" / "lab07_blocks_per_sm.tsv").string();
}

// Step 5. Key = cudaDeviceProp::name + "|2^" + floor(log2 n). If cache_path names a readable file with a line
// "<key>\t<count>" (count in [1, kMaxBlocksPerSm]), return it (from_cache = true). Otherwise time dot_shuffle +
// update_xr (alpha = 0) on n-element device vectors with labkit::time_gpu for 1, 2, 3, ... blocks per SM, push
// every median into ms, stop at the first count that is not faster than the previous one and choose that previous
// one. Store the choice (create the folders; write a temporary file and rename it) and never fail because of the
// cache: print a note and go on.
TuneResult tune_blocks_per_sm(int n, const std::string& cache_path) {
  if (n < 1) throw std::invalid_argument("lab07: tune_blocks_per_sm: n must be >= 1");
  (void)cache_path;
  throw labkit::NotImplemented("step 5: tune_blocks_per_sm");
}

// Step 6. Keep alpha, beta, rr and a stop flag in a struct in device memory; kernels read alpha/beta from it and
// one-block kernels write them, so no scalar crosses to the host. Capture opt.graph_iterations iterations on a
// stream (cudaStreamBeginCapture ... EndCapture, cudaGraphInstantiate) and replay the graph, reading the state back
// once per launch. Every kernel starts with `if (state->stop) return;`: after convergence, p^T A p <= 0, overflow
// or max_iter the rest of the batch does nothing. Fusing p^T Ap into the SpMV saves a pass over p and Ap.
CgResult cg_solve_graph(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  check_solver_args(A, b, x, opt, "cg_solve_graph");
  throw labkit::NotImplemented("step 6: cg_solve_graph");
}

}  // namespace lab07
