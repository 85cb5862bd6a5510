#include "labkit/check.h"

#include <sstream>


namespace labkit {

bool is_sticky(cudaError_t code) noexcept {
  switch (code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

bool CudaError::sticky() const noexcept { return is_sticky(code_); }

static const char* hint_for(cudaError_t code) {
  switch (code) {
    case cudaErrorIllegalAddress:
      return " (a kernel read or wrote outside its allocations: check index bounds; run compute-sanitizer)";
    case cudaErrorInvalidConfiguration:
      return " (launch configuration: more than 1024 threads per block, a zero-sized grid, or too much shared memory)";
    case cudaErrorMemoryAllocation:
      return " (the device is out of memory)";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return " (no usable GPU: run `labgrade doctor`)";
    case cudaErrorNoKernelImageForDevice:
      return " (the binary has no code for this GPU's architecture: reconfigure with the gpu preset)";
    default:
      return "";
  }
}

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::ostringstream os;
  os << file << ":" << line << ": " << call << " failed: " << cudaGetErrorName(code) << ": "
     << cudaGetErrorString(code) << hint_for(code);
  throw CudaError(code, os.str());
}

void throw_library_error(const char* library, int status, const char* status_name, const char* call,
                         const char* file, int line) {
  std::ostringstream os;
  os << file << ":" << line << ": " << call << " failed: " << library << " " << status_name << " (" << status << ")";
  throw LibraryError(status, os.str());
}

}  // namespace labkit
