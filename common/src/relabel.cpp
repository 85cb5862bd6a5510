// Host side of labkit/relabel.h: the window permutation and P A P^T, the reference the device relabelling is
// tested against.
#include "labkit/relabel.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace labkit {

std::vector<std::int32_t> window_permutation(std::int32_t n, std::uint64_t seed) {
  if (n < 0) throw std::invalid_argument("window_permutation: n = " + std::to_string(n) + " is negative");
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) p[std::size_t(i)] = window_label(seed, n, i);
  return p;
}

Csr relabel(const Csr& A, const std::vector<std::int32_t>& new_label) {
  A.validate();
  if (A.rows != A.cols)
    throw std::invalid_argument("relabel: the matrix is " + std::to_string(A.rows) + " x " + std::to_string(A.cols) +
                                "; relabelling the unknowns needs a square one");
  const std::size_t n = std::size_t(A.rows);
  if (new_label.size() != n)
    throw std::invalid_argument("relabel: " + std::to_string(new_label.size()) + " labels for " + std::to_string(n) +
                                " unknowns");
  std::vector<std::int32_t> old_label(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t l = new_label[i];
    if (l < 0 || std::size_t(l) >= n || old_label[std::size_t(l)] >= 0)
      throw std::invalid_argument("relabel: the labels are not a permutation (label " + std::to_string(l) +
                                  " of index " + std::to_string(i) + ")");
    old_label[std::size_t(l)] = std::int32_t(i);
  }
  Csr B;
  B.rows = B.cols = A.rows;
  B.row_ptr.assign(n + 1, 0);
  for (std::size_t r = 0; r < n; ++r) {
    const std::int32_t o = old_label[r];
    B.row_ptr[r + 1] = B.row_ptr[r] + (A.row_ptr[std::size_t(o) + 1] - A.row_ptr[std::size_t(o)]);
  }
  B.col_idx.resize(A.col_idx.size());
  B.values.resize(A.values.size());
  std::vector<std::pair<std::int32_t, double>> row;
  for (std::size_t r = 0; r < n; ++r) {
    const std::int32_t o = old_label[r];
    row.clear();
    for (std::int32_t k = A.row_ptr[std::size_t(o)]; k < A.row_ptr[std::size_t(o) + 1]; ++k)
      row.emplace_back(new_label[std::size_t(A.col_idx[std::size_t(k)])], A.values[std::size_t(k)]);
    std::sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::int32_t k = B.row_ptr[r];
    for (const auto& [c, v] : row) {
      B.col_idx[std::size_t(k)] = c;
      B.values[std::size_t(k)] = v;
      ++k;
    }
  }
  return B;
}

}  // namespace labkit
