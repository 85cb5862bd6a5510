// Lab 06, step 5 - your implementation (a 4 x 4 block per thread). Replace the `throw labkit::NotImplemented(...)`
// with the step, then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 5. Step 4 with TT = 4: a 64x64 tile of C per block of 16x16 threads, each thread the 4x4 elements at rows
// ty + 16a and columns tx + 16b (a, b = 0..3). Start from a copy of your step 4 and change the geometry: per k a
// thread now reads 4 + 4 values from shared memory for 16 FMAs (step 4: 6 for 9). Which resource limited step 4's
// inner loop on an SM that serves one shared-memory wavefront and two warp-wide DFMAs per clock? Check with
// -Xptxas -v that the 16 accumulators do not spill.
void ata_regblock4(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 5: ata_regblock4");
}

}  // namespace lab06
