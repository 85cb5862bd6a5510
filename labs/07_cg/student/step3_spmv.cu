// Lab 07, step 3 - your implementation (CSR SpMV). Replace the `throw labkit::NotImplemented(...)` with the step,
// then run your gates: ctest --preset gpu -L lab07 -L student (or: labgrade 07). The walkthrough
// (labs/07_cg/README.md) explains the step and what its gates check. The argument checks at the top of each function
// are given (lab07::args in cg.h): keep them, the gates call the functions with impossible arguments.
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

// Step 3a. Thread i computes y[i] = sum over k in [row_ptr[i], row_ptr[i+1]) of values[k] * x[col_idx[k]]. An empty
// row gives 0 (it must still be written). Nothing to launch when A.rows == 0.
void spmv_thread_per_row(const DeviceCsr& A, const double* x, double* y) {
  args::csr(A, "spmv_thread_per_row");
  args::ptr(x, A.cols, "spmv_thread_per_row");
  args::ptr(y, A.rows, "spmv_thread_per_row");
  throw labkit::NotImplemented("step 3: spmv_thread_per_row");
}

// Step 3b. Warp w computes row w: lane l takes entries begin + l, begin + l + 32, ...; a shuffle reduction; lane 0
// writes. 32 * rows threads in all (compute the grid in 64 bits). The early return for warps past the last row is
// safe with the full shuffle mask only because the whole warp returns together.
void spmv_warp_per_row(const DeviceCsr& A, const double* x, double* y) {
  args::csr(A, "spmv_warp_per_row");
  args::ptr(x, A.cols, "spmv_warp_per_row");
  args::ptr(y, A.rows, "spmv_warp_per_row");
  throw labkit::NotImplemented("step 3: spmv_warp_per_row");
}

}  // namespace lab07
