// Relabelling the unknowns of a square sparse matrix, B = P A P^T, with a permutation drawn from a seed: a gate
// that hands a step the same matrix on every call lets it analyse the sparsity pattern once (a format converted
// and kept, keyed on pointers or sampled entries) and read less in every later call, out of the timer. Drawn
// afresh per call, the pattern is new each time, while the work stays the same matrix's.
//
// Each index moves only within its aligned window of kRelabelWindow indices (the last window may be shorter): row
// i's neighbours stay within a window of where they were, so x's gathers keep the cache lines, and the SpMV's
// memory traffic, of the original order. The permutation is still unguessable: a window's order is the rank of
// its indices' random keys, (32!)^(n/32) possibilities.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/random.h"
#include "labkit/sparse.h"

namespace labkit {

constexpr int kRelabelWindow = 32;

// The new label of index i (0 <= i < n): its window's first index plus the rank of its random key among the
// window's keys (equal keys, a 2^-64 event, are ranked by index). The same on the host and on the device.
LABKIT_HD inline std::int32_t window_label(std::uint64_t seed, std::int32_t n, std::int32_t i) {
  const std::int32_t first = i - i % kRelabelWindow;
  const std::int32_t last = (n - first < kRelabelWindow) ? n : first + kRelabelWindow;
  const std::uint64_t key = random_bits(seed, std::uint64_t(i));
  std::int32_t rank = 0;
  for (std::int32_t j = first; j < last; ++j) {
    const std::uint64_t other = random_bits(seed, std::uint64_t(j));
    rank += (other < key || (other == key && j < i)) ? 1 : 0;
  }
  return first + rank;
}

// new_label[i] = window_label(seed, n, i) for every i: a permutation of 0..n-1.
std::vector<std::int32_t> window_permutation(std::int32_t n, std::uint64_t seed);

// B = P A P^T: B[p[i]][p[j]] = A[i][j] for the permutation p = new_label (A square and valid, p a permutation of its
// size; else std::invalid_argument). B's rows have their columns sorted, as a valid Csr's are.
Csr relabel(const Csr& A, const std::vector<std::int32_t>& new_label);

// The device side: A's pattern (and values) kept on the device once; draw() writes P A P^T for a seed's window
// permutation into caller buffers (row_ptr: n + 1 entries, col_idx and values: nnz), in a few kernels of its own
// (~1 ms for 10^7 rows), equal to relabel(A, window_permutation(n, seed)). Returns after the kernels have finished.
class DeviceRelabel {
 public:
  explicit DeviceRelabel(const Csr& A);  // A square and valid
  // values may be null: the caller fills B's values itself (the SpMV speed gate draws them per call).
  void draw(std::uint64_t seed, std::int32_t* row_ptr, std::int32_t* col_idx, double* values);

 private:
  std::int32_t n_ = 0;
  DeviceBuffer<std::int32_t> row_ptr_, col_idx_;
  DeviceBuffer<double> values_;
  DeviceBuffer<std::int32_t> new_label_, old_label_, lengths_;
  DeviceBuffer<unsigned char> scan_scratch_;
  std::size_t scan_scratch_bytes_ = 0;
};

}  // namespace labkit
