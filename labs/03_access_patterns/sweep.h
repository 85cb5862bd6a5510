// Lab 03: the size sweep of the row-major and diagonal transposes, and automatic dip flagging. Shared by the
// gates and the bench (header-only).
#pragma once
#include <algorithm>
#include <cstddef>
#include <ostream>
#include <vector>

#include "access_patterns.h"
#include "labkit/buffer.h"
#include "labkit/random.h"
#include "labkit/timing.h"

namespace lab03 {

// Every 128 from 1024 to 8192 (every multiple of 512 and of 1024 among them), plus odd sizes right beside the
// multiples of 1024 (n - 1 and n + 1), where camping, if any, would be absent. Sorted ascending.
inline std::vector<int> sweep_sizes(int max_n = 8192) {
  std::vector<int> n;
  for (int s = 1024; s <= max_n; s += 128) n.push_back(s);
  for (int s = 1024; s <= max_n; s += 1024) {
    n.push_back(s - 1);
    if (s + 1 <= max_n) n.push_back(s + 1);
  }
  std::sort(n.begin(), n.end());
  n.erase(std::unique(n.begin(), n.end()), n.end());
  return n;
}

// The window of neighbours a point is compared with: up to this many on each side (fewer at the ends).
constexpr int kDipNeighbours = 2;
// A dip: GB/s more than this fraction below the median of the neighbours.
constexpr double kDipFraction = 0.10;

// The median of the neighbours of point i (up to kDipNeighbours on each side, the point itself excluded);
// 0 when the series has a single point.
inline double neighbour_median(const std::vector<double>& gbs, std::size_t i) {
  std::vector<double> nb;
  const std::size_t lo = i >= std::size_t(kDipNeighbours) ? i - kDipNeighbours : 0;
  const std::size_t hi = std::min(gbs.size(), i + kDipNeighbours + 1);
  for (std::size_t j = lo; j < hi; ++j)
    if (j != i) nb.push_back(gbs[j]);
  if (nb.empty()) return 0;
  std::sort(nb.begin(), nb.end());
  const std::size_t m = nb.size() / 2;
  return nb.size() % 2 ? nb[m] : 0.5 * (nb[m - 1] + nb[m]);
}

// dips[i] is true when gbs[i] < (1 - kDipFraction) * median of its neighbours. gbs is ordered by size.
inline std::vector<bool> flag_dips(const std::vector<double>& gbs) {
  std::vector<bool> dip(gbs.size(), false);
  for (std::size_t i = 0; i < gbs.size(); ++i) {
    const double med = neighbour_median(gbs, i);
    dip[i] = med > 0 && gbs[i] < (1.0 - kDipFraction) * med;
  }
  return dip;
}

// Times the row-major (baseline) and diagonal (candidate) transposes of an n x n matrix, interleaved in one
// compare_speed. Used by the bench; the gates time against their own copy of the row-major kernel instead. Small matrices rotate through several input/output sets so that no repeat is served from L2
// (which would hide any DRAM-partition effect, the very thing the sweep looks for).
inline labkit::SpeedComparison time_orderings(int n, const labkit::TimingOptions& opt) {
  const std::size_t count = std::size_t(n) * n;
  const int sets = labkit::rotation_sets(2 * count * sizeof(float));
  std::vector<labkit::DeviceBuffer<float>> in, out;
  for (int s = 0; s < sets; ++s) {
    in.emplace_back(count);
    out.emplace_back(count);
    labkit::fill_random_device(in.back().data(), count, 77 + s);
  }
  auto launch = [&](bool diagonal) {
    return [&, diagonal](int rep) {
      const float* src = in[rep % sets].data();
      float* dst = out[rep % sets].data();
      if (diagonal) transpose_diagonal(n, n, src, dst);
      else transpose_rowmajor(n, n, src, dst);
    };
  };
  return labkit::compare_speed(launch(false), launch(true), opt);
}

// Effective bandwidth of an n x n float transpose (bytes read + written) in GB/s.
inline double transpose_gbs(int n, double ms) { return 2.0 * double(n) * n * sizeof(float) / (ms * 1e-3) / 1e9; }

constexpr const char* kSweepCsvHeader = "lab,case,rows,cols,param,variant,run,median_ms,gbs,ratio,dip";

// Writes the sweep rows of one run: for each size, one row per ordering. ratio: the diagonal's speed relative to
// the row-major ordering (1 for the row-major row); dip: 1 when flag_dips flagged that ordering at that size.
inline void write_sweep_rows(std::ostream& csv, const std::vector<int>& sizes, const std::vector<double>& rowmajor_ms,
                             const std::vector<double>& diagonal_ms, const std::vector<bool>& rowmajor_dip,
                             const std::vector<bool>& diagonal_dip, int run) {
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const int n = sizes[i];
    csv << "03,sweep," << n << "," << n << "," << n << ",rowmajor," << run << "," << rowmajor_ms[i] << ","
        << transpose_gbs(n, rowmajor_ms[i]) << ",1," << int(rowmajor_dip[i]) << "\n";
    csv << "03,sweep," << n << "," << n << "," << n << ",diagonal," << run << "," << diagonal_ms[i] << ","
        << transpose_gbs(n, diagonal_ms[i]) << "," << rowmajor_ms[i] / diagonal_ms[i] << "," << int(diagonal_dip[i])
        << "\n";
  }
}

}  // namespace lab03
