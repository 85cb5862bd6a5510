// Lab 06, step 6 - your implementation (symmetric tiles). Replace the `throw labkit::NotImplemented(...)` with the
// step, then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 6. Start from a copy of your step 5 and add symmetry. Launch only the T(T+1)/2 tiles with bi <= bj (a 1-D
// grid and a mapping b -> (bi, bj), or a 2-D grid whose lower blocks return at once) and write every result twice:
// C(i, j) and C(j, i). On a diagonal tile, let only i <= j write, so that C(j, i) is bit for bit the value of
// C(i, j): the gates demand exact symmetry.
void ata_symmetric(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 6: ata_symmetric");
}

}  // namespace lab06
