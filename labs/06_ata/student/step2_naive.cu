// Lab 06, step 2 - your implementation (naive kernel). Replace the `throw labkit::NotImplemented(...)` with the step,
// then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 2. One thread per C(i, j): a loop over k of A[k*N + i] * A[k*N + j]. Let threadIdx.x select j: which of
// the two loads is then coalesced, and which is a broadcast?
void ata_naive(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 2: ata_naive");
}

}  // namespace lab06
