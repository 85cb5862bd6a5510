// Lab 08, step 1: row blocks balanced by nonzeros, uploaded to their devices (one stream per part), and the SpMV
// of every part at once. See multi_cg.h for the exact contracts.
#include <vector>

#include "labkit/not_implemented.h"
#include "multi_cg.h"

namespace lab08 {

std::vector<int> partition_rows(const labkit::Csr& A, int parts) {
  // TODO: bounds[k] = the first row i with row_ptr[i] + i >= k * (nnz + rows) / parts. C(i) = row_ptr[i] + i never
  // decreases, so a binary search per boundary (or one pass over the rows) finds them.
  (void)A;
  (void)parts;
  throw labkit::NotImplemented("step 1: partition_rows");
}

std::vector<PartCsr> distribute_rows(const Team& team, const labkit::Csr& A, const std::vector<int>& bounds) {
  // TODO: for each part k: team.use(k); allocate its rows' arrays on that device (row_ptr rebased to 0, columns
  // unchanged); start the copies with cudaMemcpyAsync on team.stream(k) so that all parts upload at once; keep the
  // host arrays alive until team.synchronize() returns. PartCsr::storage owns the memory (a shared_ptr whose
  // deleter calls cudaFree).
  (void)team;
  (void)A;
  (void)bounds;
  throw labkit::NotImplemented("step 1: distribute_rows");
}

void spmv_parts(const Team& team, const std::vector<PartCsr>& parts, const std::vector<const double*>& x,
                const std::vector<double*>& y) {
  // TODO: one thread-per-row SpMV kernel (lab 07 step 3a) per part, launched on team.stream(k) after
  // team.use(k); do not wait for it.
  (void)team;
  (void)parts;
  (void)x;
  (void)y;
  throw labkit::NotImplemented("step 1: spmv_parts");
}

}  // namespace lab08
