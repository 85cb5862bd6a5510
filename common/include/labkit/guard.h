// Guard bands and poison. A GuardedBuffer is a device array with 64 KiB of a known byte pattern before and after
// it: a kernel that writes out of bounds changes the pattern and check_guards() says where. poison() fills the
// array itself with a value no correct kernel produces (a NaN with a payload, or an unlikely integer), so that an
// element the kernel never wrote is told apart from one it computed wrongly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <string>
#include <vector>

#include "labkit/buffer.h"

namespace labkit {

template <class T>
T poison_value() {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "poison is defined for 4- and 8-byte elements");
  T v;
  if constexpr (sizeof(T) == 4) {
    std::uint32_t bits = std::is_floating_point_v<T> ? 0x7FC0DEADu : 0x7EADBEEFu;
    std::memcpy(&v, &bits, 4);
  } else {
    std::uint64_t bits = std::is_floating_point_v<T> ? 0x7FF8DEADDEADDEADull : 0x7EADBEEFDEADBEEFull;
    std::memcpy(&v, &bits, 8);
  }
  return v;
}

template <class T>
bool is_poison(const T& v) {
  T p = poison_value<T>();
  return std::memcmp(&v, &p, sizeof(T)) == 0;
}

// Fill `count` elements of `elem_size` bytes (4 or 8) with a bit pattern, on the device.
void fill_pattern_device(void* dev, std::size_t count, std::size_t elem_size, std::uint64_t pattern);

struct GuardReport {
  bool ok = true;
  std::size_t before = 0, after = 0;  // bytes changed in each band
  std::ptrdiff_t first_before = 0;    // offset (in elements, negative) of the lowest changed byte before the array
  std::size_t first_after = 0;        // offset (in elements) past the end of the first changed byte after it
  std::string message;                // empty when ok
};

GuardReport check_guard_bytes(const std::vector<unsigned char>& before, const std::vector<unsigned char>& after,
                              std::size_t elem_size, const std::string& name);

// 0xFF bytes are a NaN in float and double. Arithmetic on a NaN returns the canonical NaN (different bits), so
// even an out-of-bounds `C[i] += 0.0f` — what a thread past the edge of a zero-padded tile does — is detected.
constexpr unsigned char kGuardByte = 0xFF;
constexpr std::size_t kGuardBytes = 64 * 1024;

template <class T>
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t n, std::string name = "output")
      : n_(n), name_(std::move(name)), storage_(n + 2 * guard_elems()) {
    storage_.fill_bytes(kGuardByte);
  }
  T* data() noexcept { return storage_.data() + guard_elems(); }
  const T* data() const noexcept { return storage_.data() + guard_elems(); }
  std::size_t size() const noexcept { return n_; }
  const std::string& name() const noexcept { return name_; }

  void poison() { fill_pattern_device(data(), n_, sizeof(T), bits(poison_value<T>())); }
  void upload(const std::vector<T>& host) {
    if (n_) LABKIT_CUDA(cudaMemcpy(data(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) LABKIT_CUDA(cudaMemcpy(host.data(), data(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  GuardReport check_guards() const {
    std::vector<unsigned char> lo(kGuardBytes), hi(kGuardBytes);
    LABKIT_CUDA(cudaMemcpy(lo.data(), storage_.data(), kGuardBytes, cudaMemcpyDeviceToHost));
    LABKIT_CUDA(cudaMemcpy(hi.data(), data() + n_, kGuardBytes, cudaMemcpyDeviceToHost));
    return check_guard_bytes(lo, hi, sizeof(T), name_);
  }

 private:
  static constexpr std::size_t guard_elems() { return kGuardBytes / sizeof(T); }
  static std::uint64_t bits(T v) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
  }
  std::size_t n_;
  std::string name_;
  DeviceBuffer<T> storage_;
};

}  // namespace labkit
