// Lab 05 reference, step 4: saxpy with cublasSaxpy.
#include <algorithm>
#include <stdexcept>

#include "labkit/cublas.h"
#include "labkit/labkit.h"
#include "saxpy.h"

namespace lab05 {

namespace {

void check_args(std::size_t n, const float* x, const float* y) {
  if (n > 0 && (x == nullptr || y == nullptr)) throw std::invalid_argument("lab05: null device pointer with n > 0");
}

}  // namespace

// cublasSaxpy takes an int count: larger arrays go in chunks (2^30 elements, far beyond where launch overhead
// matters). alpha is read from host memory in the handle's default pointer mode.
void saxpy_cublas(cublasHandle_t handle, std::size_t n, float a, const float* x, float* y) {
  check_args(n, x, y);
  constexpr std::size_t kChunk = std::size_t(1) << 30;
  for (std::size_t off = 0; off < n; off += kChunk) {
    const int m = static_cast<int>(std::min(kChunk, n - off));
    LABKIT_CUBLAS(cublasSaxpy(handle, m, &a, x + off, 1, y + off, 1));
  }
}

}  // namespace lab05
