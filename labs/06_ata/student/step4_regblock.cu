// Lab 06, step 4 - your implementation (register blocking). Replace the `throw labkit::NotImplemented(...)` with the
// step, then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 4. Each thread keeps a small block of C in registers (the seed: 48x48 tiles, 16x16 threads, 3x3 each).
// Give a thread rows ty + 16a and columns tx + 16b rather than a contiguous 3x3: why does that avoid bank
// conflicts for doubles (8 bytes = two banks)? Fully unrolled loops with compile-time bounds keep acc in
// registers (check with -Xptxas -v: no spills).
void ata_regblock(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 4: ata_regblock");
}

}  // namespace lab06
