// The library baseline of lab 07, shared by the gates and the bench: SpMV through cuSPARSE's generic API and CG
// the way NVIDIA's conjugateGradient sample writes it (cusparseSpMV + cublasDdot/Daxpy/Dscal/Dcopy, scalars in
// host pointer mode, so every dot product is a round trip to the host).
#pragma once
#include <cublas_v2.h>
#include <cusparse.h>

#include <cmath>

#include "cg.h"
#include "labkit/buffer.h"
#include "labkit/cublas.h"
#include "labkit/cusparse.h"

namespace lab07_baseline {

// y = A x with cusparseSpMV (CSR, 32-bit indices, double). The dense-vector descriptors are re-pointed with
// cusparseDnVecSetValues, so one object serves any x and y of the right sizes.
class CusparseSpmv {
 public:
  CusparseSpmv(cusparseHandle_t handle, const lab07::DeviceCsr& A, const double* x, double* y) : h_(handle) {
    LABKIT_CUSPARSE(cusparseCreateCsr(&mat_, A.rows, A.cols, A.nnz, const_cast<int*>(A.row_ptr),
                                      const_cast<int*>(A.col_idx), const_cast<double*>(A.values), CUSPARSE_INDEX_32I,
                                      CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    LABKIT_CUSPARSE(cusparseCreateDnVec(&vx_, A.cols, const_cast<double*>(x), CUDA_R_64F));
    LABKIT_CUSPARSE(cusparseCreateDnVec(&vy_, A.rows, y, CUDA_R_64F));
    std::size_t bytes = 0;
    const double one = 1, zero = 0;
    LABKIT_CUSPARSE(cusparseSpMV_bufferSize(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat_, vx_, &zero, vy_,
                                            CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
    buffer_ = labkit::DeviceBuffer<unsigned char>(bytes ? bytes : 1);
  }
  ~CusparseSpmv() {
    if (vy_) cusparseDestroyDnVec(vy_);
    if (vx_) cusparseDestroyDnVec(vx_);
    if (mat_) cusparseDestroySpMat(mat_);
  }
  CusparseSpmv(const CusparseSpmv&) = delete;
  CusparseSpmv& operator=(const CusparseSpmv&) = delete;

  void operator()(const double* x, double* y) {
    LABKIT_CUSPARSE(cusparseDnVecSetValues(vx_, const_cast<double*>(x)));
    LABKIT_CUSPARSE(cusparseDnVecSetValues(vy_, y));
    const double one = 1, zero = 0;
    LABKIT_CUSPARSE(cusparseSpMV(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat_, vx_, &zero, vy_, CUDA_R_64F,
                                 CUSPARSE_SPMV_ALG_DEFAULT, buffer_.data()));
  }

 private:
  cusparseHandle_t h_;
  cusparseSpMatDescr_t mat_ = nullptr;
  cusparseDnVecDescr_t vx_ = nullptr, vy_ = nullptr;
  labkit::DeviceBuffer<unsigned char> buffer_;
};

// NVIDIA-sample CG from x = 0: at most max_iter iterations, stopping when ||r||^2 <= tol^2 ||b||^2 (tol = 0: run
// all max_iter). Returns the iterations done. The cuBLAS handle must be in host pointer mode (its default).
inline int cusparse_cublas_cg(cublasHandle_t blas, cusparseHandle_t sparse, const lab07::DeviceCsr& A,
                              const double* b, double* x, double tol, int max_iter) {
  const int n = A.rows;
  labkit::DeviceBuffer<double> r(n), p(n), Ap(n);
  LABKIT_CUDA(cudaMemset(x, 0, sizeof(double) * std::size_t(n)));
  LABKIT_CUDA(cudaMemcpy(r.data(), b, sizeof(double) * std::size_t(n), cudaMemcpyDeviceToDevice));
  CusparseSpmv spmv(sparse, A, p.data(), Ap.data());
  double r1 = 0, r0 = 0, pAp = 0;
  LABKIT_CUBLAS(cublasDdot(blas, n, r.data(), 1, r.data(), 1, &r1));
  const double stop = tol * tol * r1;
  int k = 0;
  while (r1 > stop && k < max_iter) {
    if (k > 0) {
      const double beta = r1 / r0, one = 1;
      LABKIT_CUBLAS(cublasDscal(blas, n, &beta, p.data(), 1));
      LABKIT_CUBLAS(cublasDaxpy(blas, n, &one, r.data(), 1, p.data(), 1));
    } else {
      LABKIT_CUBLAS(cublasDcopy(blas, n, r.data(), 1, p.data(), 1));
    }
    spmv(p.data(), Ap.data());
    LABKIT_CUBLAS(cublasDdot(blas, n, p.data(), 1, Ap.data(), 1, &pAp));
    const double alpha = r1 / pAp, minus_alpha = -alpha;
    LABKIT_CUBLAS(cublasDaxpy(blas, n, &alpha, p.data(), 1, x, 1));
    LABKIT_CUBLAS(cublasDaxpy(blas, n, &minus_alpha, Ap.data(), 1, r.data(), 1));
    r0 = r1;
    LABKIT_CUBLAS(cublasDdot(blas, n, r.data(), 1, r.data(), 1, &r1));
    ++k;
  }
  return k;
}

}  // namespace lab07_baseline
