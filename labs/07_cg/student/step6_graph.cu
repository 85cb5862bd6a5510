// Lab 07, step 6 - your implementation (device-side scalars and CUDA graphs). Replace the `throw
// labkit::NotImplemented(...)` with the step, then run your gates: ctest --preset gpu -L lab07 -L student (or:
// labgrade 07). The walkthrough (labs/07_cg/README.md) explains the step and what its gates check. The argument
// checks at the top of each function are given (lab07::args in cg.h): keep them, the gates call the functions with
// impossible arguments.
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

// Step 6. Keep alpha, beta, rr and a stop flag in a struct in device memory; kernels read alpha/beta from it and
// one-block kernels write them, so no scalar crosses to the host. Capture opt.graph_iterations iterations on a
// stream (cudaStreamBeginCapture ... EndCapture, cudaGraphInstantiate) and replay the graph, reading the state back
// once per launch. Every kernel starts with `if (state->stop) return;`: after convergence, p^T A p <= 0, overflow
// or max_iter the rest of the batch does nothing. Fusing p^T Ap into the SpMV saves a pass over p and Ap. The host
// side (start, true residual, restarts, the ending with a finite x) is step 4's: copy it into this file.
CgResult cg_solve_graph(const DeviceCsr& A, const double* b, double* x, const CgOptions& opt) {
  args::solver(A, b, x, opt, "cg_solve_graph");
  throw labkit::NotImplemented("step 6: cg_solve_graph");
}

}  // namespace lab07
