// Lab 04 gates: what the gate files share. The five steps behind one switch (run_keys_checked: the step's own
// kernels only), and the sort check with its diagnosis: an output is accepted when it is, bit for bit, a
// permutation of the input AND in the order of labkit::float_order_key (NaNs last, -0.0 before +0.0; descending is
// the mirror image); key-value outputs must also keep each value with its key. Files: gate_util.cpp (these
// helpers' bodies), gates.cpp (the CPU test and every correctness gate), gates_speed.cpp (every speed gate),
// device_check.h (the same checks answered on the GPU for large arrays; these host checks then only diagnose).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bitonic_sort.h"
#include "labkit/compare.h"
#include "labkit/guard.h"

namespace lab04_gates {

using lab04::Order;
using u32 = std::uint32_t;

enum class Step { pow2 = 1, global, shared, pairs, fused };
const char* const kStepName[] = {"",
                                 "step 1 (one kernel per step, power-of-two n)",
                                 "step 2 (any n, global memory)",
                                 "step 3 (shared-memory chunks)",
                                 "step 4 (key-value pairs)",
                                 "step 5 (several steps per pass, in registers)"};

const char* order_name(Order o);

void run_keys(Step s, float* keys, std::size_t n, Order o);
// The calls the correctness gates make: a step's sort must be its own kernels, not
// thrust::sort or a CUB radix sort (labkit/launches.h). The speed gates record through TimedCase::record.
void run_keys_checked(Step s, float* keys, std::size_t n, Order o);

// The sort check, with a diagnosis (a lost or duplicated value, the first descent, -0.0/+0.0 and NaN mix-ups, an
// inverted direction, sorted runs that were never merged).
labkit::Verdict check_sort(const std::vector<float>& got, const std::vector<float>& in, Order order);
// Key-value: values started as i ^ mask beside key i; they must come out as a permutation of those, each still beside
// the key it started with.
labkit::Verdict check_pairs(const std::vector<float>& keys, const std::vector<u32>& values,
                            const std::vector<float>& in, Order order, u32 mask);

// Fails the gate when a guard band around an array was written.
void require_guards(const labkit::GuardReport& g, const std::string& ctx);

}  // namespace lab04_gates
