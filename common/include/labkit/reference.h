// CPU references. Accumulation is in double (or better), so the reference is far more accurate than the float
// kernels it judges. Work is split over all host cores.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace labkit {

// Run body(begin, end) over [0, n) split across the host's cores, each range at least `grain` indices long: work too
// small for a thread runs on the calling thread (n <= grain: one call body(0, n), no thread). The ranges depend on n,
// grain and the core count only, and each starts where the previous one ended.
void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body, std::size_t grain = 1);
// The grain of the checks' element-wise passes: a thread for every 2^16 elements at most.
constexpr std::size_t kElementGrain = std::size_t(1) << 16;

// out = C0 + A*B, row-major A (MxK), B (KxN), C0 (MxN), accumulated in double.
std::vector<double> matmul_ref(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                               const std::vector<float>& C0);
// One element of the above.
double matmul_ref_at(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                     const std::vector<float>& C0, int i, int j);
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
