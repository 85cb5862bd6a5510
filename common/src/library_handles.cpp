// cuBLAS and cuSPARSE handles and status names (labkit/cublas.h, labkit/cusparse.h), apart from check.cpp so that a
// program that uses only labkit's CUDA error checks does not load those libraries.
#include "labkit/cublas.h"
#include "labkit/cusparse.h"

namespace labkit {

const char* cublas_status_name(cublasStatus_t status) noexcept {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

CublasHandle::CublasHandle() { LABKIT_CUBLAS(cublasCreate(&handle_)); }
CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);
}
CusparseHandle::CusparseHandle() { LABKIT_CUSPARSE(cusparseCreate(&handle_)); }
CusparseHandle::~CusparseHandle() {
  if (handle_) cusparseDestroy(handle_);
}

}  // namespace labkit
