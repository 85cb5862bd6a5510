// CSR helpers, SPD generators and the CPU conjugate-gradient reference (what lab 07's gates will lean on).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "labkit/sparse.h"

using namespace labkit;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// Every property lab 07 relies on for a generated SPD matrix: valid CSR, exact symmetry, positive diagonal, and
// strict diagonal dominance (Gershgorin: every eigenvalue lies in [a_ii - R_i, a_ii + R_i], R_i = sum |a_ij|, j != i,
// so a_ii - R_i >= min_gap > 0 for every row proves SPD together with symmetry).
void check_spd_by_gershgorin(const Csr& A, double min_gap) {
  REQUIRE(A.first_problem() == "");
  REQUIRE(A.rows == A.cols);
  REQUIRE(is_symmetric(A));
  for (std::int32_t i = 0; i < A.rows; ++i) {
    double diag = 0, radius = 0;
    int diag_count = 0;
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      if (A.col_idx[k] == i)
        diag = A.values[k], ++diag_count;
      else
        radius += std::fabs(A.values[k]);
    }
    INFO("row " << i);
    REQUIRE(diag_count == 1);
    REQUIRE(diag > 0);
    REQUIRE(diag - radius >= min_gap);
  }
}

// Weakly dominant (the Laplacians: a_ii - R_i >= 0 everywhere, > 0 on boundary rows; SPD by irreducibility).
void check_weakly_dominant(const Csr& A) {
  bool some_strict = false;
  for (std::int32_t i = 0; i < A.rows; ++i) {
    double diag = 0, radius = 0;
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k)
      (A.col_idx[k] == i ? diag : radius) += std::fabs(A.values[k]);
    REQUIRE(diag >= radius);
    some_strict = some_strict || diag > radius;
  }
  REQUIRE(some_strict);
}

std::vector<double> ones(std::size_t n) { return std::vector<double>(n, 1.0); }

std::vector<double> dense_matvec(const std::vector<double>& D, std::int32_t rows, std::int32_t cols,
                                 const std::vector<double>& x) {
  std::vector<double> y(rows, 0.0);
  for (std::int32_t i = 0; i < rows; ++i)
    for (std::int32_t j = 0; j < cols; ++j) y[i] += D[std::size_t(i) * cols + j] * x[j];
  return y;
}

}  // namespace

// ---- Csr ---------------------------------------------------------------------------------------------------

TEST_CASE("sparse.csr.validate", "[cpu][sparse]") {
  Csr A = from_dense(3, 4, {1, 0, 2, 0,  //
                            0, 0, 0, 0,  //
                            3, 4, 0, 5});
  REQUIRE(A.nnz() == 5);
  REQUIRE(A.row_ptr == std::vector<std::int32_t>{0, 2, 2, 5});
  REQUIRE(A.col_idx == std::vector<std::int32_t>{0, 2, 0, 1, 3});
  REQUIRE_NOTHROW(A.validate());
  REQUIRE(Csr{}.first_problem() == "");  // the empty 0 x 0 matrix is valid

  SECTION("unsorted columns") {
    std::swap(A.col_idx[2], A.col_idx[3]);
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("row 2: column 0 follows column 1"));
    REQUIRE_THROWS_AS(A.validate(), std::invalid_argument);
  }
  SECTION("duplicate column") {
    A.col_idx[3] = 0;
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("duplicate"));
  }
  SECTION("column out of range") {
    A.col_idx[4] = 4;
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("column index 4 out of range [0, 4)"));
  }
  SECTION("row_ptr decreasing") {
    A.row_ptr = {0, 2, 1, 5};
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("row_ptr decreases at row 1"));
  }
  SECTION("row_ptr of the wrong length") {
    A.row_ptr.pop_back();
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("row_ptr has 3 entries, expected rows + 1 = 4"));
  }
  SECTION("row_ptr does not end at nnz") {
    A.row_ptr.back() = 4;
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("row_ptr[rows] is 4"));
  }
  SECTION("row_ptr not starting at 0") {
    A.row_ptr[0] = 1;
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("row_ptr[0] is 1"));
  }
  SECTION("values of the wrong length") {
    A.values.pop_back();
    REQUIRE_THAT(A.first_problem(), ContainsSubstring("values has 4"));
  }
}

TEST_CASE("sparse.csr.from_triplets_sorts_and_sums_duplicates", "[cpu][sparse]") {
  // Out of order, with (1,2) three times and (0,0) twice.
  Csr A = from_triplets(2, 3, {1, 0, 1, 0, 1, 1}, {2, 1, 0, 0, 2, 2}, {1.0, 2.0, 3.0, 4.0, 10.0, 100.0});
  REQUIRE_NOTHROW(A.validate());
  REQUIRE(A.row_ptr == std::vector<std::int32_t>{0, 2, 4});
  REQUIRE(A.col_idx == std::vector<std::int32_t>{0, 1, 0, 2});
  REQUIRE(A.values == std::vector<double>{4.0, 2.0, 3.0, 111.0});

  // A cancelling sum is kept as an explicit zero (structure does not depend on values).
  Csr Z = from_triplets(1, 1, {0, 0}, {0, 0}, {1.5, -1.5});
  REQUIRE(Z.nnz() == 1);
  REQUIRE(Z.values[0] == 0.0);

  REQUIRE_THROWS_AS(from_triplets(2, 2, {0, 2}, {0, 0}, {1, 1}), std::invalid_argument);
  REQUIRE_THROWS_AS(from_triplets(2, 2, {0}, {0, 1}, {1, 1}), std::invalid_argument);
  REQUIRE_THROWS_AS(from_triplets(2, 2, {0}, {-1}, {1}), std::invalid_argument);
}

TEST_CASE("sparse.csr.to_dense_and_spmv_ref", "[cpu][sparse]") {
  const std::vector<double> D = {2, 0, -1, 0, 0, 3, 0, 0, 0.5, 0, 0, 7, 1, 1, 1, 1, -4, 0, 0, 0};  // 5 x 4
  const Csr A = from_dense(5, 4, D);
  REQUIRE(to_dense(A) == D);
  const std::vector<double> x = {0.25, -1.5, 3.0, 2.0};
  const auto y = spmv_ref(A, x);
  const auto expect = dense_matvec(D, 5, 4, x);
  REQUIRE(y.size() == 5);
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == expect[i]);  // small exact binary fractions
  REQUIRE_THROWS_AS(spmv_ref(A, {1.0, 2.0}), std::invalid_argument);

  // long double accumulation: 1e16 + 1 - 1e16 is 0 in double, 1 with the extended accumulator.
  const Csr B = from_dense(1, 3, {1e16, 1.0, -1e16});
  REQUIRE(spmv_ref(B, {1.0, 1.0, 1.0})[0] == 1.0);
}

TEST_CASE("sparse.csr.is_symmetric_and_diagonal", "[cpu][sparse]") {
  const Csr S = from_dense(3, 3, {4, 1, 0, 1, 5, 2, 0, 2, 6});
  REQUIRE(is_symmetric(S));
  REQUIRE(diagonal(S) == std::vector<double>{4, 5, 6});
  const Csr N = from_dense(3, 3, {4, 1, 0, 1, 5, 2, 0, 2.000001, 6});
  REQUIRE_FALSE(is_symmetric(N));
  REQUIRE(is_symmetric(N, 1e-5));
  REQUIRE_FALSE(is_symmetric(from_dense(2, 3, {1, 0, 0, 0, 1, 0})));  // not square
  // Structurally unsymmetric: (0,1) stored, (1,0) absent.
  REQUIRE_FALSE(is_symmetric(from_dense(2, 2, {1, 3, 0, 1})));
  // Structure counts: an explicit zero without its mirror is not symmetric (fuzzer finding crash-5288eb99:
  // symmetric storage would bring it back mirrored), with its mirror it is.
  REQUIRE_FALSE(is_symmetric(from_triplets(2, 2, {0, 1, 0}, {0, 1, 1}, {1, 1, 0})));
  REQUIRE(is_symmetric(from_triplets(2, 2, {0, 1, 0, 1}, {0, 1, 1, 0}, {1, 1, 0, 0})));
  REQUIRE(diagonal(from_dense(2, 2, {0, 1, 1, 0})) == std::vector<double>{0, 0});
}

// ---- generators --------------------------------------------------------------------------------------------

TEST_CASE("sparse.poisson2d", "[cpu][sparse]") {
  for (auto [nx, ny] : {std::pair{1, 1}, {1, 7}, {6, 1}, {5, 4}, {33, 17}, {64, 64}}) {
    INFO(nx << " x " << ny);
    const Csr A = poisson2d(nx, ny);
    const std::int64_t n = std::int64_t(nx) * ny;
    REQUIRE(A.rows == n);
    REQUIRE(A.cols == n);
    REQUIRE(A.nnz() == 5 * n - 2 * (nx + ny));
    check_weakly_dominant(A);
    REQUIRE(is_symmetric(A));
    REQUIRE(A.first_problem() == "");
    for (double d : diagonal(A)) REQUIRE(d == 4.0);
  }
  // The stencil itself on a 3 x 3 grid: the centre unknown (row 4) couples to 1, 3, 5, 7.
  const Csr A = poisson2d(3, 3);
  REQUIRE(std::vector<std::int32_t>(A.col_idx.begin() + A.row_ptr[4], A.col_idx.begin() + A.row_ptr[5]) ==
          std::vector<std::int32_t>{1, 3, 4, 5, 7});
  // Grid lines fill side by side (parallel_for over lines of 64 and more): the same matrix as the stencil's
  // triplets, entry for entry, on a grid that splits over every core.
  {
    const int nx = 301, ny = 257;
    std::vector<std::int32_t> ri, ci;
    std::vector<double> v;
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) {
        const int r = i + nx * j;
        auto put = [&](int c, double x) {
          ri.push_back(r);
          ci.push_back(c);
          v.push_back(x);
        };
        put(r, 4.0);
        if (i > 0) put(r - 1, -1.0);
        if (i + 1 < nx) put(r + 1, -1.0);
        if (j > 0) put(r - nx, -1.0);
        if (j + 1 < ny) put(r + nx, -1.0);
      }
    const Csr expect = from_triplets(nx * ny, nx * ny, ri, ci, v);
    const Csr got = poisson2d(nx, ny);
    REQUIRE(got.row_ptr == expect.row_ptr);
    REQUIRE(got.col_idx == expect.col_idx);
    REQUIRE(got.values == expect.values);
  }
  REQUIRE_THROWS_AS(poisson2d(0, 5), std::invalid_argument);
  REQUIRE_THROWS_AS(poisson2d(100000, 100000), std::invalid_argument);  // 5e10 nonzeros: refused, not allocated
}

TEST_CASE("sparse.poisson3d", "[cpu][sparse]") {
  for (auto [nx, ny, nz] : {std::tuple{1, 1, 1}, {4, 1, 1}, {3, 4, 5}, {16, 16, 16}, {7, 9, 2}}) {
    INFO(nx << " x " << ny << " x " << nz);
    const Csr A = poisson3d(nx, ny, nz);
    const std::int64_t n = std::int64_t(nx) * ny * nz;
    REQUIRE(A.rows == n);
    REQUIRE(A.nnz() == 7 * n - 2 * (std::int64_t(nx) * ny + std::int64_t(ny) * nz + std::int64_t(nx) * nz));
    check_weakly_dominant(A);
    REQUIRE(is_symmetric(A));
    REQUIRE(A.first_problem() == "");
    for (double d : diagonal(A)) REQUIRE(d == 6.0);
    // Every row sums to 6 minus its number of neighbours: 0 in the interior.
    const auto rowsum = spmv_ref(A, ones(A.cols));
    if (nx > 2 && ny > 2 && nz > 2) REQUIRE(rowsum[1 + nx * (1 + ny * 1)] == 0.0);
  }
  REQUIRE_THROWS_AS(poisson3d(2000, 2000, 2000), std::invalid_argument);
}

TEST_CASE("sparse.random_spd", "[cpu][sparse]") {
  for (auto [n, per_row] : {std::pair{1, 5}, {2, 3}, {10, 1}, {50, 7}, {1000, 9}, {3000, 27}}) {
    INFO("n " << n << " nnz_per_row " << per_row);
    const Csr A = random_spd(n, per_row, 1234);
    REQUIRE(A.rows == n);
    check_spd_by_gershgorin(A, 0.5);  // margin 1, minus rounding
    REQUIRE(A.nnz() <= std::int64_t(n) * per_row);
    if (n >= 1000) REQUIRE(A.nnz() >= std::int64_t(n) * (per_row - 1));  // few collisions in a large matrix
  }
  // Deterministic in the seed, different across seeds.
  const Csr a = random_spd(200, 5, 7), b = random_spd(200, 5, 7), c = random_spd(200, 5, 8);
  REQUIRE(a.col_idx == b.col_idx);
  REQUIRE(a.values == b.values);
  REQUIRE(a.values != c.values);
  // The margin is the Gershgorin gap.
  check_spd_by_gershgorin(random_spd(300, 9, 3, 0.01), 0.009);
  REQUIRE_THROWS_AS(random_spd(0, 3, 1), std::invalid_argument);
  REQUIRE_THROWS_AS(random_spd(10, 3, 1, 0.0), std::invalid_argument);
  REQUIRE_THROWS_AS(random_spd(10, 3, 1, -1.0), std::invalid_argument);
}

TEST_CASE("sparse.two_cluster_spd", "[cpu][sparse]") {
  const double lo = 3e-3, spread = 0.05;
  for (std::int32_t n : {1, 2, 7, 1000}) {
    INFO("n " << n);
    const Csr A = two_cluster_spd(n, lo, spread, 11);
    REQUIRE(A.first_problem() == "");
    REQUIRE(is_symmetric(A));
    REQUIRE(A.nnz() == 4 * (n / 2) + n % 2);
    // Each 2 x 2 block's eigenvalues from its trace and determinant: one in each cluster.
    for (std::int32_t i = 0; i + 1 < n; i += 2) {
      const double a = A.values[std::size_t(A.row_ptr[i])], b = A.values[std::size_t(A.row_ptr[i]) + 1];
      const double d = A.values[std::size_t(A.row_ptr[i + 1]) + 1];
      const double half = (a + d) / 2, root = std::sqrt(half * half - (a * d - b * b));
      REQUIRE(half - root >= lo * (1 - spread) * (1 - 1e-9));
      REQUIRE(half - root <= lo * (1 + spread) * (1 + 1e-9));
      REQUIRE(half + root >= (1 - spread) * (1 - 1e-12));
      REQUIRE(half + root <= (1 + spread) * (1 + 1e-12));
    }
  }
  // Deterministic in the seed, different across seeds.
  REQUIRE(two_cluster_spd(100, lo, spread, 5).values == two_cluster_spd(100, lo, spread, 5).values);
  REQUIRE(two_cluster_spd(100, lo, spread, 5).values != two_cluster_spd(100, lo, spread, 6).values);
  // What the gates rely on: a few dozen CG iterations at any size, and a floor of the true residual above 1e-16
  // (cg_ref cannot confirm 1e-16 and ends in stagnation soon after).
  const Csr A = two_cluster_spd(10000, lo, spread, 3);
  std::vector<double> b(std::size_t(A.rows));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::sin(double(i) * 0.7) + 0.5;
  const CgResult easy = cg_ref(A, b, 1e-10, 1000);
  CHECK(easy.converged);
  CHECK(easy.iterations <= 40);
  const CgResult floor = cg_ref(A, b, 1e-16, 1000);
  CHECK(floor.status == CgStatus::stagnation);
  CHECK(floor.iterations <= 80);
  CHECK(floor.relative_residual > 1e-15);
  REQUIRE_THROWS_AS(two_cluster_spd(0, lo, spread, 1), std::invalid_argument);
  REQUIRE_THROWS_AS(two_cluster_spd(10, 0.0, spread, 1), std::invalid_argument);
  REQUIRE_THROWS_AS(two_cluster_spd(10, 2.0, spread, 1), std::invalid_argument);
  REQUIRE_THROWS_AS(two_cluster_spd(10, lo, 1.0, 1), std::invalid_argument);
}

// ---- conjugate gradient ------------------------------------------------------------------------------------

namespace {

// The answer must be finite whatever the status, and the reported residual must be the true one.
void check_result_sane(const Csr& A, const std::vector<double>& b, const CgResult& r) {
  REQUIRE(r.x.size() == b.size());
  for (double v : r.x) REQUIRE(std::isfinite(v));
  REQUIRE_FALSE(std::isnan(r.relative_residual));
  REQUIRE(r.converged == (r.status == CgStatus::converged));
  REQUIRE_FALSE(r.message.empty());
  const auto Ax = spmv_ref(A, r.x);
  std::vector<double> res(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) res[i] = b[i] - Ax[i];
  const auto norm = [](const std::vector<double>& v) {
    long double acc = 0;
    for (double e : v) acc += (long double)e * e;
    return double(std::sqrt(acc));
  };
  const double truth = norm(res) / norm(b);
  REQUIRE_THAT(r.relative_residual, WithinRel(truth, 1e-6) || WithinAbs(truth, 1e-300));
}

}  // namespace

TEST_CASE("sparse.cg.converges_on_spd", "[cpu][sparse]") {
  struct Case {
    const char* name;
    Csr A;
    int max_iter;
  };
  const Case cases[] = {
      {"poisson2d 48x48", poisson2d(48, 48), 1000},
      {"poisson2d 100x7", poisson2d(100, 7), 1000},
      {"poisson3d 16x16x16", poisson3d(16, 16, 16), 1000},
      {"random_spd 5000/9", random_spd(5000, 9, 42), 200},
      {"random_spd 2000/15 margin 0.05", random_spd(2000, 15, 5, 0.05), 1000},
      {"1x1", poisson2d(1, 1), 5},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    // b from a known x so that the error can be checked too.
    std::vector<double> x_true(c.A.rows);
    for (std::size_t i = 0; i < x_true.size(); ++i) x_true[i] = std::sin(0.37 * double(i) + 1.0);
    const auto b = spmv_ref(c.A, x_true);
    const CgResult r = cg_ref(c.A, b, 1e-10, c.max_iter);
    INFO(r.message);
    REQUIRE(r.status == CgStatus::converged);
    REQUIRE(r.relative_residual <= 1e-10);
    REQUIRE(r.iterations > 0);
    REQUIRE(r.iterations <= c.max_iter);
    REQUIRE(r.history.size() == std::size_t(r.iterations));
    check_result_sane(c.A, b, r);
    double err = 0;
    for (std::size_t i = 0; i < x_true.size(); ++i) err = std::max(err, std::fabs(r.x[i] - x_true[i]));
    REQUIRE(err < 1e-6);  // cond(poisson2d 48) ~ 1e3, so a 1e-10 residual bounds the error well below this
  }
}

TEST_CASE("sparse.cg.iteration_count_grows_with_the_grid", "[cpu][sparse]") {
  // cond ~ N^2 for an N x N Laplacian, CG iterations ~ sqrt(cond) ~ N: doubling N roughly doubles them.
  const auto iters = [](int N) {
    const Csr A = poisson2d(N, N);
    return cg_ref(A, ones(A.rows), 1e-8, 10000).iterations;
  };
  const int i32 = iters(32), i64 = iters(64);
  REQUIRE(i64 > int(1.5 * i32));
  REQUIRE(i64 < int(3.0 * i32));
}

TEST_CASE("sparse.cg.zero_rhs_and_zero_iterations", "[cpu][sparse]") {
  const Csr A = poisson2d(4, 4);
  const CgResult z = cg_ref(A, std::vector<double>(16, 0.0), 1e-8, 100);
  REQUIRE(z.status == CgStatus::converged);
  REQUIRE(z.iterations == 0);
  REQUIRE(z.relative_residual == 0.0);
  REQUIRE(z.x == std::vector<double>(16, 0.0));

  const CgResult none = cg_ref(A, ones(16), 1e-8, 0);
  REQUIRE(none.status == CgStatus::max_iterations);
  REQUIRE(none.relative_residual == 1.0);  // x = 0

  const CgResult few = cg_ref(poisson2d(40, 40), ones(1600), 1e-12, 3);
  REQUIRE(few.status == CgStatus::max_iterations);
  REQUIRE(few.iterations == 3);
  REQUIRE(std::isfinite(few.relative_residual));  // CG's residual is not monotone (its A-norm error is)
  REQUIRE_THAT(few.message, ContainsSubstring("max_iterations after 3 iterations"));
}

TEST_CASE("sparse.cg.detects_indefinite", "[cpu][sparse]") {
  // Symmetric, eigenvalues 3 and -1: p^T A p < 0 shows up within two iterations for this b.
  const Csr A = from_dense(2, 2, {1, 2, 2, 1});
  const std::vector<double> b = {1, -1};  // an eigenvector of eigenvalue -1: p^T A p = -2 at once
  const CgResult r = cg_ref(A, b, 1e-10, 100);
  INFO(r.message);
  REQUIRE(r.status == CgStatus::not_spd);
  REQUIRE_FALSE(r.converged);
  REQUIRE_THAT(r.message, ContainsSubstring("not symmetric positive definite"));
  check_result_sane(A, b, r);

  // A larger indefinite matrix: the 2D Laplacian shifted by 4.5 has eigenvalues on both sides of 0.
  Csr S = poisson2d(20, 20);
  for (std::int32_t i = 0; i < S.rows; ++i)
    for (std::int32_t k = S.row_ptr[i]; k < S.row_ptr[i + 1]; ++k)
      if (S.col_idx[k] == i) S.values[k] -= 4.5;
  const auto bs = ones(S.rows);
  const CgResult rs = cg_ref(S, bs, 1e-10, 2000);
  INFO(rs.message);
  REQUIRE(rs.status == CgStatus::not_spd);
  check_result_sane(S, bs, rs);

  // Negative definite: the first p^T A p is already negative.
  const Csr N = from_dense(2, 2, {-2, 0, 0, -3});
  REQUIRE(cg_ref(N, {1, 1}, 1e-10, 10).status == CgStatus::not_spd);
}

TEST_CASE("sparse.cg.detects_singular", "[cpu][sparse]") {
  // diag(1, 0) with b outside its range: the second direction has p^T A p = 0.
  const Csr A = from_dense(2, 2, {1, 0, 0, 0});
  const std::vector<double> b = {1, 1};
  const CgResult r = cg_ref(A, b, 1e-10, 100);
  INFO(r.message);
  REQUIRE(r.status == CgStatus::not_spd);
  check_result_sane(A, b, r);

  // The pure-Neumann Laplacian of a path (singular, null space = constants) with an inconsistent b: no x solves
  // it, so CG must stop with a failure status, in bounded iterations, with a finite x.
  const int n = 50;
  std::vector<double> D(std::size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    if (i > 0) D[std::size_t(i) * n + i - 1] = -1, D[std::size_t(i) * n + i] += 1;
    if (i + 1 < n) D[std::size_t(i) * n + i + 1] = -1, D[std::size_t(i) * n + i] += 1;
  }
  const Csr L = from_dense(n, n, D);
  REQUIRE(is_symmetric(L));
  const auto bl = ones(n);  // sum(b) != 0: not in the range of L
  const CgResult rl = cg_ref(L, bl, 1e-10, 10000);
  INFO(rl.message);
  REQUIRE_FALSE(rl.converged);
  REQUIRE(rl.iterations <= 10000);
  check_result_sane(L, bl, rl);
}

TEST_CASE("sparse.cg.breakdown_on_overflow", "[cpu][sparse]") {
  // A p overflows to infinity on the first iteration: breakdown, x stays the (finite) start.
  const Csr A = from_dense(2, 2, {1e300, 0, 0, 1e300});
  const std::vector<double> b = {1e10, 1e10};
  const CgResult r = cg_ref(A, b, 1e-10, 100);
  INFO(r.message);
  REQUIRE(r.status == CgStatus::breakdown);
  for (double v : r.x) REQUIRE(std::isfinite(v));
}

TEST_CASE("sparse.cg.stagnation_when_tolerance_is_unreachable", "[cpu][sparse]") {
  // 1e-30 is far below double precision for a matrix with condition ~ 1e3: CG must notice, not spin to max_iter.
  const Csr A = poisson2d(30, 30);
  const auto b = ones(A.rows);
  const CgResult r = cg_ref(A, b, 1e-30, 100000);
  INFO(r.message);
  REQUIRE(r.status == CgStatus::stagnation);
  REQUIRE(r.iterations < 2000);
  REQUIRE(r.relative_residual < 1e-12);  // it did get as far as double allows
  check_result_sane(A, b, r);
}

TEST_CASE("sparse.cg.rejects_bad_arguments", "[cpu][sparse]") {
  const Csr A = poisson2d(3, 3);
  REQUIRE_THROWS_AS(cg_ref(A, ones(8), 1e-8, 10), std::invalid_argument);
  REQUIRE_THROWS_AS(cg_ref(A, ones(9), -1.0, 10), std::invalid_argument);
  REQUIRE_THROWS_AS(cg_ref(A, ones(9), std::nan(""), 10), std::invalid_argument);
  REQUIRE_THROWS_AS(cg_ref(A, ones(9), 1e-8, -1), std::invalid_argument);
  std::vector<double> bn = ones(9);
  bn[3] = std::nan("");
  REQUIRE_THROWS_AS(cg_ref(A, bn, 1e-8, 10), std::invalid_argument);
  Csr An = A;
  An.values[0] = INFINITY;
  REQUIRE_THROWS_AS(cg_ref(An, ones(9), 1e-8, 10), std::invalid_argument);
  REQUIRE_THROWS_AS(cg_ref(from_dense(2, 3, {1, 0, 0, 0, 1, 0}), ones(2), 1e-8, 10), std::invalid_argument);
  REQUIRE(std::string(to_string(CgStatus::not_spd)) == "not_spd");
}
