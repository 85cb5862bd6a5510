// labkit/relabel.h: the window permutation, P A P^T on the host, and the device relabelling lab 07's SpMV speed
// gate draws per call (checked against the host's).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <vector>

#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/gate.h"
#include "labkit/relabel.h"
#include "labkit/sparse.h"

using namespace labkit;
using Catch::Matchers::ContainsSubstring;

namespace {

// A[i][j] as a dense lookup (0 where not stored).
double entry(const Csr& A, std::int32_t i, std::int32_t j) {
  for (std::int32_t k = A.row_ptr[std::size_t(i)]; k < A.row_ptr[std::size_t(i) + 1]; ++k)
    if (A.col_idx[std::size_t(k)] == j) return A.values[std::size_t(k)];
  return 0;
}

}  // namespace

TEST_CASE("window_permutation moves each index within its window of 32, and seeds differ", "[relabel]") {
  for (std::int32_t n : {0, 1, 31, 32, 33, 64, 70, 1000}) {
    INFO("n = " << n);
    const auto p = window_permutation(n, 7);
    REQUIRE(p.size() == std::size_t(n));
    std::set<std::int32_t> seen(p.begin(), p.end());
    REQUIRE(seen.size() == std::size_t(n));  // a permutation: n distinct labels...
    for (std::int32_t i = 0; i < n; ++i) {
      REQUIRE(p[std::size_t(i)] >= 0);  // ...in range, each within its window (the last one shorter)
      REQUIRE(p[std::size_t(i)] < n);
      REQUIRE(p[std::size_t(i)] / kRelabelWindow == i / kRelabelWindow);
    }
  }
  const auto a = window_permutation(1000, 1), b = window_permutation(1000, 2);
  REQUIRE(a != b);
  std::size_t fixed = 0;
  for (std::size_t i = 0; i < a.size(); ++i) fixed += a[i] == std::int32_t(i);
  REQUIRE(fixed < 100);  // about 1000/32 fixed points expected from a random order, not the identity
}

TEST_CASE("relabel gives B[p[i]][p[j]] = A[i][j], a valid CSR with sorted rows", "[relabel]") {
  const Csr A = random_spd(203, 7, 11);
  const auto p = window_permutation(A.rows, 99);
  const Csr B = relabel(A, p);
  REQUIRE(B.first_problem() == "");
  REQUIRE(B.nnz() == A.nnz());
  for (std::int32_t i = 0; i < A.rows; ++i)
    for (std::int32_t j = 0; j < A.cols; ++j)
      REQUIRE(entry(B, p[std::size_t(i)], p[std::size_t(j)]) == entry(A, i, j));
  const Csr P = relabel(poisson2d(37, 29), window_permutation(37 * 29, 5));
  REQUIRE(P.first_problem() == "");
  REQUIRE(is_symmetric(P));
  REQUIRE(P.row_ptr != poisson2d(37, 29).row_ptr);  // the boundary rows' shorter lengths moved
}

TEST_CASE("relabel refuses a non-square matrix and labels that are not a permutation", "[relabel]") {
  Csr rect;
  rect.rows = 2;
  rect.cols = 3;
  rect.row_ptr = {0, 1, 1};
  rect.col_idx = {2};
  rect.values = {1.0};
  REQUIRE_THROWS_WITH(relabel(rect, {0, 1}), ContainsSubstring("square"));
  const Csr A = poisson2d(3, 3);
  REQUIRE_THROWS_WITH(relabel(A, {0, 1, 2}), ContainsSubstring("3 labels for 9"));
  REQUIRE_THROWS_WITH(relabel(A, {0, 1, 2, 3, 4, 5, 6, 7, 7}), ContainsSubstring("not a permutation"));
  REQUIRE_THROWS_WITH(relabel(A, {0, 1, 2, 3, 4, 5, 6, 7, 9}), ContainsSubstring("not a permutation"));
}

TEST_CASE("DeviceRelabel draws the host's P A P^T, with or without values", "[relabel][gpu]") {
  LABKIT_REQUIRE_GPU();
  const std::vector<Csr> matrices = {poisson2d(1, 1), poisson2d(31, 1), poisson2d(33, 1), poisson2d(37, 29),
                                     random_spd(1000, 9, 3), random_spd(4099, 5, 4)};
  for (const Csr& A : matrices) {
    INFO("n = " << A.rows << ", nnz " << A.nnz());
    DeviceRelabel relabelled(A);
    DeviceBuffer<std::int32_t> row_ptr(std::size_t(A.rows) + 1), col_idx(std::size_t(A.nnz()));
    DeviceBuffer<double> values(std::size_t(A.nnz()));
    for (std::uint64_t seed : {1u, 2u}) {
      const Csr expected = relabel(A, window_permutation(A.rows, seed));
      relabelled.draw(seed, row_ptr.data(), col_idx.data(), values.data());
      REQUIRE(row_ptr.download() == expected.row_ptr);
      REQUIRE(col_idx.download() == expected.col_idx);
      REQUIRE(values.download() == expected.values);
      LABKIT_CUDA(cudaMemset(col_idx.data(), 0xFF, col_idx.bytes()));
      relabelled.draw(seed, row_ptr.data(), col_idx.data(), nullptr);  // the pattern alone
      REQUIRE(col_idx.download() == expected.col_idx);
    }
  }
}
