// Lab 07 gates: the shared helpers of gate_util.h that are too long to live in the header.
#include "gate_util.h"
#include "labkit/device.h"

namespace lab07_gates {

labkit::CublasHandle& cublas() {
  static labkit::CublasHandle handle;
  return handle;
}
labkit::CusparseHandle& cusparse() {
  static labkit::CusparseHandle handle;
  return handle;
}

// Row i's error is <= (len_i + 1) u sum_j |a_ij x_j| for any order of its sum; x 2 for the products.
double spmv_abs_bound(const labkit::Csr& A, const std::vector<double>& x) {
  double worst = 0;
  for (double w : labkit::parallel_parts<double>(std::size_t(A.rows), [&](std::size_t b, std::size_t e) {
         double part = 0;
         for (std::size_t i = b; i < e; ++i) {
           double m = 0;
           for (int k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) m += std::fabs(A.values[k] * x[A.col_idx[k]]);
           part = std::max(part, 2.0 * (A.row_ptr[i + 1] - A.row_ptr[i] + 1) * kU * m);
         }
         return part;
       }))
    worst = std::max(worst, w);
  return worst;
}

// A rectangular matrix with empty rows (their y must still be written: 0) and one row longer than 32 warps.
// Transposed: 2500 x 100, more rows than columns (a grid sized from cols instead of rows leaves rows unwritten),
// most rows with one or two entries and many empty.
labkit::Csr irregular_matrix(std::uint64_t seed, bool transposed) {
  const int rows = 100, cols = 2500;
  std::vector<int> ri, ci;
  std::vector<double> v;
  std::uint64_t k = 0;
  for (int j = 0; j < cols; ++j) ri.push_back(0), ci.push_back(j), v.push_back(labkit::uniform_double(seed, k++, -1, 1));
  for (int i = 1; i < rows; ++i) {
    if (i >= 10 && i < 20) continue;  // empty rows
    for (int e = 0; e < 3; ++e) {
      ri.push_back(i);
      ci.push_back(int(labkit::uniform_int(seed, k++, 0, cols - 1)));
      v.push_back(labkit::uniform_double(seed, k++, -1, 1));
    }
  }
  return transposed ? labkit::from_triplets(cols, rows, ci, ri, v) : labkit::from_triplets(rows, cols, ri, ci, v);
}


double rel_true_residual(const labkit::Csr& A, const std::vector<double>& b, const std::vector<double>& x) {
  const auto Ax = labkit::spmv_ref(A, x);
  std::vector<double> r(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) r[i] = b[i] - Ax[i];
  const double bn = norm_ld(b);
  return bn > 0 ? norm_ld(r) / bn : 0.0;
}

// The pure Neumann Laplacian: each diagonal = the number of neighbours, so every row sums to 0 and A * ones = 0:
// singular, positive semi-definite. A b with a component along ones has no solution.
labkit::Csr neumann2d(int nx, int ny) {
  labkit::Csr A = labkit::poisson2d(nx, ny);
  for (int i = 0; i < A.rows; ++i) {
    int neighbours = 0, diag = -1;
    for (int k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      if (A.col_idx[k] == i) diag = k;
      else ++neighbours;
    }
    A.values[diag] = neighbours;
  }
  return A;
}

namespace {
int sm_count() {  // of the device the gates run on (one per gate process)
  static const int sms = labkit::device_info().sm_count;
  return sms;
}
}  // namespace

long long reduction_grid(int blocks_per_sm) {
  return std::min<long long>(static_cast<long long>(blocks_per_sm) * sm_count(), lab07::kMaxPartials);
}

std::string reduction_grid_problem(const std::vector<labkit::launches::Kernel>& ran, long long n, int bps) {
  if (ran.empty()) return "";
  const long long G = reduction_grid(bps);
  int widest_block = 1;
  for (const auto& k : ran) widest_block = std::max(widest_block, k.threads);
  if (n < 4 * G * widest_block) return "";
  std::ostringstream grids;
  for (const auto& k : ran) {
    if (k.blocks == G) return "";
    grids << (grids.tellp() > 0 ? ", " : "") << k.blocks << " x " << k.threads;
  }
  std::ostringstream os;
  os << "no kernel ran the grid blocks_per_sm asks for: G = " << bps << " x " << sm_count() << " SMs = " << G
     << " blocks (at most " << lab07::kMaxPartials << "), where n = " << n
     << " gives every block work; the call ran (blocks x threads) " << grids.str()
     << ". The first pass is a fixed grid of blocks_per_sm x SMs blocks with a grid-stride loop: step 5 times "
        "the counts against each other, which means nothing when the grid ignores them";
  return os.str();
}

std::filesystem::path scratch_dir(const std::string& what) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(labkit::gate::seed(what)));
  auto dir = std::filesystem::temp_directory_path() / ("lab07_" + what + "_" + buf);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace lab07_gates
