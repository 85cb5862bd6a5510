// The square product both lab 01 harnesses time (tune01.cu, and the program fma_orders01.py generates): random
// n x n A and B, C from the lab's trusted cuBLAS call, C2 for the variant, and a variant checked against cuBLAS on
// the same inputs before it is timed against it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/cublas.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "tests/cublas_baseline.h"

namespace tune01 {

using Matmul = void (*)(int, int, int, const float*, const float*, float*);

// max |x - y| / max |x| over every element
inline double relerr(const std::vector<float>& x, const std::vector<float>& y) {
  double md = 0, mx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    md = std::max(md, double(std::fabs(x[i] - y[i])));
    mx = std::max(mx, double(std::fabs(x[i])));
  }
  return md / mx;
}

struct SquareProblem {
  SquareProblem(labkit::CublasHandle& handle, int size)
      : h(handle), n(size), sz(std::size_t(size) * size), A(sz), B(sz), C(sz), C2(sz) {
    labkit::fill_random_device(A.data(), sz, 1);
    labkit::fill_random_device(B.data(), sz, 2);
  }
  void cublas() { lab01::baseline::sgemm_rowmajor(h, n, n, n, A.data(), B.data(), C.data()); }
  void run(Matmul f) { f(n, n, n, A.data(), B.data(), C2.data()); }
  // Both products from zeroed outputs (the steps accumulate into C), compared element by element.
  double check(Matmul f) {
    LABKIT_CUDA(cudaMemset(C.data(), 0, sz * 4));
    LABKIT_CUDA(cudaMemset(C2.data(), 0, sz * 4));
    cublas();
    run(f);
    LABKIT_CUDA(cudaDeviceSynchronize());
    return relerr(C.download(), C2.download());
  }
  // cuBLAS (the baseline) against f, interleaved in one process: > 1 means f is faster.
  labkit::SpeedComparison time(Matmul f, double budget_ms) {
    labkit::TimingOptions o;
    o.warmup = 3;
    o.min_repeats = 10;
    o.budget_ms = budget_ms;
    return labkit::compare_speed([&](int) { cublas(); }, [&](int) { run(f); }, o);
  }

  labkit::CublasHandle& h;
  int n;
  std::size_t sz;
  labkit::DeviceBuffer<float> A, B, C, C2;
};

}  // namespace tune01
