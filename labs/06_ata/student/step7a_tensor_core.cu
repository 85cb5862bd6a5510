// Lab 06, step 7a - your implementation (fp64 tensor cores, m8n8k4). Replace the `throw labkit::NotImplemented(...)`
// with the step, then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 7a (expert). mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 through inline PTX (sm_80+): per lane one
// double of A (row lane/4, k lane%4), one of B (k lane%4, col lane/4), two of C/D (row lane/4, cols 2*(lane%4)
// + {0,1}). A warp tile of several 8x8 MMAs, panels in padded shared memory (a fragment read spans 4 rows: pad the
// rows so they start in different banks), symmetry as in step 6. Throw std::runtime_error below sm_80, and also when
// the program holds no sm_80+ code for your kernel: cudaFuncGetAttributes(&attr, kernel) gives attr.ptxVersion, the
// architecture of the code the runtime loaded (a build for older GPUs only would run a JIT-compiled fallback).
void ata_tensor_core(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 7a: ata_tensor_core");
}

}  // namespace lab06
