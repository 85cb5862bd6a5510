// Error checks: every CUDA, cuBLAS and cuSPARSE call goes through one of these macros, so a failure throws with
// the file, the line and the call as written, instead of surfacing three calls later as a wrong answer.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace labkit {

// A failed CUDA runtime call. sticky() is true for errors that destroy the context (an illegal address in a
// kernel, a trap, ...): after one of those every later CUDA call in the process fails too.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  cudaError_t code() const noexcept { return code_; }
  bool sticky() const noexcept;

 private:
  cudaError_t code_;
};

// A failed library call (cuBLAS, cuSPARSE): status is the library's own enum value.
class LibraryError : public std::runtime_error {
 public:
  LibraryError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

// True for the errors after which the CUDA context is unusable for the rest of the process.
bool is_sticky(cudaError_t code) noexcept;

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_library_error(const char* library, int status, const char* status_name, const char* call,
                                      const char* file, int line);

}  // namespace labkit

#define LABKIT_CUDA(call)                                                                    \
  do {                                                                                       \
    cudaError_t labkit_err_ = (call);                                                        \
    if (labkit_err_ != cudaSuccess) ::labkit::throw_cuda_error(labkit_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After every <<<...>>>: a bad configuration (too many threads, too much shared memory) is reported here;
// faults inside the kernel surface at the next synchronizing call.
#define LABKIT_CHECK_LAUNCH() LABKIT_CUDA(cudaGetLastError())
