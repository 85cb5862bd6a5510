// Lab 08 CPU gates: the partition's boundaries (step 1) and the halo plan (step 3), compared exactly with
// brute-force versions written here (the header defines both to the element). What the gate files share is in
// gate_util.h; the GPU gates are in gates.cpp and gates_speed.cpp.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gate_util.h"
#include "labkit/gate.h"
#include "labkit/random.h"
#include "labkit/sparse.h"
#include "multi_cg.h"

using namespace lab08_gates;

namespace {

std::string str(const std::vector<int>& v) {
  std::ostringstream os;
  os << "{";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > 40) return os.str().substr(0, 200) + " ...}";
  os << "}";
  return os.str();
}

// ---- test matrices ------------------------------------------------------------------------------------------------
// (skewed(), rows of very different lengths, is in gate_util.h: the GPU gates use it too.)
// Only every third row stores anything: rows without entries still cost one unit each.
labkit::Csr sparse_rows(int n, std::uint64_t seed) {
  std::vector<int> r, c;
  std::vector<double> v;
  for (int i = 0; i < n; i += 3)
    for (int j = 0; j < 4; ++j) {
      r.push_back(i);
      c.push_back(int(labkit::uniform_double(seed, std::uint64_t(i * 4 + j), 0, n)) % n);
      v.push_back(1.0);
    }
  return labkit::from_triplets(n, n, r, c, v);
}
// A square matrix with random columns anywhere (not symmetric): rows reach below and above their block.
labkit::Csr random_square(int n, int per_row, std::uint64_t seed) {
  std::vector<int> r, c;
  std::vector<double> v;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < per_row; ++j) {
      r.push_back(i);
      c.push_back(int(labkit::uniform_double(seed, std::uint64_t(i) * 64 + j, 0, n)) % n);
      v.push_back(labkit::uniform_double(seed ^ 0x5bd1e995u, std::uint64_t(i) * 64 + j, -1, 1));
    }
  return labkit::from_triplets(n, n, r, c, v);
}

// ---- brute-force references for the CPU gates ---------------------------------------------------------------------
// (ref_partition() is in gate_util.h: the GPU gates distribute by it.)
lab08::HaloPlan ref_plan(const labkit::Csr& A, const std::vector<int>& bounds, int k) {
  lab08::HaloPlan h;
  h.row_begin = bounds[std::size_t(k)];
  h.row_end = bounds[std::size_t(k) + 1];
  const int m = h.row_end - h.row_begin, P = int(bounds.size()) - 1;
  std::set<int> remote;
  for (int i = h.row_begin; i < h.row_end; ++i) {
    bool interior = true;
    for (int e = A.row_ptr[std::size_t(i)]; e < A.row_ptr[std::size_t(i) + 1]; ++e) {
      const int c = A.col_idx[std::size_t(e)];
      if (c < h.row_begin || c >= h.row_end) {
        interior = false;
        remote.insert(c);
      }
    }
    (interior ? h.interior_rows : h.boundary_rows).push_back(i - h.row_begin);
  }
  h.halo_cols.assign(remote.begin(), remote.end());
  h.halo_offsets.assign(std::size_t(P) + 1, 0);
  for (int q = 0; q < P; ++q) {
    int count = 0;
    for (int c : h.halo_cols) count += c >= bounds[std::size_t(q)] && c < bounds[std::size_t(q) + 1];
    h.halo_offsets[std::size_t(q) + 1] = h.halo_offsets[std::size_t(q)] + count;
  }
  std::vector<int> r, c;
  std::vector<double> v;
  for (int i = h.row_begin; i < h.row_end; ++i)
    for (int e = A.row_ptr[std::size_t(i)]; e < A.row_ptr[std::size_t(i) + 1]; ++e) {
      const int col = A.col_idx[std::size_t(e)];
      const int pos = int(std::find(h.halo_cols.begin(), h.halo_cols.end(), col) - h.halo_cols.begin());
      r.push_back(i - h.row_begin);
      c.push_back(col >= h.row_begin && col < h.row_end ? col - h.row_begin : m + pos);
      v.push_back(A.values[std::size_t(e)]);
    }
  h.local = labkit::from_triplets(m, m + int(h.halo_cols.size()), r, c, v);
  return h;
}

void require_same(const std::vector<int>& got, const std::vector<int>& want, const std::string& ctx,
                  const std::string& name) {
  if (got == want) return;
  std::size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream os;
  os << name << " differs";
  if (got.size() != want.size()) os << " in length (" << got.size() << " entries, expected " << want.size() << ")";
  if (i < got.size() && i < want.size()) os << "; first at [" << i << "]: got " << got[i] << ", expected " << want[i];
  os << "\n  got      " << str(got) << "\n  expected " << str(want);
  fail_at(ctx, os.str());
}

}  // namespace

// ---- CPU gates ------------------------------------------------------------------------------------------------------
TEST_CASE("step1.balanced", "[lab08][step1][cpu]") {
  struct Case {
    std::string label;
    labkit::Csr A;
  };
  std::vector<Case> cases;
  cases.push_back({"2D Poisson 7 x 5", labkit::poisson2d(7, 5)});
  cases.push_back({"random SPD", labkit::random_spd(300, 9, labkit::gate::seed("partition spd"))});
  cases.push_back({"10 dense rows of 61 entries, then diagonal rows", skewed(400, 10, 61)});
  cases.push_back({"every third row stored, the others empty", sparse_rows(97, labkit::gate::seed("sparse rows"))});
  cases.push_back({"3 rows (more parts than rows)", labkit::poisson2d(3, 1)});
  cases.push_back({"empty 0 x 0 matrix", labkit::Csr{}});
  for (const auto& c : cases)
    for (int parts : {1, 2, 3, 4, 5, 8}) {
      const std::string ctx = "step 1 (partition_rows), " + c.label + " (" + describe(c.A) + "), parts = " +
                              std::to_string(parts);
      const auto want = ref_partition(c.A, parts);
      const auto got = lab08::partition_rows(c.A, parts);
      if (got != want) {
        // Say what kind of wrong it is before the arrays: rows-only splitting is the common one.
        std::string why;
        std::vector<int> by_rows(std::size_t(parts) + 1);
        for (int k = 0; k <= parts; ++k) by_rows[std::size_t(k)] = int((long long)c.A.rows * k / parts);
        if (got == by_rows) why = " (these are equal ROW counts: balance row_ptr[i] + i, the nonzeros plus one per row)";
        require_same(got, want, ctx + why, "bounds");
      }
    }
  for (int bad : {0, -1})
    CHECK_THROWS_AS(lab08::partition_rows(labkit::poisson2d(4, 4), bad), std::invalid_argument);
}

TEST_CASE("step3.halo_lists", "[lab08][step3][cpu]") {
  struct Case {
    std::string label;
    labkit::Csr A;
    std::vector<int> bounds;
  };
  std::vector<Case> cases;
  const auto p2 = labkit::poisson2d(6, 5);
  cases.push_back({"2D Poisson 6 x 5, 3 parts", p2, ref_partition(p2, 3)});
  const auto p3 = labkit::poisson3d(5, 4, 3);
  cases.push_back({"3D Poisson 5 x 4 x 3, 4 parts", p3, ref_partition(p3, 4)});
  const auto rs = random_square(60, 5, labkit::gate::seed("halo random"));
  cases.push_back({"random 60 x 60 (columns anywhere), 4 parts with an empty one", rs, {0, 11, 11, 37, 60}});
  cases.push_back({"random 60 x 60, 1 part (no halo)", rs, {0, 60}});
  const auto spd = labkit::random_spd(150, 7, labkit::gate::seed("halo spd"));
  cases.push_back({"random SPD 150, 5 parts", spd, ref_partition(spd, 5)});
  for (const auto& c : cases) {
    const std::string ctx = "step 3 (plan_halo), " + c.label + " (" + describe(c.A) + "), bounds " + str(c.bounds);
    const auto got = lab08::plan_halo(c.A, c.bounds);
    if (got.size() + 1 != c.bounds.size())
      fail_at(ctx, "returned " + std::to_string(got.size()) + " plans for " + std::to_string(c.bounds.size() - 1) +
                       " parts");
    for (int k = 0; k + 1 < int(c.bounds.size()); ++k) {
      const std::string pctx = ctx + ", part " + std::to_string(k);
      const auto want = ref_plan(c.A, c.bounds, k);
      const auto& g = got[std::size_t(k)];
      if (g.row_begin != want.row_begin || g.row_end != want.row_end)
        fail_at(pctx, "rows [" + std::to_string(g.row_begin) + ", " + std::to_string(g.row_end) + "), expected [" +
                          std::to_string(want.row_begin) + ", " + std::to_string(want.row_end) + ")");
      require_same(g.halo_cols, want.halo_cols, pctx, "halo_cols (remote columns, ascending, each once)");
      require_same(g.halo_offsets, want.halo_offsets, pctx, "halo_offsets (halo entries per owner)");
      require_same(g.interior_rows, want.interior_rows, pctx, "interior_rows (local rows with no remote column)");
      require_same(g.boundary_rows, want.boundary_rows, pctx, "boundary_rows");
      if (g.local.rows != want.local.rows || g.local.cols != want.local.cols)
        fail_at(pctx, "local is " + describe(g.local) + ", expected " + describe(want.local));
      const std::string problem = g.local.first_problem();
      if (!problem.empty()) fail_at(pctx, "local is not a valid CSR (columns sorted in each row?): " + problem);
      require_same(g.local.row_ptr, want.local.row_ptr, pctx, "local.row_ptr");
      require_same(g.local.col_idx, want.local.col_idx, pctx, "local.col_idx (renumbered columns)");
      if (g.local.values != want.local.values) fail_at(pctx, "local.values differ from the block's values in the new order");
    }
  }
  CHECK_THROWS_AS(lab08::plan_halo(labkit::poisson2d(4, 4), {0, 20}), std::invalid_argument);
}
