// A speed baseline compiled into the gates (never the student's step 1): the textbook bitonic network for a
// power-of-two n, one kernel launch per (k, j) step, all in global memory. step3.speed compares step 3 with it, so
// "step 3 is several times faster than the one-kernel-per-step network" is measured against code the student
// cannot change.
#pragma once
#include <cstddef>

namespace lab04::baseline {

void global_bitonic_sort(float* keys, std::size_t n);  // ascending; n a power of two (anything else throws)

}  // namespace lab04::baseline
