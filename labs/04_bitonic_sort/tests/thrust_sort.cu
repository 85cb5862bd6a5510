#include "thrust_sort.h"

#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>

#include <cstddef>
#include <map>

#include "labkit/check.h"

namespace lab04::baseline {

namespace {
// Thrust asks for temporary blocks (the radix sort's second key buffer and CUB's scratch, alive at the same
// time) and gives them back after each call; keeping them avoids a cudaMalloc/cudaFree pair per sort.
class CachingAllocator {
 public:
  using value_type = char;
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() {  // at exit; errors are ignored (the runtime may already be shutting down)
    for (auto& [bytes, p] : free_) cudaFree(p);
    for (auto& [p, bytes] : used_) cudaFree(p);
  }
  char* allocate(std::ptrdiff_t bytes) {
    const std::size_t want = static_cast<std::size_t>(bytes);
    char* p = nullptr;
    auto it = free_.lower_bound(want);  // the smallest cached block that is large enough
    if (it != free_.end()) {
      p = it->second;
      used_[p] = it->first;
      free_.erase(it);
      return p;
    }
    LABKIT_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), want ? want : 1));
    used_[p] = want;
    return p;
  }
  void deallocate(char* p, std::size_t) {
    auto it = used_.find(p);
    if (it == used_.end()) return;
    free_.emplace(it->second, p);
    used_.erase(it);
  }

 private:
  std::multimap<std::size_t, char*> free_;
  std::map<char*, std::size_t> used_;
};

CachingAllocator& allocator() {
  static CachingAllocator a;
  return a;
}
}  // namespace

void thrust_sort(float* keys, std::size_t n) {
  if (n < 2) return;
  thrust::device_ptr<float> k(keys);
  thrust::sort(thrust::cuda::par(allocator()), k, k + n);
  LABKIT_CHECK_LAUNCH();
}

void thrust_sort_by_key(float* keys, std::uint32_t* values, std::size_t n) {
  if (n < 2) return;
  thrust::device_ptr<float> k(keys);
  thrust::device_ptr<std::uint32_t> v(values);
  thrust::sort_by_key(thrust::cuda::par(allocator()), k, k + n, v);
  LABKIT_CHECK_LAUNCH();
}

}  // namespace lab04::baseline
