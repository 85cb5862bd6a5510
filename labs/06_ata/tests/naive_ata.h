// A speed baseline compiled into the gates (never the student's step 2): the naive A^T A, one thread per element
// of C reading both columns straight from global memory. step3.speed compares step 3 with it, so "tiles in shared
// memory beat the naive kernel" is measured against code the student cannot change.
#pragma once

namespace lab06::baseline {

void naive_ata(int M, int N, const double* A, double* C);  // A M x N row-major, C N x N (all of it written)

}  // namespace lab06::baseline
