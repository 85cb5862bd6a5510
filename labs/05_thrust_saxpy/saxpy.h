// Lab 05: Thrust, saxpy and friends. The same memory-bound operation, y <- a*x + y, written by hand, with Thrust
// (a functor, then a device lambda), with cuBLAS, fused with a reduction, mixed with raw CUDA memory, and the
// library algorithms (generate, sort, reduce) around it.
//
// Device-pointer functions take DEVICE pointers to contiguous float arrays of n elements. n == 0 is a no-op and
// then the pointers may be null; n > 0 with a null pointer throws std::invalid_argument. x and y must not overlap.
// Work goes on the default stream; functions that return a value computed on the device (a norm, a count) wait for
// it, the others may return before the work is done (the gates synchronize).
//
// This header is plain C++ (no Thrust types), so that the gates compile with the host compiler; Thrust lives in
// the .cu files behind it.
#pragma once
#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lab05 {

// Step 1: a hand-written kernel with a grid-stride loop (a fixed grid that covers any n).
void saxpy_kernel(std::size_t n, float a, const float* x, float* y);

// Step 2: thrust::transform over thrust::device_ptr wrappers of x and y, with a __host__ __device__ functor.
void saxpy_thrust_functor(std::size_t n, float a, const float* x, float* y);

// Step 3: the same with a __device__ lambda (needs nvcc --extended-lambda) or Thrust placeholders (a * _1 + _2).
void saxpy_thrust_lambda(std::size_t n, float a, const float* x, float* y);

// Step 4: cublasSaxpy (int sizes: larger n must still work).
void saxpy_cublas(cublasHandle_t handle, std::size_t n, float a, const float* x, float* y);

// Step 5: y <- a*x + y and return ||y||_2 of the NEW y (as a double).
//   unfused: two passes over memory (a saxpy, then a reduction over y): reads x, y, writes y, reads y again.
//   fused:   one pass (thrust::transform_reduce, or your own kernel): reads x, y, writes y, sums the squares.
// Any correct summation order is accepted (relative tolerance 2^-13 on the norm); NaN/Inf propagate as IEEE says.
double saxpy_norm_unfused(std::size_t n, float a, const float* x, float* y);
double saxpy_norm_fused(std::size_t n, float a, const float* x, float* y);

// Step 6: interop between Thrust-owned and raw CUDA memory.
//   (a) y <- a*x + y for HOST vectors of equal size: copy them into thrust::device_vector, run YOUR step-1 kernel
//       on thrust::raw_pointer_cast of them, copy y back. Sizes differ: std::invalid_argument.
//   (b) how many of the n floats at the raw device pointer x (from cudaMalloc) are NaN or +-Inf: a Thrust algorithm
//       (thrust::count_if) on thrust::device_ptr<const float>(x).
void saxpy_device_vector(float a, const std::vector<float>& x, std::vector<float>& y);
std::size_t count_nonfinite(const float* x, std::size_t n);

// Step 7: library algorithms around the data.
//   (a) out[i] = labkit::uniform_float(seed, i, lo, hi) for i < n, generated ON THE DEVICE (thrust::tabulate, or
//       thrust::transform over a counting_iterator): bit-identical to labkit::random_floats(n, seed, lo, hi).
//   (b) the round trip host -> device -> sort -> sum -> host: sorts `data` ascending in place (no NaNs in it) and
//       returns the sum in double with the time of each phase, measured separately with CUDA events.
void fill_uniform(float* out, std::size_t n, std::uint64_t seed, float lo, float hi);

struct SortSumReport {
  double sum = 0;        // sum of the elements, accumulated in double
  double h2d_ms = 0;     // host -> device copy
  double sort_ms = 0;    // thrust::sort on the device
  double reduce_ms = 0;  // thrust::reduce on the device (the result reaches the host)
  double d2h_ms = 0;     // device -> host copy of the sorted data
};
SortSumReport sort_and_sum(std::vector<float>& data);

}  // namespace lab05
