// Lab 07, step 1 - your implementation (the two-pass dot product). Replace the `throw labkit::NotImplemented(...)`
// with the step, then run your gates: ctest --preset gpu -L lab07 -L student (or: labgrade 07). The walkthrough
// (labs/07_cg/README.md) explains the step and what its gates check. The argument checks at the top of each function
// are given (lab07::args in cg.h): keep them, the gates call the functions with impossible arguments.
#include <string>

#include "cg.h"
#include "labkit/labkit.h"

namespace lab07 {

// Step 1a. Kernel 1: each thread sums x[i]*y[i] over a grid-stride loop (i += gridDim.x * blockDim.x), writes its
// sum to a __shared__ array, and the block halves the active threads level by level (a __syncthreads() after
// every level) until thread 0 holds the block's sum: partials[blockIdx.x]. Kernel 2: ONE block does the same over
// the partials and writes *result. Grid: blocks_per_sm * SM count (cudaDevAttrMultiProcessorCount), at most
// kMaxPartials, at least 1 (n == 0 must give 0). Use size_t for i: i + stride can pass 2^31.
void dot_twopass(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  args::n(n, "dot_twopass");
  args::blocks_per_sm(blocks_per_sm);
  args::ptr(x, n, "dot_twopass");
  args::ptr(y, n, "dot_twopass");
  args::scalar_out(partials, result, "dot_twopass");
  throw labkit::NotImplemented("step 1: dot_twopass");
}

// Step 1b. Same two passes; reduce inside each warp with __shfl_down_sync (offsets 16, 8, 4, 2, 1), then the
// warps' sums (one shared slot per warp, one barrier) in warp 0. Two accumulators per thread keep more loads in
// flight. The summation order must not depend on timing: the gates compare two runs bit for bit.
void dot_shuffle(int n, const double* x, const double* y, double* partials, double* result, int blocks_per_sm) {
  args::n(n, "dot_shuffle");
  args::blocks_per_sm(blocks_per_sm);
  args::ptr(x, n, "dot_shuffle");
  args::ptr(y, n, "dot_shuffle");
  args::scalar_out(partials, result, "dot_shuffle");
  throw labkit::NotImplemented("step 1: dot_shuffle");
}

}  // namespace lab07
