// The library baselines of lab 04 (used by the gates and the bench): thrust::sort and thrust::sort_by_key on
// device pointers. Thrust sorts float keys with a radix sort (CUB's onesweep): O(n) work in a few passes.
// Its temporary storage comes from a caching allocator, so the timings measure the sort, not cudaMalloc.
// (Thrust's own float order differs from labkit::float_order_key for NaNs and -0.0; the baselines are timed on
// random data without either.)
#pragma once
#include <cstddef>
#include <cstdint>

namespace lab04::baseline {

void thrust_sort(float* keys, std::size_t n);                                 // ascending
void thrust_sort_by_key(float* keys, std::uint32_t* values, std::size_t n);  // ascending

}  // namespace lab04::baseline
