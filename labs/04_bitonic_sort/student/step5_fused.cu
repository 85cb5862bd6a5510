// Lab 04, step 5 - your implementation. Replace the `throw labkit::NotImplemented(...)` with the step, then run
//   ctest --preset gpu -L lab04 -L student      (your gates; or: build/gpu/labgrade 04)
// The walkthrough (labs/04_bitonic_sort/README.md) explains the network, each step and what its gates check.
//
// Compare keys with labkit::float_order_key(x) (an unsigned integer; usable in kernels), never floats with `<`:
// that is what puts NaNs last and -0.0 before +0.0. For a descending sort, compare float_order_key(x) ^ 0xFFFFFFFF.
#include <stdexcept>
#include <string>

#include "bitonic_sort.h"
#include "labkit/labkit.h"

namespace lab04 {

namespace {
// Refuse impossible arguments before launching anything.
void check_args(const void* keys, std::size_t n, const char* step) {
  if (n > kMaxN)
    throw std::invalid_argument(std::string("lab04 ") + step + ": n = " + std::to_string(n) +
                                " exceeds kMaxN = 2^31 (32-bit indices)");
  if (n > 0 && keys == nullptr) throw std::invalid_argument(std::string("lab04 ") + step + ": null keys pointer");
}
}  // namespace

// Step 5. Keys only: step 3 with several steps per pass, in registers. Steps r in a row of one stage (distances
// J, J/2, ..., J/2^(r-1)) only mix slots whose indices differ in those r bits: a thread that loads such a group
// of 2^r slots (spaced J/2^(r-1) apart) can do all r steps in registers and store once: one global pass for r
// steps (at 2^24 keys and r = 5: 13 passes instead of step 3's 45). Hints:
//  - The mirror step (i with i ^ (k-1)) also flips the bits BELOW the group: give the upper half of the group the
//    mirrored low bits (x ^ (J/2^(r-1) - 1)); the plain steps after it never mix the two halves.
//  - Sort 32-bit integer keys, converted once on load and back on store. float_order_key() cannot be inverted
//    (all NaNs map to one key): use a bijection that orders the same way (radix transform, then rotate the
//    negative NaNs above +inf), and a compare-exchange becomes (min, max) with no branch.
//  - Slots >= n: load them as the largest key and never store them; check that they can never change.
//  - In shared memory: steps with j < 32 stay inside 32 consecutive slots: one thread holds such a row in
//    registers (pad the shared array by one word per 32 so that rows and runs are both bank-conflict-free).
//  - Registers: a 1024-thread block gets at most 64 registers per thread. A row of 32 keys fits (its shared
//    addresses are one base, threadIdx.x * 33, plus compile-time offsets); a shared-memory pass over a group of
//    32 keys does not (32 keys plus 32 computed addresses), so shared passes take at most 16 keys (r = 4), while
//    the global passes (256-thread blocks, more registers each) can take 32 (r = 5). Fully unroll every loop
//    over a register array (compile-time bounds) and read the spill report (the README's step 5 gives the
//    exact nvcc -Xptxas -v command).
void sort_fused(float* keys, std::size_t n, Order order) {
  check_args(keys, n, "step 5 (sort_fused)");
  (void)order;
  throw labkit::NotImplemented("step 5: sort_fused");
}

}  // namespace lab04
