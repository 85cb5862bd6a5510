#include "labkit/sparse.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "labkit/random.h"
#include "labkit/reference.h"

namespace labkit {

namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

void require_arg(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

}  // namespace

// ---- Csr ---------------------------------------------------------------------------------------------------

std::string Csr::first_problem() const {
  using std::to_string;
  if (rows < 0 || cols < 0) return "negative size " + to_string(rows) + " x " + to_string(cols);
  if (row_ptr.size() != std::size_t(rows) + 1)
    return "row_ptr has " + to_string(row_ptr.size()) + " entries, expected rows + 1 = " + to_string(std::int64_t(rows) + 1);
  if (col_idx.size() != values.size())
    return "col_idx has " + to_string(col_idx.size()) + " entries but values has " + to_string(values.size());
  if (col_idx.size() > std::size_t(kMaxInt32))
    return to_string(col_idx.size()) + " entries: more than int32 row_ptr can index";
  if (row_ptr[0] != 0) return "row_ptr[0] is " + to_string(row_ptr[0]) + ", expected 0";
  if (std::size_t(row_ptr[rows]) != col_idx.size())
    return "row_ptr[rows] is " + to_string(row_ptr[rows]) + " but there are " + to_string(col_idx.size()) + " entries";
  for (std::int32_t i = 0; i < rows; ++i) {
    const std::int32_t b = row_ptr[i], e = row_ptr[i + 1];
    // Checked before the row is read: a decreasing row_ptr would make [b, e) run outside the arrays.
    if (e < b) return "row_ptr decreases at row " + to_string(i) + " (" + to_string(b) + " then " + to_string(e) + ")";
    if (e > row_ptr[rows]) return "row_ptr[" + to_string(i + 1) + "] = " + to_string(e) + " exceeds nnz";
    for (std::int32_t k = b; k < e; ++k) {
      const std::int32_t c = col_idx[k];
      if (c < 0 || c >= cols)
        return "row " + to_string(i) + ": column index " + to_string(c) + " out of range [0, " + to_string(cols) + ")";
      if (k > b && c <= col_idx[k - 1])
        return "row " + to_string(i) + ": column " + to_string(c) + " follows column " + to_string(col_idx[k - 1]) +
               (c == col_idx[k - 1] ? " (duplicate entry)" : " (columns must be sorted within a row)");
    }
  }
  return "";
}

void Csr::validate() const {
  std::string problem = first_problem();
  if (!problem.empty()) throw std::invalid_argument("invalid CSR matrix: " + problem);
}

// A counting sort by row (sequential when the input is already row-ordered, as most files and generators are),
// then a stable sort of each row by column, skipped for rows already in order. Stability keeps the duplicates of
// one position in input order, so their sum is deterministic, and the same for (i,j) and (j,i) when a caller
// feeds mirrored pairs in the same order: symmetric inputs stay exactly symmetric.
Csr from_triplets(std::int32_t rows, std::int32_t cols, const std::vector<std::int32_t>& row,
                  const std::vector<std::int32_t>& col, const std::vector<double>& val) {
  require_arg(rows >= 0 && cols >= 0, "from_triplets: negative size");
  require_arg(row.size() == col.size() && row.size() == val.size(),
              "from_triplets: row, col and val differ in length (" + std::to_string(row.size()) + ", " +
                  std::to_string(col.size()) + ", " + std::to_string(val.size()) + ")");
  require_arg(row.size() <= std::size_t(kMaxInt32), "from_triplets: more than 2^31-1 entries");
  const std::size_t n = row.size();
  for (std::size_t k = 0; k < n; ++k)
    if (row[k] < 0 || row[k] >= rows || col[k] < 0 || col[k] >= cols)
      throw std::invalid_argument("from_triplets: entry " + std::to_string(k) + " at (" + std::to_string(row[k]) +
                                  ", " + std::to_string(col[k]) + ") is outside the " + std::to_string(rows) +
                                  " x " + std::to_string(cols) + " matrix");

  Csr A;
  A.rows = rows;
  A.cols = cols;
  std::vector<std::int64_t> next(std::size_t(rows) + 1, 0);
  for (std::size_t k = 0; k < n; ++k) ++next[std::size_t(row[k]) + 1];
  for (std::int32_t r = 0; r < rows; ++r) next[r + 1] += next[r];
  const std::vector<std::int64_t> row_begin(next);
  A.col_idx.resize(n);
  A.values.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t dst = next[row[k]]++;
    A.col_idx[dst] = col[k];
    A.values[dst] = val[k];
  }

  std::vector<std::pair<std::int32_t, double>> scratch;
  A.row_ptr.assign(std::size_t(rows) + 1, 0);
  std::int64_t w = 0;
  for (std::int32_t r = 0; r < rows; ++r) {
    const std::int64_t b = row_begin[r], e = row_begin[r + 1];
    bool sorted = true;
    for (std::int64_t k = b + 1; k < e && sorted; ++k) sorted = A.col_idx[k - 1] <= A.col_idx[k];
    if (!sorted) {
      scratch.clear();
      for (std::int64_t k = b; k < e; ++k) scratch.emplace_back(A.col_idx[k], A.values[k]);
      std::stable_sort(scratch.begin(), scratch.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (std::int64_t k = b; k < e; ++k) A.col_idx[k] = scratch[k - b].first, A.values[k] = scratch[k - b].second;
    }
    // Sum duplicates (now adjacent) and compact in place; w <= b, so nothing unread is overwritten.
    const std::int64_t first = w;
    for (std::int64_t k = b; k < e; ++k) {
      if (w > first && A.col_idx[w - 1] == A.col_idx[k]) {
        A.values[w - 1] += A.values[k];
      } else {
        A.col_idx[w] = A.col_idx[k];
        A.values[w] = A.values[k];
        ++w;
      }
    }
    A.row_ptr[r + 1] = std::int32_t(w);
  }
  A.col_idx.resize(w);
  A.values.resize(w);
  return A;
}

Csr from_dense(std::int32_t rows, std::int32_t cols, const std::vector<double>& dense) {
  require_arg(rows >= 0 && cols >= 0, "from_dense: negative size");
  require_arg(dense.size() == std::size_t(rows) * std::size_t(cols),
              "from_dense: " + std::to_string(dense.size()) + " elements for a " + std::to_string(rows) + " x " +
                  std::to_string(cols) + " matrix");
  Csr A;
  A.rows = rows;
  A.cols = cols;
  A.row_ptr.assign(std::size_t(rows) + 1, 0);
  for (std::int32_t i = 0; i < rows; ++i) {
    for (std::int32_t j = 0; j < cols; ++j) {
      double v = dense[std::size_t(i) * cols + j];
      if (v != 0) {
        require_arg(A.col_idx.size() < std::size_t(kMaxInt32), "from_dense: more than 2^31-1 nonzeros");
        A.col_idx.push_back(j);
        A.values.push_back(v);
      }
    }
    A.row_ptr[i + 1] = std::int32_t(A.col_idx.size());
  }
  return A;
}

std::vector<double> to_dense(const Csr& A) {
  A.validate();
  const std::size_t elems = std::size_t(A.rows) * std::size_t(A.cols);
  require_arg(elems <= (std::size_t(1) << 26), "to_dense: " + std::to_string(A.rows) + " x " + std::to_string(A.cols) +
                                                    " is too large for a dense test copy (limit 2^26 elements)");
  std::vector<double> dense(elems, 0.0);
  for (std::int32_t i = 0; i < A.rows; ++i)
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) dense[std::size_t(i) * A.cols + A.col_idx[k]] = A.values[k];
  return dense;
}

// ---- references --------------------------------------------------------------------------------------------

std::vector<double> spmv_ref(const Csr& A, const std::vector<double>& x) {
  A.validate();  // a reference must not read out of bounds because a caller built a bad matrix
  require_arg(x.size() == std::size_t(A.cols), "spmv_ref: x has " + std::to_string(x.size()) +
                                                   " elements, the matrix has " + std::to_string(A.cols) + " columns");
  std::vector<double> y(A.rows);
  for (std::int32_t i = 0; i < A.rows; ++i) {
    long double acc = 0;
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) acc += (long double)A.values[k] * x[A.col_idx[k]];
    y[i] = double(acc);
  }
  return y;
}

bool is_symmetric(const Csr& A, double rel_tol) {
  A.validate();  // the mirror lookup binary-searches rows, which needs sorted, in-range columns
  if (A.rows != A.cols) return false;
  for (std::int32_t i = 0; i < A.rows; ++i) {
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      const std::int32_t j = A.col_idx[k];
      if (j == i) continue;
      const auto first = A.col_idx.begin() + A.row_ptr[j], last = A.col_idx.begin() + A.row_ptr[j + 1];
      const auto it = std::lower_bound(first, last, i);
      if (it == last || *it != i) return false;  // the mirror position is not stored
      const double a = A.values[k], b = A.values[it - A.col_idx.begin()];
      // Written so that a NaN on either side fails the test.
      if (!(std::fabs(a - b) <= rel_tol * std::max(std::fabs(a), std::fabs(b)))) return false;
    }
  }
  return true;
}

std::vector<double> diagonal(const Csr& A) {
  A.validate();
  std::vector<double> d(std::min(A.rows, A.cols), 0.0);
  for (std::int32_t i = 0; i < std::int32_t(d.size()); ++i) {
    const auto first = A.col_idx.begin() + A.row_ptr[i], last = A.col_idx.begin() + A.row_ptr[i + 1];
    const auto it = std::lower_bound(first, last, i);
    if (it != last && *it == i) d[i] = A.values[it - A.col_idx.begin()];
  }
  return d;
}

// ---- generators --------------------------------------------------------------------------------------------

namespace {

// Checks a generator's size in 64 bits before anything is allocated.
void check_fits(std::int64_t n, std::int64_t nnz, const char* who) {
  if (n > kMaxInt32 || nnz > kMaxInt32)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(n) + " rows and " + std::to_string(nnz) +
                                " nonzeros do not fit int32 CSR indices");
}

}  // namespace

Csr poisson2d(std::int32_t nx, std::int32_t ny) {
  require_arg(nx >= 1 && ny >= 1, "poisson2d: grid " + std::to_string(nx) + " x " + std::to_string(ny) +
                                      " must be at least 1 x 1");
  const std::int64_t n = std::int64_t(nx) * ny;
  const std::int64_t nnz = 5 * n - 2 * (std::int64_t(nx) + ny);
  check_fits(n, nnz, "poisson2d");
  Csr A;
  A.rows = A.cols = std::int32_t(n);
  A.row_ptr.assign(std::size_t(n) + 1, 0);
  A.col_idx.resize(std::size_t(nnz));
  A.values.resize(std::size_t(nnz));
  // Where each grid line's entries start, so that the lines fill side by side on every core: the speed gates of
  // labs 07 and 08 build a 10^7-row matrix while they hold the GPU to themselves.
  std::vector<std::int64_t> start(std::size_t(ny) + 1, 0);
  for (std::int32_t j = 0; j < ny; ++j)
    start[std::size_t(j) + 1] =
        start[std::size_t(j)] + std::int64_t(nx) * (1 + (j > 0) + (j + 1 < ny)) + 2 * (std::int64_t(nx) - 1);
  parallel_for(
      std::size_t(ny),
      [&](std::size_t j0, std::size_t j1) {
        for (std::int32_t j = std::int32_t(j0); j < std::int32_t(j1); ++j) {
          std::int64_t e = start[std::size_t(j)];
          auto put = [&](std::int64_t c, double v) {
            A.col_idx[std::size_t(e)] = std::int32_t(c);
            A.values[std::size_t(e)] = v;
            ++e;
          };
          for (std::int32_t i = 0; i < nx; ++i) {
            const std::int64_t r = i + std::int64_t(nx) * j;
            // Written in increasing column order, so each row comes out sorted.
            if (j > 0) put(r - nx, -1.0);
            if (i > 0) put(r - 1, -1.0);
            put(r, 4.0);
            if (i + 1 < nx) put(r + 1, -1.0);
            if (j + 1 < ny) put(r + nx, -1.0);
            A.row_ptr[std::size_t(r) + 1] = std::int32_t(e);
          }
        }
      },
      std::size_t(64));
  return A;
}

Csr poisson3d(std::int32_t nx, std::int32_t ny, std::int32_t nz) {
  require_arg(nx >= 1 && ny >= 1 && nz >= 1, "poisson3d: grid " + std::to_string(nx) + " x " + std::to_string(ny) +
                                                  " x " + std::to_string(nz) + " must be at least 1 x 1 x 1");
  const std::int64_t plane = std::int64_t(nx) * ny;
  const std::int64_t n = plane * nz;
  if (n > kMaxInt32) check_fits(n, 0, "poisson3d");  // before 7*n could overflow anything
  const std::int64_t nnz = 7 * n - 2 * (plane + std::int64_t(ny) * nz + std::int64_t(nx) * nz);
  check_fits(n, nnz, "poisson3d");
  Csr A;
  A.rows = A.cols = std::int32_t(n);
  A.row_ptr.assign(std::size_t(n) + 1, 0);
  A.col_idx.reserve(std::size_t(nnz));
  A.values.reserve(std::size_t(nnz));
  auto put = [&](std::int64_t c, double v) {
    A.col_idx.push_back(std::int32_t(c));
    A.values.push_back(v);
  };
  for (std::int32_t k = 0; k < nz; ++k)
    for (std::int32_t j = 0; j < ny; ++j)
      for (std::int32_t i = 0; i < nx; ++i) {
        const std::int64_t r = i + nx * (j + std::int64_t(ny) * k);
        if (k > 0) put(r - plane, -1.0);
        if (j > 0) put(r - nx, -1.0);
        if (i > 0) put(r - 1, -1.0);
        put(r, 6.0);
        if (i + 1 < nx) put(r + 1, -1.0);
        if (j + 1 < ny) put(r + nx, -1.0);
        if (k + 1 < nz) put(r + plane, -1.0);
        A.row_ptr[r + 1] = std::int32_t(A.col_idx.size());
      }
  return A;
}

Csr random_spd(std::int32_t n, std::int32_t nnz_per_row, std::uint64_t seed, double margin) {
  require_arg(n >= 1, "random_spd: n must be at least 1, got " + std::to_string(n));
  require_arg(nnz_per_row >= 1, "random_spd: nnz_per_row must be at least 1, got " + std::to_string(nnz_per_row));
  require_arg(std::isfinite(margin) && margin > 0,
              "random_spd: margin must be positive and finite (it bounds the smallest eigenvalue), got " +
                  fmt_double(margin));
  const std::int64_t picks = n > 1 ? (nnz_per_row - 1) / 2 : 0;  // a 1 x 1 matrix has no off-diagonal position
  check_fits(n, std::int64_t(n) * (2 * picks + 1), "random_spd");
  const std::size_t total = std::size_t(n) * std::size_t(2 * picks + 1);
  std::vector<std::int32_t> row, col;
  std::vector<double> val;
  row.reserve(total);
  col.reserve(total);
  val.reserve(total);
  std::uint64_t counter = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    row.push_back(i);  // the diagonal position, filled in below
    col.push_back(i);
    val.push_back(0.0);
    for (std::int64_t p = 0; p < picks; ++p) {
      std::int32_t j = std::int32_t(uniform_int(seed, counter++, 0, n - 2));
      if (j >= i) ++j;  // uniform over the columns other than i
      const double v = uniform_double(seed, counter++, -1.0, 1.0);
      // (i,j) then (j,i), adjacent: a position's duplicates are summed in input order, so both mirrors add the
      // same values in the same order and the result is exactly symmetric.
      row.push_back(i), col.push_back(j), val.push_back(v);
      row.push_back(j), col.push_back(i), val.push_back(v);
    }
  }
  Csr A = from_triplets(n, n, row, col, val);
  for (std::int32_t i = 0; i < n; ++i) {
    long double off = 0;
    std::int32_t diag = -1;
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      if (A.col_idx[k] == i)
        diag = k;
      else
        off += std::fabs(A.values[k]);
    }
    // Rounding off and the sum costs at most ~1e-16 * off, far below any sensible margin: still strictly dominant.
    A.values[diag] = double(off) + margin;
  }
  return A;
}

Csr two_cluster_spd(std::int32_t n, double lo, double spread, std::uint64_t seed) {
  require_arg(n >= 1, "two_cluster_spd: n must be at least 1, got " + std::to_string(n));
  require_arg(std::isfinite(lo) && lo > 0 && lo <= 1, "two_cluster_spd: lo must be in (0, 1], got " + fmt_double(lo));
  require_arg(std::isfinite(spread) && spread >= 0 && spread < 1,
              "two_cluster_spd: spread must be in [0, 1), got " + fmt_double(spread));
  check_fits(n, 2 * std::int64_t(n), "two_cluster_spd");
  constexpr double kPi = 3.14159265358979323846;
  std::vector<std::int32_t> row, col;
  std::vector<double> val;
  std::uint64_t counter = 0;
  for (std::int32_t i = 0; i + 1 < n; i += 2) {
    const double small = lo * (1 + uniform_double(seed, counter++, -spread, spread));
    const double big = 1 + uniform_double(seed, counter++, -spread, spread);
    const double angle = uniform_double(seed, counter++, 0.0, kPi);
    const double c = std::cos(angle), s = std::sin(angle);
    // R diag(small, big) R^T with R the rotation by `angle`; one off-diagonal value for both mirrors keeps the
    // block exactly symmetric.
    const double off = (small - big) * c * s;
    row.insert(row.end(), {i, i, i + 1, i + 1});
    col.insert(col.end(), {i, i + 1, i, i + 1});
    val.insert(val.end(), {small * c * c + big * s * s, off, off, small * s * s + big * c * c});
  }
  if (n % 2) {
    row.push_back(n - 1);
    col.push_back(n - 1);
    val.push_back(1 + uniform_double(seed, counter++, -spread, spread));
  }
  return from_triplets(n, n, row, col, val);
}

// ---- conjugate gradient ------------------------------------------------------------------------------------

const char* to_string(CgStatus status) noexcept {
  switch (status) {
    case CgStatus::converged: return "converged";
    case CgStatus::max_iterations: return "max_iterations";
    case CgStatus::not_spd: return "not_spd";
    case CgStatus::breakdown: return "breakdown";
    case CgStatus::stagnation: return "stagnation";
  }
  return "unknown";
}

namespace {

// Dot product and 2-norm accumulated in long double. (Private: labkit/ref_saxpy.h owns the public norm2_ref.)
double dot_ld(const std::vector<double>& a, const std::vector<double>& b) {
  long double acc = 0;
  for (std::size_t i = 0; i < a.size(); ++i) acc += (long double)a[i] * b[i];
  return double(acc);
}
double norm2_ld(const std::vector<double>& a) {
  long double acc = 0;
  for (double v : a) acc += (long double)v * v;
  return double(std::sqrt(acc));
}

// y = A*p in double: the iteration's own product (the true-residual check uses long double).
void spmv_double(const Csr& A, const std::vector<double>& p, std::vector<double>& y) {
  for (std::int32_t i = 0; i < A.rows; ++i) {
    double acc = 0;
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) acc += A.values[k] * p[A.col_idx[k]];
    y[i] = acc;
  }
}

// r = b - A*x accumulated in long double; returns ||r||.
double true_residual(const Csr& A, const std::vector<double>& b, const std::vector<double>& x, std::vector<double>& r) {
  long double rr = 0;
  for (std::int32_t i = 0; i < A.rows; ++i) {
    long double acc = b[i];
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) acc -= (long double)A.values[k] * x[A.col_idx[k]];
    r[i] = double(acc);
    rr += acc * acc;
  }
  return double(std::sqrt(rr));
}

}  // namespace

CgResult cg_ref(const Csr& A, const std::vector<double>& b, double rel_tol, int max_iter) {
  A.validate();
  require_arg(A.rows == A.cols, "cg_ref: the matrix is " + std::to_string(A.rows) + " x " + std::to_string(A.cols) +
                                    ", CG needs a square one");
  require_arg(b.size() == std::size_t(A.rows), "cg_ref: b has " + std::to_string(b.size()) +
                                                   " elements, the matrix has " + std::to_string(A.rows) + " rows");
  require_arg(rel_tol >= 0, "cg_ref: rel_tol must be >= 0 (and not NaN)");
  require_arg(max_iter >= 0, "cg_ref: max_iter must be >= 0");
  for (double v : A.values) require_arg(std::isfinite(v), "cg_ref: the matrix holds a non-finite value");
  for (double v : b) require_arg(std::isfinite(v), "cg_ref: b holds a non-finite value");

  const std::size_t n = b.size();
  CgResult res;
  res.x.assign(n, 0.0);
  const double bnorm = norm2_ld(b);
  auto finish = [&](CgStatus status, const std::string& cause) {
    std::vector<double> r(n);
    res.relative_residual = bnorm > 0 ? true_residual(A, b, res.x, r) / bnorm : 0.0;
    res.status = status;
    res.converged = status == CgStatus::converged;
    res.message = std::string("cg: ") + to_string(status) + " after " + std::to_string(res.iterations) +
                  " iterations, ||b - Ax|| / ||b|| = " + fmt_double(res.relative_residual) + " (tolerance " +
                  fmt_double(rel_tol) + ")" + (cause.empty() ? "" : ": " + cause);
    return res;
  };
  if (bnorm == 0) return finish(CgStatus::converged, "b = 0, so x = 0 is exact");
  if (!std::isfinite(bnorm)) return finish(CgStatus::breakdown, "||b|| overflows a double");

  std::vector<double> r(b), p(b), Ap(n);
  double rr = dot_ld(r, r);
  double last_true = std::numeric_limits<double>::infinity();  // true residual at the previous failed check
  int checks = 0;        // times the updated residual claimed convergence and the true one disagreed
  int tiny_steps = 0;    // consecutive iterations whose step did not change x at double precision
  constexpr int kMaxChecks = 10, kMaxTinySteps = 10;

  while (res.iterations < max_iter) {
    spmv_double(A, p, Ap);
    const double pAp = dot_ld(p, Ap);
    if (!std::isfinite(pAp)) return finish(CgStatus::breakdown, "p^T A p is not finite (overflow)");
    if (pAp <= 0)
      return finish(CgStatus::not_spd, "p^T A p = " + fmt_double(pAp) + " <= 0 at iteration " +
                                           std::to_string(res.iterations + 1) +
                                           ": A is not symmetric positive definite (indefinite or singular)");
    const double alpha = rr / pAp;
    if (!std::isfinite(alpha)) return finish(CgStatus::breakdown, "step length alpha is not finite");
    // Check the update before applying it, so that x stays the last finite iterate whatever happens.
    double step_max = 0, x_max = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double xi = res.x[i] + alpha * p[i];
      if (!std::isfinite(xi)) return finish(CgStatus::breakdown, "x would overflow");
      step_max = std::max(step_max, std::fabs(alpha * p[i]));
      x_max = std::max(x_max, std::fabs(xi));
    }
    for (std::size_t i = 0; i < n; ++i) {
      res.x[i] += alpha * p[i];
      r[i] -= alpha * Ap[i];
    }
    ++res.iterations;
    const double rr_new = dot_ld(r, r);
    if (!std::isfinite(rr_new)) return finish(CgStatus::breakdown, "the residual overflowed");
    const double est = std::sqrt(rr_new) / bnorm;
    res.history.push_back(est);

    tiny_steps = step_max <= std::numeric_limits<double>::epsilon() * x_max ? tiny_steps + 1 : 0;
    // Two signs that the updated residual r no longer tracks b - A x (it drifts in floating point, and after it
    // has fallen far below the true residual the steps it drives become too small to change x): it claims
    // convergence, or x has stopped changing. Either way only the true residual decides.
    if (est <= rel_tol || tiny_steps >= kMaxTinySteps) {
      const double truth = true_residual(A, b, res.x, r) / bnorm;  // r = b - A x from here on
      if (truth <= rel_tol) return finish(CgStatus::converged, "");
      if (++checks >= kMaxChecks || truth > 0.9 * last_true)
        return finish(CgStatus::stagnation, "the true residual " + fmt_double(truth) + " no longer improves (" +
                                                (tiny_steps >= kMaxTinySteps ? "x stopped changing"
                                                                             : "the updated residual met the tolerance") +
                                                "; tolerance too tight for double precision on this matrix?)");
      last_true = truth;
      // Residual replacement: restart CG from x with the true residual.
      rr = dot_ld(r, r);
      p = r;
      tiny_steps = 0;
      continue;
    }
    const double beta = rr_new / rr;
    rr = rr_new;
    for (std::size_t i = 0; i < n; ++i) p[i] = r[i] + beta * p[i];
  }
  return finish(CgStatus::max_iterations, "");
}

}  // namespace labkit
