// Arrays past 2^31 elements without the memory they would take. Index arithmetic in 32 bits (`int i = blockIdx.x *
// blockDim.x + threadIdx.x`, `r * cols + c` in int, cuBLAS's int count) breaks only past 2^31 elements, and a float
// array that long is 8 GiB: too much for a correctness gate beside other labs on one GPU. A HugeDeviceArray is a
// virtual address range of any length whose pages all map one small chunk of device memory, over and over, except
// the last ones, which have memory of their own (the tail). Every address of the range can be read and written, and
// a kernel runs over it at cache speed; the elements whose values mean something are those of the tail.
//
//   element i (bytes i*sizeof(T)): chunk[i mod chunk elements] below tail_offset(), its own memory from there on.
//
// A gate fills the chunk and the tail with known values (fill_chunk, fill_tail): then every element's value is
// known to the host without a copy of the range. Writes below the tail land in the shared chunk (many elements,
// one location, in any order), so a gate checks what a step wrote only in the tail, and a step whose index wraps
// at 2^31 either misses the tail or leaves the range (an illegal address).
//
// The driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap) is reached through the
// runtime's driver entry points, so the gate binaries need no link to libcuda and still run their CPU gates on a
// machine without a driver.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace labkit {

class HugeDeviceArray {
 public:
  // A range of at least `bytes`, whose last `tail_bytes` (at least) have memory of their own; the rest maps a chunk
  // of `chunk_bytes` a whole number of times. All three are rounded up to the allocation granularity (2 MiB on
  // current GPUs), and the tail grows by what is left after the whole chunks (up to one chunk more). Throws
  // std::runtime_error with the driver's reason when the mapping fails.
  HugeDeviceArray(std::size_t bytes, std::size_t tail_bytes, std::size_t chunk_bytes = std::size_t(16) << 20);
  ~HugeDeviceArray();
  HugeDeviceArray(const HugeDeviceArray&) = delete;
  HugeDeviceArray& operator=(const HugeDeviceArray&) = delete;

  void* data() const { return reinterpret_cast<void*>(base_); }
  std::size_t bytes() const { return bytes_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::size_t tail_offset() const { return bytes_ - tail_bytes_; }
  std::size_t tail_bytes() const { return tail_bytes_; }

  // Copies `host` (chunk_bytes() of it) into the chunk, or into the tail (tail_bytes()); both wait for the copy.
  template <class T>
  void fill_chunk(const std::vector<T>& host) {
    if (tail_offset() == 0) throw std::logic_error("HugeDeviceArray::fill_chunk: the range is all tail");
    copy_in(0, host.data(), host.size() * sizeof(T), chunk_bytes_, "fill_chunk");
  }
  template <class T>
  void fill_tail(const std::vector<T>& host) {
    copy_in(tail_offset(), host.data(), host.size() * sizeof(T), tail_bytes_, "fill_tail");
  }
  // The tail as elements of T (tail_bytes() / sizeof(T) of them).
  template <class T>
  std::vector<T> read_tail() const {
    std::vector<T> host(tail_bytes_ / sizeof(T));
    copy_out(host.data(), host.size() * sizeof(T));
    return host;
  }

  // "" when the current device can map such a range; otherwise why not (a gate leaves its huge case out then, and
  // says so).
  static std::string unavailable();

 private:
  void release() noexcept;
  void copy_in(std::size_t offset, const void* host, std::size_t bytes, std::size_t expected, const char* what);
  void copy_out(void* host, std::size_t bytes) const;
  unsigned long long base_ = 0;
  std::size_t bytes_ = 0, chunk_bytes_ = 0, tail_bytes_ = 0;
  unsigned long long chunk_handle_ = 0, tail_handle_ = 0;
  std::size_t mapped_ = 0;  // bytes mapped from base_ on, for the destructor
};

// An input range whose every element the host knows: the chunk and the tail filled with random floats (from two
// seeds derived from `seed`), kept on the host. at(i) is element i's value, the chunk's below the tail.
struct KnownHugeFloats {
  std::vector<float> chunk, tail;
  std::size_t first = 0;  // the tail's first element
  float at(std::size_t i) const { return i < first ? chunk[i % chunk.size()] : tail[i - first]; }
};
KnownHugeFloats fill_random(HugeDeviceArray& array, std::uint64_t seed);

}  // namespace labkit
