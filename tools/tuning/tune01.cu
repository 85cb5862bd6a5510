// Tuning harness for lab 01 steps 5 and 6 (see tools/tuning/README.md): times the configurations of the step-5
// sub-steps (5c one buffer, 5d BK = 8, 5e BK = 16 with two blocks per SM, 5f 5e plus grouped block order; other
// group sizes: edit kGroup in solutions/01_matmul/step5f_tuned.cu and rebuild) and of step 6's asynchronous-copy
// pipeline (block tile, warp width 32 or 64 columns, k-tile depth, stages, blocks per SM, FMA order; names read
// "BMxBN wWN kBK sSTAGES bBLOCKS", in step 6's paired-snake FMA order unless they say rows or columns) against the
// lab's trusted cuBLAS call at 2048^3, 4096^3 and 8192^3, after checking each against cuBLAS on two odd shapes (one
// with misaligned pointers) and on each square.
// Includes step 6's .cu to reach its kernel template; links the step-5 files.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../solutions/01_matmul/step6_async_pipeline.cu"
#include "labkit/buffer.h"
#include "labkit/random.h"
#include "tests/cublas_baseline.h"
#include "tune01_square.h"

namespace {

struct Variant {
  std::string name;
  tune01::Matmul f;
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool profile = argc > 1 && std::strcmp(argv[1], "--profile") == 0;
  labkit::CublasHandle h;
  std::vector<Variant> variants = {
      {"5c (one buffer)", lab01::matmul_vector_loads},
      {"5d (BK 8)", lab01::matmul_double_buffer},
      {"5e (BK 16, 2/SM)", lab01::matmul_launch_bounds},
      {"5f (+ grouped)", lab01::matmul_tuned},
      {"128x128 w32 k8 s3 b2", lab01::launch_async_pipeline<128, 128, 8, 3, 32, 2>},
      {"128x128 w32 k16 s3 b2", lab01::launch_async_pipeline<128, 128, 16, 3, 32, 2>},
      {"128x128 w64 k8 s2 b2 rows", lab01::launch_async_pipeline<128, 128, 8, 2, 64, 2, lab01::FmaOrder::rows>},
      {"128x128 w64 k8 s2 b2 columns", lab01::launch_async_pipeline<128, 128, 8, 2, 64, 2, lab01::FmaOrder::columns>},
      {"128x128 w64 k8 s2 b2 (step 6)", lab01::launch_async_pipeline<128, 128, 8, 2, 64, 2>},
      {"128x128 w64 k8 s3 b2", lab01::launch_async_pipeline<128, 128, 8, 3, 64, 2>},
      {"128x128 w64 k8 s4 b2", lab01::launch_async_pipeline<128, 128, 8, 4, 64, 2>},
      {"128x128 w64 k16 s2 b2", lab01::launch_async_pipeline<128, 128, 16, 2, 64, 2>},
      {"128x128 w64 k16 s3 b2", lab01::launch_async_pipeline<128, 128, 16, 3, 64, 2>},
      {"64x128 w64 k8 s2 b4", lab01::launch_async_pipeline<64, 128, 8, 2, 64, 4>},
      {"128x64 w64 k8 s2 b4", lab01::launch_async_pipeline<128, 64, 8, 2, 64, 4>},
      {"128x256 w64 k8 s3 b1", lab01::launch_async_pipeline<128, 256, 8, 3, 64, 1>},
      {"256x128 w64 k8 s3 b1", lab01::launch_async_pipeline<256, 128, 8, 3, 64, 1>},
  };
  if (profile) {  // one call each at 4096^3, for a profiler (ncu --kernel-name regex:"matmul|gemm"): cuBLAS, 5f, 6
    tune01::SquareProblem sq(h, 4096);
    sq.cublas();
    sq.run(lab01::matmul_tuned);
    sq.run(lab01::matmul_async_pipeline);
    LABKIT_CUDA(cudaDeviceSynchronize());
    return 0;
  }
  // Correctness: odd shapes, one with every pointer 4 bytes past a 16-byte boundary (the scalar path), one aligned
  // with N % 4 == 0 (the 16-byte path at the edges).
  for (const int off : {1, 0}) {
    const int M = 1037, N = off ? 1031 : 1028, K = 517;
    labkit::DeviceBuffer<float> A(std::size_t(M) * K + 4), B(std::size_t(K) * N + 4), C(std::size_t(M) * N + 4),
        C2(std::size_t(M) * N + 4);
    labkit::fill_random_device(A.data(), A.size(), 11);
    labkit::fill_random_device(B.data(), B.size(), 12);
    for (const auto& v : variants) {
      LABKIT_CUDA(cudaMemset(C.data(), 0, C.size() * 4));
      LABKIT_CUDA(cudaMemset(C2.data(), 0, C2.size() * 4));
      lab01::baseline::sgemm_rowmajor(h, M, N, K, A.data() + off, B.data() + off, C.data() + off);
      v.f(M, N, K, A.data() + off, B.data() + off, C2.data() + off);
      LABKIT_CUDA(cudaDeviceSynchronize());
      const double e = tune01::relerr(C.download(), C2.download());
      std::printf("odd %dx%dx%d offset %d %-24s relerr %.2e %s\n", M, N, K, off, v.name.c_str(), e,
                  e < 1e-5 ? "ok" : "WRONG");
    }
  }
  const std::vector<int> sizes = quick ? std::vector<int>{4096} : std::vector<int>{2048, 4096, 8192};
  for (int n : sizes) {
    tune01::SquareProblem sq(h, n);
    for (const auto& v : variants) {
      const double e = sq.check(v.f);
      const auto cmp = sq.time(v.f, 400);
      std::printf("n=%d %-24s ratio %.3f  cublas %.3f ms  variant %.3f ms  %.1f TFLOP/s  relerr %.2e%s\n", n,
                  v.name.c_str(), cmp.ratio, cmp.baseline.median_ms, cmp.candidate.median_ms,
                  2.0 * n * double(n) * n / (cmp.candidate.median_ms * 1e-3) / 1e12, e, e < 1e-5 ? "" : " WRONG");
    }
  }
}
