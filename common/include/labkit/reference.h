// CPU references. Accumulation is in double (or better), so the reference is far more accurate than the float
// kernels it judges. Work is split over all host cores.
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace labkit {

// Run body(begin, end) over [0, n) split across the host's cores, each range at least `grain` indices long: work too
// small for a thread runs on the calling thread (n <= grain: one call body(0, n), no thread). The ranges depend on n,
// grain and the core count only, and each starts where the previous one ended.
void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body, std::size_t grain = 1);
// The grain of the checks' element-wise passes: a thread for every 2^16 elements at most.
constexpr std::size_t kElementGrain = std::size_t(1) << 16;

// body(begin, end) -> Part over ranges of [0, n) on every core (parallel_for with `grain`), the parts returned in
// range order: what is merged from them (a list of indices, a sum) is what one loop from 0 to n would give, or for
// sums depends on n and the core count only, never on which thread finished first.
template <class Part, class Body>
std::vector<Part> parallel_parts(std::size_t n, const Body& body, std::size_t grain = kElementGrain) {
  std::mutex m;
  std::vector<std::pair<std::size_t, Part>> parts;
  parallel_for(
      n,
      [&](std::size_t b, std::size_t e) {
        Part p = body(b, e);
        std::lock_guard<std::mutex> lock(m);
        parts.emplace_back(b, std::move(p));
      },
      grain);
  std::sort(parts.begin(), parts.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  std::vector<Part> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(std::move(p.second));
  return out;
}

// out = C0 + A*B, row-major A (MxK), B (KxN), C0 (MxN), accumulated in double.
std::vector<double> matmul_ref(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                               const std::vector<float>& C0);
// One element of the above.
double matmul_ref_at(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                     const std::vector<float>& C0, int i, int j);
// The same element from accessors a(i, k), b(k, j), c0(i, j) returning float: for inputs that exist only as a
// generator's values (a speed gate's 64 MB matrices, never copied to the host).
template <class GetA, class GetB, class GetC0>
double matmul_ref_at_of(int K, const GetA& a, const GetB& b, const GetC0& c0, int i, int j) {
  double acc = 0;
  for (int k = 0; k < K; ++k) acc += double(a(i, k)) * b(k, j);
  return double(c0(i, j)) + acc;
}
// max over (i, j) of |C0(i,j)| + sum_k |A(i,k)| |B(k,j)|: what the rounding errors of any float C0 + A*B scale with
// (CheckOptions::scale). When the terms of an element cancel, its value can be far smaller than this.
double matmul_abs_max(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                      const std::vector<float>& C0);
// C += A*B in float with cache blocking: the CPU speed baseline of the matmul bench.
void matmul_cpu_blocked(int M, int N, int K, const float* A, const float* B, float* C);

// out = in^T for a rows x cols row-major matrix (out is cols x rows).
template <class T>
std::vector<T> transpose_ref(std::size_t rows, std::size_t cols, const std::vector<T>& in);

}  // namespace labkit
