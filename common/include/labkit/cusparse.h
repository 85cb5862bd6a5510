// cuSPARSE error check and an RAII handle.
#pragma once
#include <cusparse.h>

#include "labkit/check.h"

namespace labkit {
class CusparseHandle {
 public:
  CusparseHandle();
  ~CusparseHandle();
  CusparseHandle(const CusparseHandle&) = delete;
  CusparseHandle& operator=(const CusparseHandle&) = delete;
  cusparseHandle_t get() const noexcept { return handle_; }
  operator cusparseHandle_t() const noexcept { return handle_; }

 private:
  cusparseHandle_t handle_ = nullptr;
};
}  // namespace labkit

#define LABKIT_CUSPARSE(call)                                                                        \
  do {                                                                                               \
    cusparseStatus_t labkit_st_ = (call);                                                            \
    if (labkit_st_ != CUSPARSE_STATUS_SUCCESS)                                                       \
      ::labkit::throw_library_error("cuSPARSE", static_cast<int>(labkit_st_),                       \
                                    cusparseGetErrorName(labkit_st_), #call, __FILE__, __LINE__);    \
  } while (0)
