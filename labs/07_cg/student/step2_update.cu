// Lab 07, step 2 - your implementation (vector updates). Replace the `throw labkit::NotImplemented(...)` with the
// step, then run your gates: ctest --preset gpu -L lab07 -L student (or: labgrade 07). The walkthrough
// (labs/07_cg/README.md) explains the step and what its gates check. The argument checks at the top of each function
// are given (lab07::args in cg.h): keep them, the gates call the functions with impossible arguments.
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

// Step 2. One thread per element; y[i] = fma(a, x[i], y[i]). Skip the launch when n == 0 (a grid of 0 blocks is
// an invalid configuration).
void axpy(int n, double a, const double* x, double* y) {
  args::n(n, "axpy");
  args::ptr(x, n, "axpy");
  args::ptr(y, n, "axpy");
  throw labkit::NotImplemented("step 2: axpy");
}

// Step 2. y[i] = x[i] + b * y[i] (p = r + beta p).
void xpby(int n, const double* x, double b, double* y) {
  args::n(n, "xpby");
  args::ptr(x, n, "xpby");
  args::ptr(y, n, "xpby");
  throw labkit::NotImplemented("step 2: xpby");
}

// Step 2. The fused update: in ONE grid-stride loop x[i] += alpha p[i], r[i] -= alpha Ap[i], and accumulate the new
// r[i]^2; then step 1b's block reduction and second pass into *rr (copy those device helpers into this file: each
// step file compiles on its own). Count the bytes: 48 per element here, 64 for axpy + axpy + dot.
void update_xr(int n, double alpha, const double* p, const double* Ap, double* x, double* r, double* partials,
               double* rr, int blocks_per_sm) {
  args::n(n, "update_xr");
  args::blocks_per_sm(blocks_per_sm);
  args::ptr(p, n, "update_xr");
  args::ptr(Ap, n, "update_xr");
  args::ptr(x, n, "update_xr");
  args::ptr(r, n, "update_xr");
  args::scalar_out(partials, rr, "update_xr");
  throw labkit::NotImplemented("step 2: update_xr");
}

}  // namespace lab07
