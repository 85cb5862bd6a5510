// Lab 08 gates: the bodies of gate_util.h's helpers.
#include "gate_util.h"

#include <catch2/catch_test_macros.hpp>

#include <cstdlib>
#include <map>
#include <sstream>

#include "labkit/check.h"
#include "labkit/gate.h"

namespace lab08_gates {

std::string describe(const labkit::Csr& A) {
  std::ostringstream os;
  os << A.rows << " x " << A.cols << ", nnz " << A.nnz();
  return os.str();
}

void fail_at(const std::string& ctx, const std::string& what) {
  FAIL(ctx << ": " << what << "\n  " << labkit::gate::reproduce_hint());
}

labkit::Csr skewed(int n, int dense, int width) {
  std::vector<int> r, c;
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    r.push_back(i);
    c.push_back(i);
    v.push_back(4.0);
    if (i < dense)
      for (int j = 1; j < width && j < n; ++j) {
        r.push_back(i);
        c.push_back((i + j * 7) % n);
        v.push_back(0.01);
      }
  }
  return labkit::from_triplets(n, n, r, c, v);
}

std::vector<int> ref_partition(const labkit::Csr& A, int parts) {
  const double total = double(A.nnz()) + A.rows;
  std::vector<int> b(std::size_t(parts) + 1, A.rows);
  b[0] = 0;
  for (int k = 1; k < parts; ++k) {
    int i = 0;
    while (i < A.rows && double(A.row_ptr[std::size_t(i)]) + i < total * k / parts) ++i;
    b[std::size_t(k)] = i;
  }
  return b;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
}
const lab08::Team& team_of(const std::vector<int>& devices) {
  // Never destroyed: tearing NCCL communicators down after the CUDA runtime has shut down at exit is not safe.
  static auto* teams = new std::map<std::vector<int>, std::unique_ptr<lab08::Team>>;
  auto& t = (*teams)[devices];
  if (!t) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // no NVLink multicast: see multi_cg.h (a value already set wins)
    t = std::make_unique<lab08::Team>(devices);
  }
  return *t;
}

void require_two_gpus() {
  LABKIT_REQUIRE_GPU();
  const int n = device_count();
  if (n < 2) SKIP("this gate needs at least 2 GPUs; " << n << " found (the virtual-device gates stepK.correct ran the "
                  "same code with all parts on one GPU)");
}

const char* name(Scheme s) {
  return s == Scheme::allgather ? "step 2 (all-gather)" : s == Scheme::halo ? "step 3 (halo)" : "step 4 (device scalars)";
}
std::unique_ptr<lab08::Solver> make(Scheme s, const lab08::Team& team, const labkit::Csr& A) {
  switch (s) {
    case Scheme::allgather: return lab08::make_allgather_solver(team, A);
    case Scheme::halo: return lab08::make_halo_solver(team, A);
    default: return lab08::make_device_scalar_solver(team, A);
  }
}

}  // namespace lab08_gates
