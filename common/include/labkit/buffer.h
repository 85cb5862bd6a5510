// RAII device and pinned host buffers. Move-only; a buffer of size 0 holds no allocation.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "labkit/check.h"

namespace labkit {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : size_(n) {
    if (n) LABKIT_CUDA(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() noexcept { return ptr_; }
  const T* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }

  // Returns with the data on the device: a cudaMemcpy from pageable memory may return once the bytes are staged,
  // before its DMA lands, and a step on a non-blocking stream of its own is not ordered after it.
  void upload(const T* host, std::size_t n) {
    if (!n) return;
    LABKIT_CUDA(cudaMemcpy(ptr_, host, n * sizeof(T), cudaMemcpyHostToDevice));
    LABKIT_CUDA(cudaStreamSynchronize(0));
  }
  void upload(const std::vector<T>& host) { upload(host.data(), host.size() < size_ ? host.size() : size_); }
  void download(T* host, std::size_t n) const {
    if (n) LABKIT_CUDA(cudaMemcpy(host, ptr_, n * sizeof(T), cudaMemcpyDeviceToHost));
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    download(host.data(), size_);
    return host;
  }
  // Returns with the bytes set, for the same reason as upload: cudaMemset of device memory may return before the
  // device has done it.
  void fill_bytes(unsigned char byte) {
    if (!size_) return;
    LABKIT_CUDA(cudaMemset(ptr_, byte, bytes()));
    LABKIT_CUDA(cudaStreamSynchronize(0));
  }

 private:
  void release() noexcept {
    if (ptr_) cudaFree(ptr_);  // no throw from a destructor; a sticky error is reported by the next checked call
    ptr_ = nullptr;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory: the copy engines read it directly, so transfers reach full PCIe/NVLink speed.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t n) : size_(n) {
    if (n) LABKIT_CUDA(cudaMallocHost(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFreeHost(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* data() noexcept { return ptr_; }
  const T* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return ptr_[i]; }
  const T& operator[](std::size_t i) const noexcept { return ptr_[i]; }

 private:
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace labkit
