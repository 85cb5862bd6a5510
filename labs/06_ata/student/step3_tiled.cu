// Lab 06, step 3 - your implementation (shared-memory tiles). Replace the `throw labkit::NotImplemented(...)` with
// the step, then run your gates: ctest --preset gpu -L lab06 -L student (or: labgrade 06). The walkthrough
// (labs/06_ata/README.md) explains the step and what its gates check.
//
// Reminder: C(i, j) = sum_k A(k, i) * A(k, j) with A row-major M x N (A(k, i) = A[k * N + i]); write ALL of C.
// Use std::size_t for k * N + i (N * N exceeds 2^31 for N > 46340). Call LABKIT_CHECK_LAUNCH() after every launch.
#include <stdexcept>

#include "ata.h"
#include "labkit/labkit.h"

namespace lab06 {

// Step 3. A block computes a T x T tile of C. Per step along k, stage rows k0..k0+T of the two column panels of A
// (columns I0.. for the tile's rows, J0.. for its columns) in __shared__ memory - they are pieces of ROWS of A,
// so the loads are coalesced. Load, barrier, multiply, barrier. Out-of-range elements load as 0.
void ata_tiled(int M, int N, const double* A, double* C) {
  check_sizes(M, N);
  (void)A, (void)C;
  throw labkit::NotImplemented("step 3: ata_tiled");
}

}  // namespace lab06
