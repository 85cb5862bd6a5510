// Tuning harness for lab 01 step 5 (see tools/tuning/README.md): times the configurations of the step-5 sub-steps
// against the lab's trusted cuBLAS call, at 4096^3 and 8192^3, after checking each against it. Linked with the
// reference's step files: 5d (BK = 8), 5e (BK = 16 with two blocks per SM) and 5f (5e plus grouped block order);
// other group sizes: edit kGroup in solutions/01_matmul/step5f_tuned.cu and rebuild.
#include <cmath>
#include <cstdio>

#include "labkit/buffer.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "matmul.h"
#include "tests/cublas_baseline.h"

int main() {
  labkit::CublasHandle h;
  using F = void (*)(int, int, int, const float*, const float*, float*);
  struct Variant {
    const char* name;
    F f;
  } variants[] = {{"5c (one buffer)", lab01::matmul_vector_loads},
                  {"5d (BK 8)", lab01::matmul_double_buffer},
                  {"5e (BK 16, 2/SM)", lab01::matmul_launch_bounds},
                  {"5f (+ grouped)", lab01::matmul_tuned}};
  for (int n : {4096, 8192}) {
    const std::size_t sz = std::size_t(n) * n;
    labkit::DeviceBuffer<float> A(sz), B(sz), C(sz), C2(sz);
    labkit::fill_random_device(A.data(), sz, 1);
    labkit::fill_random_device(B.data(), sz, 2);
    labkit::TimingOptions o;
    o.warmup = 3;
    o.min_repeats = 10;
    o.budget_ms = 300;
    auto cub = [&](int) { lab01::baseline::sgemm_rowmajor(h, n, n, n, A.data(), B.data(), C.data()); };
    for (const auto& v : variants) {
      // Correctness against cuBLAS on a zeroed C (max difference relative to max |C|, every 7th element).
      LABKIT_CUDA(cudaMemset(C.data(), 0, sz * 4));
      LABKIT_CUDA(cudaMemset(C2.data(), 0, sz * 4));
      cub(0);
      v.f(n, n, n, A.data(), B.data(), C2.data());
      LABKIT_CUDA(cudaDeviceSynchronize());
      const auto x = C.download(), y = C2.download();
      double md = 0, mx = 0;
      for (std::size_t i = 0; i < sz; i += 7) {
        md = std::max(md, double(std::fabs(x[i] - y[i])));
        mx = std::max(mx, double(std::fabs(x[i])));
      }
      const auto cmp = labkit::compare_speed(cub, [&](int) { v.f(n, n, n, A.data(), B.data(), C2.data()); }, o);
      std::printf("n=%d %-18s ratio %.3f  cublas %.3f ms  variant %.3f ms  %.1f TFLOP/s  relerr %.2e\n", n, v.name,
                  cmp.ratio, cmp.baseline.median_ms, cmp.candidate.median_ms,
                  2.0 * n * double(n) * n / (cmp.candidate.median_ms * 1e-3) / 1e12, md / mx);
    }
  }
}
