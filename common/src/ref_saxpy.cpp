#include "labkit/ref_saxpy.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <utility>

#include "labkit/reference.h"

namespace labkit {
namespace {

// Parallel sum of f(i) over [0, n): one double per worker, combined in worker order (deterministic for a given
// number of cores).
double parallel_sum(std::size_t n, const std::function<double(std::size_t)>& f) {
  std::vector<std::pair<std::size_t, double>> parts;
  std::mutex m;
  parallel_for(n, [&](std::size_t b, std::size_t e) {
    double s = 0;
    for (std::size_t i = b; i < e; ++i) s += f(i);
    std::lock_guard<std::mutex> lock(m);
    parts.emplace_back(b, s);
  });
  std::sort(parts.begin(), parts.end());
  double total = 0;
  for (const auto& p : parts) total += p.second;
  return total;
}

}  // namespace

std::vector<double> saxpy_ref(float a, const std::vector<float>& x, const std::vector<float>& y) {
  const std::size_t n = x.size() < y.size() ? x.size() : y.size();
  std::vector<double> out(n);
  parallel_for(n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = double(a) * double(x[i]) + double(y[i]);
  });
  return out;
}

double saxpy_error_bound(float a, float x, float y) {
  constexpr double u = 0x1p-24;
  const double p = std::fabs(double(a) * double(x));
  const double e = std::fabs(double(a) * double(x) + double(y));
  return u * p * (1 + u) + u * e;
}

double norm2_ref(const std::vector<double>& v) {
  // Squares of finite doubles up to 1e150 stay finite; an Inf or NaN term propagates through the sum by IEEE.
  return std::sqrt(parallel_sum(v.size(), [&](std::size_t i) { return v[i] * v[i]; }));
}

double norm2_ref(const std::vector<float>& v) {
  return std::sqrt(parallel_sum(v.size(), [&](std::size_t i) { return double(v[i]) * double(v[i]); }));
}

double sum_ref(const std::vector<float>& v) {
  return parallel_sum(v.size(), [&](std::size_t i) { return double(v[i]); });
}

double sum_abs_ref(const std::vector<float>& v) {
  return parallel_sum(v.size(), [&](std::size_t i) { return std::fabs(double(v[i])); });
}

}  // namespace labkit
