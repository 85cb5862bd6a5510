// labkit::SlotBatch (slot_batch.h): many small calls of a step in one input and one output buffer.
#include "labkit/slot_batch.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "labkit/check.h"
#include "labkit/random.h"

namespace labkit {

namespace {

constexpr std::size_t kAlignFloats = 64;  // 256 bytes, cudaMalloc's alignment

std::size_t aligned(std::size_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Where each call's pointer lands in the input (or output) buffer, and the buffer's length in `total`.
std::vector<std::size_t> layout(const std::vector<SlotBatch::Call>& calls, bool input, std::size_t& total) {
  std::vector<std::size_t> at;
  std::size_t pos = 0;
  for (const auto& c : calls) {
    const std::size_t start = aligned(pos) + (input ? c.in_shift : c.out_shift);
    at.push_back(start);
    pos = start + (input ? c.in_count : c.out_count) + SlotBatch::kGapFloats;
  }
  total = std::max<std::size_t>(pos, 1);
  return at;
}

std::uint32_t bits_of(float v) {
  std::uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

}  // namespace

SlotBatch::SlotBatch(std::vector<Call> calls, std::uint64_t seed)
    : calls_(std::move(calls)),
      in_at_(layout(calls_, true, in_total_)),
      out_at_(layout(calls_, false, out_total_)),
      in_host_(random_floats(in_total_, seed)),
      din_(in_total_, "in (all the calls' inputs)"),
      dout_(out_total_, "out (all the calls' outputs)") {
  din_.upload(in_host_);
}

std::vector<float> SlotBatch::run(const std::function<void()>& launch_all) {
  dout_.poison();
  launch_all();
  LABKIT_CUDA(cudaDeviceSynchronize());  // a fault in any call surfaces here
  return dout_.download();
}

bool SlotBatch::matches(const std::vector<float>& out,
                        const std::function<long long(int k, std::size_t j)>& source) const {
  if (out.size() != out_total_) return false;
  std::size_t p = 0;
  auto poison_until = [&](std::size_t end) {
    for (; p < end; ++p)
      if (!is_poison(out[p])) return false;
    return true;
  };
  for (int k = 0; k < calls(); ++k) {
    if (!poison_until(out_at_[std::size_t(k)])) return false;
    const Call& c = calls_[std::size_t(k)];
    const float* own_in = in_host_.data() + in_at_[std::size_t(k)];
    for (std::size_t j = 0; j < c.out_count; ++j, ++p) {
      const long long s = source(k, j);
      if (s >= static_cast<long long>(c.in_count))
        throw std::logic_error("SlotBatch::matches: source index past the call's input");
      if (s < 0 ? !is_poison(out[p]) : bits_of(out[p]) != bits_of(own_in[s])) return false;
    }
  }
  return poison_until(out_total_);
}

bool SlotBatch::intact() const {
  return din_.check_guards().ok && dout_.check_guards().ok && same_bits(din_.download(), in_host_);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](float x, float y) { return bits_of(x) == bits_of(y); });
}

}  // namespace labkit
