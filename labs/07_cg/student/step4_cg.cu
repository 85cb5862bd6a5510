// Lab 07, step 4 - your implementation (the CG loop). Replace the `throw labkit::NotImplemented(...)` with the step,
// then run your gates: ctest --preset gpu -L lab07 -L student (or: labgrade 07). The walkthrough
// (labs/07_cg/README.md) explains the step and what its gates check. The argument checks at the top of each function
// are given (lab07::args in cg.h): keep them, the gates call the functions with impossible arguments.
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

// Step 4. x = 0, r = p = b, rr = r^T r; then per iteration: Ap = A p; pAp = p^T Ap (to the host); stop with not_spd
// when pAp <= 0, with breakdown when it is not finite; alpha = rr / pAp; update_xr; ++iterations; progress; when
// ||r|| / ||b|| <= rel_tol compute the TRUE residual b - A x (spmv + xpby with b = -1): converged if it agrees,
// else restart from it (r = b - A x, p = r) and give up with stagnation after a few restarts that do not improve
// it; beta = rr_new / rr; p = r + beta p. Handle b == 0 (x = 0, converged) and max_iter == 0. Fill every field of
// CgResult, the true residual included. x must be finite on return. labkit::cg_ref (common/src/sparse.cpp) is
// the same algorithm on the CPU.
CgResult cg_solve(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  args::solver(A, b, x, opt, "cg_solve");
  throw labkit::NotImplemented("step 4: cg_solve");
}

}  // namespace lab07
