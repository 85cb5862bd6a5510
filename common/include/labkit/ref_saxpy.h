// CPU references for the BLAS-1 lab (05): saxpy, the 2-norm and a sum, all in double. Inf and NaN follow IEEE 754
// exactly as the float operations do (the double operations obey the same rules), so the references also say what
// a correct kernel must produce for non-finite inputs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace labkit {

// out[i] = a * x[i] + y[i] in double. For finite inputs the product of two floats is exact in double and the sum
// is rounded once at 2^-53, so this is the true value for every practical purpose.
std::vector<double> saxpy_ref(float a, const std::vector<float>& x, const std::vector<float>& y);

// A bound on |computed - exact| for one element of a float saxpy evaluated either as one fma (rounded once: at
// most u*|exact|) or as a product then a sum (rounded twice: at most u*|a*x|*(1+u) + u*|exact|), u = 2^-24.
double saxpy_error_bound(float a, float x, float y);

// sqrt(sum v[i]^2) in double over all host cores: NaN when any v[i] is NaN, else Inf when any v[i] is infinite.
double norm2_ref(const std::vector<double>& v);
// The same for float values (each squared in double): the norm a float array actually holds.
double norm2_ref(const std::vector<float>& v);

// sum v[i] and sum |v[i]| in double over all host cores (the second scales the rounding error of any float sum).
double sum_ref(const std::vector<float>& v);
double sum_abs_ref(const std::vector<float>& v);

// Device twins for the speed gates' 2^26-element outputs (ref_saxpy_device.cu), so that a gate checks its last timed
// call without copying 768 MB to the host. saxpy_scan_device applies, to every element of a device y, the rule the
// lab 05 gates apply on the host: the double a*x + y0 (exact product, one rounding) must be met within twice
// saxpy_error_bound, an Inf exactly and a NaN by a NaN. x and y0 are the values fill_random_device(seed_x) and
// fill_random_device(seed_y) wrote (in [-1, 1)), regenerated per element. The arithmetic is the host's, operation
// for operation, so the count is the host loop's.
struct SaxpyScan {
  std::size_t wrong = 0;  // elements outside their bound
  std::size_t first = 0;  // the smallest such index (meaningless when wrong == 0)
};
SaxpyScan saxpy_scan_device(const float* y, std::size_t n, float a, std::uint64_t seed_x, std::uint64_t seed_y);

// sqrt(sum v[i]^2) over a device array, each square and the sum in double: the norm2_ref of the same values, in a
// fixed order (per block, then the blocks' partial sums in block order on the host), so repeatable run to run.
double norm2_device(const float* v, std::size_t n);

}  // namespace labkit
