// CPU references for the BLAS-1 lab (05): saxpy, the 2-norm and a sum, all in double. Inf and NaN follow IEEE 754
// exactly as the float operations do (the double operations obey the same rules), so the references also say what
// a correct kernel must produce for non-finite inputs.
#pragma once
#include <cstddef>
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

}  // namespace labkit
