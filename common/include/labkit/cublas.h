// cuBLAS error check and an RAII handle.
#pragma once
#include <cublas_v2.h>

#include "labkit/check.h"

namespace labkit {
const char* cublas_status_name(cublasStatus_t status) noexcept;

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const noexcept { return handle_; }
  operator cublasHandle_t() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};
}  // namespace labkit

#define LABKIT_CUBLAS(call)                                                                         \
  do {                                                                                              \
    cublasStatus_t labkit_st_ = (call);                                                             \
    if (labkit_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::labkit::throw_library_error("cuBLAS", static_cast<int>(labkit_st_),                        \
                                    ::labkit::cublas_status_name(labkit_st_), #call, __FILE__, __LINE__); \
  } while (0)
