// labkit::HugeDeviceArray (huge.h): a long virtual range over one repeated chunk of device memory and a tail.
#include "labkit/huge.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "labkit/check.h"
#include "labkit/random.h"

namespace labkit {

namespace {

// The driver functions, from the runtime's entry points (no link to libcuda; see huge.h).
struct Driver {
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  std::string missing;  // the first entry point not found
};

template <class F>
void entry(const char* name, F*& fn, std::string& missing) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !p) {
    (void)cudaGetLastError();
    if (missing.empty()) missing = name;
    return;
  }
  fn = reinterpret_cast<F*>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    entry("cuDeviceGet", r.device_get, r.missing);
    entry("cuDeviceGetAttribute", r.attribute, r.missing);
    entry("cuMemGetAllocationGranularity", r.granularity, r.missing);
    entry("cuMemCreate", r.create, r.missing);
    entry("cuMemRelease", r.release, r.missing);
    entry("cuMemAddressReserve", r.reserve, r.missing);
    entry("cuMemAddressFree", r.address_free, r.missing);
    entry("cuMemMap", r.map, r.missing);
    entry("cuMemUnmap", r.unmap, r.missing);
    entry("cuMemSetAccess", r.set_access, r.missing);
    return r;
  }();
  return d;
}

CUdevice current_device() {
  int ordinal = 0;
  LABKIT_CUDA(cudaGetDevice(&ordinal));
  LABKIT_CUDA(cudaFree(nullptr));  // the primary context exists and is current: the driver calls below use it
  CUdevice dev = 0;
  if (driver().device_get(&dev, ordinal) != CUDA_SUCCESS) throw std::runtime_error("cuDeviceGet failed");
  return dev;
}

CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

void check(CUresult r, const char* what, std::size_t bytes) {
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string("HugeDeviceArray: ") + what + " failed (CUresult " + std::to_string(int(r)) +
                             ") for a range of " + std::to_string(bytes) + " bytes");
}

}  // namespace

std::string HugeDeviceArray::unavailable() {
  const Driver& d = driver();
  if (!d.missing.empty()) return "the driver has no " + d.missing;
  int supported = 0;
  if (d.attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, current_device()) !=
          CUDA_SUCCESS ||
      !supported)
    return "the device does not support virtual memory management (cuMemMap)";
  return "";
}

HugeDeviceArray::HugeDeviceArray(std::size_t bytes, std::size_t tail_bytes, std::size_t chunk_bytes) {
  if (const std::string why = unavailable(); !why.empty()) throw std::runtime_error("HugeDeviceArray: " + why);
  const Driver& d = driver();
  const CUmemAllocationProp prop = device_prop(current_device());
  std::size_t gran = 0;
  check(d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity", bytes);
  chunk_bytes_ = round_up(chunk_bytes ? chunk_bytes : gran, gran);
  tail_bytes_ = round_up(tail_bytes ? tail_bytes : gran, gran);
  bytes_ = round_up(bytes, gran);
  if (bytes_ < tail_bytes_) bytes_ = tail_bytes_;
  // The driver maps a handle whole (a prefix of one is CUDA_ERROR_NOT_SUPPORTED, seen on an H200): the body is a
  // whole number of chunks, and the tail takes what is left over.
  tail_bytes_ = bytes_ - (bytes_ - tail_bytes_) / chunk_bytes_ * chunk_bytes_;
  try {
    check(d.reserve(&base_, bytes_, gran, 0, 0), "cuMemAddressReserve", bytes_);
    check(d.create(&chunk_handle_, chunk_bytes_, &prop, 0), "cuMemCreate (chunk)", bytes_);
    check(d.create(&tail_handle_, tail_bytes_, &prop, 0), "cuMemCreate (tail)", bytes_);
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    // The chunk again and again up to the tail, then the tail; each mapping made readable and writable on its own.
    const std::size_t body = tail_offset();
    for (std::size_t off = 0; off < body; off += chunk_bytes_) {
      check(d.map(base_ + off, chunk_bytes_, 0, chunk_handle_, 0), "cuMemMap (chunk)", bytes_);
      mapped_ = off + chunk_bytes_;
      check(d.set_access(base_ + off, chunk_bytes_, &access, 1), "cuMemSetAccess (chunk)", bytes_);
    }
    check(d.map(base_ + body, tail_bytes_, 0, tail_handle_, 0), "cuMemMap (tail)", bytes_);
    mapped_ = bytes_;
    check(d.set_access(base_ + body, tail_bytes_, &access, 1), "cuMemSetAccess (tail)", bytes_);
  } catch (...) {
    release();
    throw;
  }
}

HugeDeviceArray::~HugeDeviceArray() { release(); }

void HugeDeviceArray::release() noexcept {
  const Driver& d = driver();
  // Kernels still reading the range finish first; no throw from here (a sticky error shows at the next checked call).
  cudaDeviceSynchronize();
  if (mapped_) d.unmap(base_, mapped_);
  if (chunk_handle_) d.release(chunk_handle_);
  if (tail_handle_) d.release(tail_handle_);
  if (base_) d.address_free(base_, bytes_);
  mapped_ = 0, chunk_handle_ = tail_handle_ = 0, base_ = 0;
}

void HugeDeviceArray::copy_in(std::size_t offset, const void* host, std::size_t bytes, std::size_t expected,
                              const char* what) {
  if (bytes != expected) throw std::invalid_argument(std::string("HugeDeviceArray::") + what + ": wrong size");
  LABKIT_CUDA(cudaMemcpy(static_cast<unsigned char*>(data()) + offset, host, bytes, cudaMemcpyHostToDevice));
  LABKIT_CUDA(cudaDeviceSynchronize());  // landed before a step on any stream reads it
}

void HugeDeviceArray::copy_out(void* host, std::size_t bytes) const {
  LABKIT_CUDA(cudaMemcpy(host, static_cast<const unsigned char*>(data()) + tail_offset(), bytes,
                         cudaMemcpyDeviceToHost));
}

KnownHugeFloats fill_random(HugeDeviceArray& array, std::uint64_t seed) {
  KnownHugeFloats known;
  known.chunk = random_floats(array.chunk_bytes() / sizeof(float), derive_seed(seed, "chunk"));
  known.tail = random_floats(array.tail_bytes() / sizeof(float), derive_seed(seed, "tail"));
  known.first = array.tail_offset() / sizeof(float);
  array.fill_chunk(known.chunk);
  array.fill_tail(known.tail);
  return known;
}

}  // namespace labkit
