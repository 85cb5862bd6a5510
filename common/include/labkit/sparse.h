// Sparse matrices in CSR form, the CPU references that judge sparse kernels (SpMV, conjugate gradient), and
// generators of symmetric positive definite test matrices.
//
// One type, double values only. A Csr<T> template would double every reference and generator for no gain: the
// references must accumulate in double or better anyway, and a float kernel gets its input through
// values_as<float>() (row_ptr and col_idx are shared unchanged). int32 indices are what cuSPARSE's CSR_IND_32I
// path and every lab kernel use; they limit a matrix to 2^31-1 rows, columns and stored entries.
//
// Everything here is plain C++ (no CUDA headers), so the Matrix Market fuzzer builds it with clang alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace labkit {

// Every function below that reads a Csr validates it first (O(nnz)) and throws std::invalid_argument for a bad
// one, so a reference never reads out of bounds because a caller built a wrong matrix.
//
// Compressed sparse row. Row i holds the entries k in [row_ptr[i], row_ptr[i+1]): column col_idx[k] (0-based),
// value values[k]. A valid Csr (see validate()) has its column indices strictly increasing within each row: sorted
// and without duplicates, which is what cuSPARSE requires and what lets is_symmetric() binary-search a row.
// Explicit zeros may be stored (a sum of duplicates can cancel); they count in nnz().
struct Csr {
  std::int32_t rows = 0, cols = 0;
  std::vector<std::int32_t> row_ptr{0};  // rows + 1 entries, row_ptr[0] == 0, row_ptr[rows] == nnz
  std::vector<std::int32_t> col_idx;     // nnz entries
  std::vector<double> values;            // nnz entries

  std::int32_t nnz() const noexcept { return static_cast<std::int32_t>(col_idx.size()); }

  // "" when the arrays form a valid CSR, else the first problem found ("row 3: column 7 follows column 9: ...").
  std::string first_problem() const;
  // Throws std::invalid_argument with first_problem() unless the matrix is valid.
  void validate() const;

  // The values converted (float for a single-precision kernel).
  template <class T>
  std::vector<T> values_as() const {
    return std::vector<T>(values.begin(), values.end());
  }
};

// Builds a valid Csr from 0-based coordinates in any order. Duplicate (row, col) pairs are SUMMED (the Matrix
// Market convention for assembled matrices; a sum that cancels is kept as an explicit zero). Throws
// std::invalid_argument for mismatched array lengths, an index out of range, or more than 2^31-1 entries.
Csr from_triplets(std::int32_t rows, std::int32_t cols, const std::vector<std::int32_t>& row,
                  const std::vector<std::int32_t>& col, const std::vector<double>& val);

// Row-major dense <-> CSR, for small tests. from_dense stores the nonzero elements only. to_dense refuses
// (std::invalid_argument) matrices over 2^26 elements: it is a test helper, not a conversion for real inputs.
Csr from_dense(std::int32_t rows, std::int32_t cols, const std::vector<double>& dense);
std::vector<double> to_dense(const Csr& A);

// y = A*x with long double accumulation per row: the reference for SpMV kernels (a float kernel's error is then
// all its own). Throws std::invalid_argument when x.size() != A.cols.
std::vector<double> spmv_ref(const Csr& A, const std::vector<double>& x);

// True when A is square, structurally symmetric (a_ji is stored whenever a_ij is, explicit zeros included) and
// |a_ij - a_ji| <= rel_tol * max(|a_ij|, |a_ji|) for every stored pair. Structure counts because symmetric storage
// (write_matrix_market(..., true), a kernel reading one triangle) reproduces the pattern from one triangle: an
// unpartnered explicit zero would come back mirrored. rel_tol = 0 asks for exact symmetry, which the generators
// and the reader of symmetric files produce.
bool is_symmetric(const Csr& A, double rel_tol = 0);

// The main diagonal (a zero where no diagonal entry is stored); min(rows, cols) elements. For Jacobi
// preconditioning and for the generators' tests.
std::vector<double> diagonal(const Csr& A);

// ---- SPD test matrices -------------------------------------------------------------------------------------
// All three return exactly symmetric, valid CSR matrices with a positive diagonal; sizes whose nnz would not fit
// int32 throw std::invalid_argument.

// 5-point Laplacian on an nx x ny grid with Dirichlet boundaries (the unknowns are the interior points): 4 on
// the diagonal, -1 for each grid neighbour; unknown (i, j) is row i + nx*j. nnz = 5*n - 2*(nx + ny), n = nx*ny.
// SPD; on an N x N grid the condition number is about 0.4 * (N+1)^2, so CG needs O(N) iterations: a realistic
// workload whose iteration count grows with the grid.
Csr poisson2d(std::int32_t nx, std::int32_t ny);
// 7-point Laplacian on nx x ny x nz (6 on the diagonal); row i + nx*(j + ny*k).
// nnz = 7*n - 2*(nx*ny + ny*nz + nx*nz).
Csr poisson3d(std::int32_t nx, std::int32_t ny, std::int32_t nz);

// A random symmetric matrix with about nnz_per_row entries per row: each row picks (nnz_per_row-1)/2 random
// off-diagonal columns and each pick is stored at (i,j) and (j,i) with one value uniform in [-1, 1) (picks that
// collide are summed, so rows average slightly fewer than nnz_per_row entries, never more). The diagonal is
// sum_j |a_ij| + margin (margin > 0): strictly diagonally dominant with a positive diagonal, hence SPD by
// Gershgorin with every eigenvalue >= margin. Deterministic in seed. A small margin makes CG work harder.
Csr random_spd(std::int32_t n, std::int32_t nnz_per_row, std::uint64_t seed, double margin = 1.0);

// Two tight clusters of eigenvalues far apart: n / 2 symmetric 2 x 2 blocks on the diagonal, each a random rotation
// of diag(lo * (1 + s), 1 + t) with s and t uniform in [-spread, spread] (n odd: a last 1 x 1 block holding 1 + t).
// Whatever n, CG needs only a few dozen iterations (each cluster is nearly one eigenvalue), yet along half the
// directions x is about 1 / lo times larger than b, so b - A x is a sum that cancels and its rounding, about
// u / lo relative, is the smallest true residual double precision reaches. The gates' problem for a tolerance
// below that floor: a handful of iterations to solve, where a 2D Poisson matrix with a floor as high needs hundreds.
// Requires n >= 1, 0 < lo <= 1 and 0 <= spread < 1 (std::invalid_argument otherwise). Deterministic in seed.
Csr two_cluster_spd(std::int32_t n, double lo, double spread, std::uint64_t seed);

// ---- Conjugate gradient reference --------------------------------------------------------------------------

enum class CgStatus {
  converged,       // true relative residual ||b - A x|| / ||b|| <= rel_tol
  max_iterations,  // ran max_iter iterations without reaching rel_tol
  not_spd,         // p^T A p <= 0 for a search direction p != 0: A is indefinite or singular (not SPD)
  breakdown,       // a NaN or infinity appeared in the iteration (overflow); x is the last finite iterate
  stagnation,      // the iterate stopped changing, or the true residual stopped improving while the updated
                   // residual claimed convergence (rel_tol below what double precision can reach for this A)
};
const char* to_string(CgStatus status) noexcept;

struct CgResult {
  std::vector<double> x;             // always finite: the last iterate before any breakdown
  int iterations = 0;                // CG iterations performed (one SpMV each; residual checks not counted)
  double relative_residual = 0;      // TRUE residual of x: ||b - A x|| / ||b|| (long double SpMV); 0 when b == 0
  bool converged = false;            // status == CgStatus::converged
  CgStatus status = CgStatus::max_iterations;
  std::string message;               // one line for a failure message: status, iterations, residual, cause
  std::vector<double> history;       // updated-residual estimate ||r_k|| / ||b|| after each iteration
};

// Unpreconditioned CG from x0 = 0 on A x = b. Stops when the updated residual drops to rel_tol * ||b|| AND the true
// residual confirms it, or on one of the statuses above; it never runs more than max_iter iterations. The true
// residual is checked when the updated one claims convergence or when x has not changed at double precision for 10
// iterations; if it disagrees, CG restarts from x with the true residual (residual replacement), and reports
// stagnation once a restart no longer improves it by 10% (or after 10 restarts). A singular A with b outside its
// range is reported as not_spd only when some p^T A p reaches 0, which can take thousands of iterations while x
// grows (finite): give such tests a modest max_iter.
// Throws std::invalid_argument for a non-square A, b.size() != A.rows, rel_tol < 0 or NaN, max_iter < 0, or
// non-finite values in A or b (caller errors, not solver outcomes).
CgResult cg_ref(const Csr& A, const std::vector<double>& b, double rel_tol, int max_iter);

}  // namespace labkit
