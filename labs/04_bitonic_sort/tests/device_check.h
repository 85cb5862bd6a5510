// Lab 04 gates: the sort checks of gate_util.h, answered on the GPU where the arrays already are.
//
// Why: at 2^22-2^24 keys the host check (download the output, turn both arrays into bit patterns, radix-sort both,
// compare) cost 0.5-1 s per case on the grading machine, most of a gate's wall time, and in a speed gate all of it
// inside the window where the gate has the GPU to itself. On the GPU the same proof takes a few milliseconds.
//
// Each function answers yes or no only. A "no" is never a verdict on its own: the caller then runs the host check
// (check_sort, check_pairs, check_same_runs), which decides and writes the diagnosis. So a gate fails exactly when
// the host check fails, and a "yes" here must imply that the host check passes:
//   - sorted_permutation: the output's bit patterns, radix-sorted, equal the input's (a permutation, NaN payloads
//     and zero signs included) AND no key is followed by a smaller one under labkit::float_order_key;
//   - pairs_kept: the keys are in order as above, the values are a permutation of 0..n-1, and each key is, bit for
//     bit, the input key its value names (which makes the keys a permutation of the input too);
//   - same_bits: two arrays are equal bit for bit.
// Nothing here reads what the student's code computed except the arrays under test: the input copies are made by
// the gate before the step runs. Every kernel and CUB instantiation uses types local to thrust_sort.cu, so no
// symbol from a student's object can stand in for them. (The code lives in thrust_sort.cu, beside the caching
// allocator it shares, because the lab's CMakeLists lists the gate sources.)
#pragma once
#include <cstddef>
#include <cstdint>

namespace lab04_gates::on_device {

// Device memory from the caching allocator of the Thrust baselines: a gate's copies of a large input cost no
// cudaMalloc/cudaFree after the first case of that size. Given back (to the cache) when it goes out of scope.
class ScratchBytes {
 public:
  explicit ScratchBytes(std::size_t bytes);
  ~ScratchBytes();
  ScratchBytes(const ScratchBytes&) = delete;
  ScratchBytes& operator=(const ScratchBytes&) = delete;
  void* get() const noexcept { return ptr_; }

 private:
  char* ptr_ = nullptr;
};

template <class T>
class Scratch {
 public:
  explicit Scratch(std::size_t n) : bytes_(n * sizeof(T)) {}
  T* data() const noexcept { return static_cast<T*>(bytes_.get()); }

 private:
  ScratchBytes bytes_;
};

// cudaMemcpy device to device, then a device-wide synchronization: a step on a stream of its own must see the
// copy finished (GuardedBuffer::upload waits the same way).
void copy(void* dst, const void* src, std::size_t bytes);

bool sorted_permutation(const float* got, const float* in, std::size_t n, bool descending);
bool pairs_kept(const float* keys, const std::uint32_t* values, const float* in, std::size_t n, bool descending,
                std::uint32_t mask);
bool same_bits(const void* a, const void* b, std::size_t bytes);

// values[i] = i ^ mask: the values a key-value sort starts from, written without a host array or an upload. The
// gates' mask (values_mask(), gates.cpp) has its top bit set, so a step that wrote a key's index where its value
// belongs (the values were 0..n-1 once: "argsort") is caught; a value decodes to its key's index with ^ mask.
void fill_index(std::uint32_t* values, std::size_t n, std::uint32_t mask);

}  // namespace lab04_gates::on_device
