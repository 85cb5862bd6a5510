#include "labkit/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <thread>

namespace labkit {

void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body, std::size_t grain) {
  std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, std::max<std::size_t>(1, n / std::max<std::size_t>(1, grain)));
  if (workers <= 1) {
    body(0, n);
    return;
  }
  std::vector<std::thread> pool;
  std::size_t chunk = (n + workers - 1) / workers;
  for (std::size_t w = 0; w < workers; ++w) {
    std::size_t b = w * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(body, b, e);
  }
  for (auto& t : pool) t.join();
}

std::vector<double> matmul_ref(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                               const std::vector<float>& C0) {
  std::vector<double> out(std::size_t(M) * N);
  parallel_for(M, [&](std::size_t r0, std::size_t r1) {
    std::vector<double> row(N);
    for (std::size_t i = r0; i < r1; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int k = 0; k < K; ++k) {  // i-k-j order: B is read along rows, contiguous
        const double a = A[i * K + k];
        const float* b = &B[std::size_t(k) * N];
        for (int j = 0; j < N; ++j) row[j] += a * b[j];
      }
      for (int j = 0; j < N; ++j) out[i * N + j] = double(C0[i * N + j]) + row[j];
    }
  });
  return out;
}

double matmul_ref_at(int, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                     const std::vector<float>& C0, int i, int j) {
  auto a = [&](int r, int k) { return A[std::size_t(r) * K + k]; };
  auto b = [&](int k, int c) { return B[std::size_t(k) * N + c]; };
  auto c0 = [&](int r, int c) { return C0[std::size_t(r) * N + c]; };
  return matmul_ref_at_of(K, a, b, c0, i, j);
}

double matmul_abs_max(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B,
                      const std::vector<float>& C0) {
  std::mutex m;
  double result = 0;
  parallel_for(M, [&](std::size_t r0, std::size_t r1) {
    std::vector<double> row(N);
    double local = 0;
    for (std::size_t i = r0; i < r1; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int k = 0; k < K; ++k) {
        const double a = std::fabs(double(A[i * K + k]));
        const float* b = &B[std::size_t(k) * N];
        for (int j = 0; j < N; ++j) row[j] += a * std::fabs(double(b[j]));
      }
      for (int j = 0; j < N; ++j) local = std::max(local, std::fabs(double(C0[i * N + j])) + row[j]);
    }
    std::lock_guard<std::mutex> lock(m);
    result = std::max(result, local);
  });
  return result;
}

void matmul_cpu_blocked(int M, int N, int K, const float* A, const float* B, float* C) {
  constexpr int BI = 64, BK = 256, BJ = 512;  // blocks of A, B and C that stay in L1/L2 while reused
  parallel_for((M + BI - 1) / BI, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t bi = b0; bi < b1; ++bi) {
      int i0 = int(bi) * BI, i1 = std::min(M, i0 + BI);
      for (int k0 = 0; k0 < K; k0 += BK) {
        int k1 = std::min(K, k0 + BK);
        for (int j0 = 0; j0 < N; j0 += BJ) {
          int j1 = std::min(N, j0 + BJ);
          for (int i = i0; i < i1; ++i)
            for (int k = k0; k < k1; ++k) {
              const float a = A[std::size_t(i) * K + k];
              const float* b = B + std::size_t(k) * N;
              float* c = C + std::size_t(i) * N;
              for (int j = j0; j < j1; ++j) c[j] += a * b[j];  // contiguous: the compiler vectorises this loop
            }
        }
      }
    }
  });
}

template <class T>
std::vector<T> transpose_ref(std::size_t rows, std::size_t cols, const std::vector<T>& in) {
  std::vector<T> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  return out;
}
template std::vector<float> transpose_ref(std::size_t, std::size_t, const std::vector<float>&);
template std::vector<double> transpose_ref(std::size_t, std::size_t, const std::vector<double>&);

}  // namespace labkit
