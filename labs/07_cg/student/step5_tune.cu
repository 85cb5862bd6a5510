// Lab 07, step 5 - your implementation (blocks per SM by timing). Replace the `throw labkit::NotImplemented(...)` with
// the step, then run your gates: ctest --preset gpu -L lab07 -L student (or: labgrade 07). The walkthrough
// (labs/07_cg/README.md) explains the step and what its gates check.
#include <stdexcept>

#include "cg.h"
#include "labkit/labkit.h"
#include "labkit/timing.h"

namespace lab07 {

// Step 5. Time dot_shuffle + update_xr (alpha = 0: the traffic of a real update, and the vectors stay as they are) on
// n-element device vectors with labkit::time_gpu, for 1, 2, 3, ... blocks per SM. Push every median into ms, stop at
// the first count that is not faster than the previous one and choose that previous one (kMaxBlocksPerSm when the
// times keep falling). Fill the vectors with labkit::fill_random_device first: never time uninitialized memory.
TuneResult tune_blocks_per_sm(int n) {
  if (n < 1) throw std::invalid_argument("lab07: tune_blocks_per_sm: n must be >= 1");
  throw labkit::NotImplemented("step 5: tune_blocks_per_sm");
}

}  // namespace lab07
