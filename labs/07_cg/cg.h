// Lab 07: the conjugate gradient method for sparse symmetric positive definite systems A x = b, in double
// precision, built from three kinds of kernel: reductions (dot products), vector updates and sparse
// matrix-vector products (CSR).
//
// Every function takes DEVICE pointers and works on the default stream (step 6 may use a stream of its own but
// returns only when its work is done). Sizes: n >= 0 elements; a negative size, a null pointer for a non-empty
// array or a blocks_per_sm outside [1, kMaxBlocksPerSm] throws std::invalid_argument. The building blocks
// (steps 1-3) return without waiting for the GPU; the solvers (steps 4, 6) synchronize, since they read scalars.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "labkit/sparse.h"  // labkit::CgStatus, labkit::Csr (the host-side matrix the gates and tools build)

namespace lab07 {

// A CSR matrix whose three arrays live on the device (layout: labkit::Csr). Column indices are sorted within a
// row; rows may be empty. The matrix need not be square for SpMV; the solvers require rows == cols.
struct DeviceCsr {
  int rows = 0, cols = 0, nnz = 0;
  const int* row_ptr = nullptr;    // rows + 1 entries
  const int* col_idx = nullptr;    // nnz entries
  const double* values = nullptr;  // nnz entries
};

// Reductions run in two passes: a first kernel of G blocks leaves one partial sum per block in `partials`, a
// second kernel of one block adds the G partials. G = blocks_per_sm * (number of SMs), at most kMaxPartials:
// the caller's `partials` array must hold kMaxPartials doubles.
constexpr int kMaxPartials = 4096;
constexpr int kMaxBlocksPerSm = 16;
constexpr int kDefaultBlocksPerSm = 4;

// ---- Argument checks (given: every step file calls them first; the gates pass impossible arguments too) ---------
namespace args {
inline void n(int n, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string("lab07: ") + what + ": n must be >= 0");
}
inline void ptr(const void* p, int n, const char* what) {
  if (n > 0 && !p) throw std::invalid_argument(std::string("lab07: ") + what + ": null pointer for a non-empty array");
}
inline void scalar_out(const void* partials, const void* result, const char* what) {
  if (!partials || !result)
    throw std::invalid_argument(std::string("lab07: ") + what + ": partials and the result must not be null");
}
inline void blocks_per_sm(int bps) {
  if (bps < 1 || bps > kMaxBlocksPerSm)
    throw std::invalid_argument("lab07: blocks_per_sm must be in [1, " + std::to_string(kMaxBlocksPerSm) + "]");
}
}  // namespace args

// ---- Step 1: dot product --------------------------------------------------------------------------------------
// *result = sum_i x[i] * y[i] (result is a DEVICE pointer to one double; n == 0 gives 0). Deterministic: the same
// inputs and blocks_per_sm give the same bits every run (fixed grid, fixed summation order, no atomics).
// (a) partial sums per thread over a grid-stride loop, a tree in shared memory, one partial per block, then the
//     same tree in a second one-block kernel.
void dot_twopass(int n, const double* x, const double* y, double* partials, double* result,
                 int blocks_per_sm = kDefaultBlocksPerSm);
// (b) the same two passes with warp shuffles (__shfl_down_sync) instead of most of the shared-memory tree.
void dot_shuffle(int n, const double* x, const double* y, double* partials, double* result,
                 int blocks_per_sm = kDefaultBlocksPerSm);

// ---- Step 2: vector updates -------------------------------------------------------------------------------------
// y = a*x + y
void axpy(int n, double a, const double* x, double* y);
// y = x + b*y   (the search-direction update p = r + beta*p)
void xpby(int n, const double* x, double b, double* y);
// Fused: x += alpha*p; r -= alpha*Ap; *rr = r^T r of the NEW r (device pointer), in one pass over the vectors
// plus the second reduction pass. Deterministic like step 1.
void update_xr(int n, double alpha, const double* p, const double* Ap, double* x, double* r, double* partials,
               double* rr, int blocks_per_sm = kDefaultBlocksPerSm);

// ---- Step 3: sparse matrix-vector product y = A*x (x has A.cols elements, y has A.rows) --------------------------
void spmv_thread_per_row(const DeviceCsr& A, const double* x, double* y);
void spmv_warp_per_row(const DeviceCsr& A, const double* x, double* y);

// ---- Step 4: the CG loop ------------------------------------------------------------------------------------------
struct CgOptions {
  double rel_tol = 1e-8;   // stop when ||b - A x|| / ||b|| <= rel_tol (the TRUE residual confirms it)
  int max_iter = 1000;     // never more iterations than this (0: return x = 0 at once)
  int blocks_per_sm = kDefaultBlocksPerSm;  // for the reductions (step 5 chooses it)
  int graph_iterations = 16;  // step 6: iterations per CUDA graph launch (one host synchronization each)
  // Called with (iterations so far, updated residual estimate ||r|| / ||b||): after every iteration in step 4,
  // after every graph launch in step 6. Iteration numbers only grow.
  std::function<void(int, double)> progress;
};

namespace args {
inline void csr(const DeviceCsr& A, const char* what) {
  if (A.rows < 0 || A.cols < 0 || A.nnz < 0)
    throw std::invalid_argument(std::string("lab07: ") + what + ": negative matrix size");
  if (!A.row_ptr) throw std::invalid_argument(std::string("lab07: ") + what + ": row_ptr is null");
  ptr(A.col_idx, A.nnz, what);
  ptr(A.values, A.nnz, what);
}
inline void solver(const DeviceCsr& A, const double* b, const double* x, const CgOptions& opt, const char* what) {
  csr(A, what);
  if (A.rows != A.cols)
    throw std::invalid_argument(std::string("lab07: ") + what + ": the matrix is " + std::to_string(A.rows) + " x " +
                                std::to_string(A.cols) + ", CG needs a square one");
  ptr(b, A.rows, what);
  ptr(x, A.rows, what);
  if (!(opt.rel_tol >= 0)) throw std::invalid_argument(std::string("lab07: ") + what + ": rel_tol must be >= 0");
  if (opt.max_iter < 0) throw std::invalid_argument(std::string("lab07: ") + what + ": max_iter must be >= 0");
  blocks_per_sm(opt.blocks_per_sm);
  if (opt.graph_iterations < 1)
    throw std::invalid_argument(std::string("lab07: ") + what + ": graph_iterations must be >= 1");
}
}  // namespace args

struct CgResult {
  labkit::CgStatus status = labkit::CgStatus::max_iterations;  // see labkit/sparse.h for the meaning of each
  int iterations = 0;              // iterations performed (one SpMV each)
  double relative_residual = 0;    // TRUE residual of the returned x: ||b - A x|| / ||b|| (0 when b == 0)
  double updated_residual = 0;     // ||r|| / ||b|| of the recurrence at exit
  std::string message;             // one line: status, iterations, residual, cause
  bool converged() const { return status == labkit::CgStatus::converged; }
};

// Solves A x = b from x0 = 0 (x is overwritten; it is always finite on return, whatever the status). A must be
// square (std::invalid_argument otherwise, and for rel_tol < 0 or NaN, max_iter < 0). Detects p^T A p <= 0
// (not_spd), NaN/overflow (breakdown) and a true residual that stops improving (stagnation); never runs more
// than max_iter iterations. Scalars (alpha, beta, r^T r) travel to the host every iteration.
CgResult cg_solve(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt = {});

// ---- Step 5: blocks per SM, chosen by timing ---------------------------------------------------------------------
struct TuneResult {
  int blocks_per_sm = 0;     // the choice, in [1, kMaxBlocksPerSm]
  std::vector<double> ms;    // ms[k]: measured time with k + 1 blocks per SM, for every count tried, in order
};
// Times one dot_shuffle + one update_xr on n-element vectors for blocks_per_sm = 1, 2, 3, ... and stops at the
// first local minimum: the first count whose time is not lower than the previous one ends the search, and the
// previous count is chosen (kMaxBlocksPerSm if the times keep falling). n < 1 throws std::invalid_argument.
// (Remembering the choice between runs is the cg tool's business: labs/07_cg/tools/tuning_cache.h.)
TuneResult tune_blocks_per_sm(int n);

// ---- Step 6: fewer launches and synchronizations -------------------------------------------------------------------
// Same contract and results as cg_solve, but alpha, beta and r^T r stay on the device and opt.graph_iterations
// iterations are replayed as one CUDA graph between host checks, so small matrices are no longer dominated by
// launch and synchronization latency. Must still stop at exactly max_iter iterations and must not run on after
// convergence or breakdown inside a batch.
CgResult cg_solve_graph(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt = {});

}  // namespace lab07
