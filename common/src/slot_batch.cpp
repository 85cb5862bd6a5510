// labkit::SlotLayout and SlotBatch (slot_batch.h): many small calls of a step in one input and one output buffer.
#include "labkit/slot_batch.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "labkit/check.h"
#include "labkit/random.h"

namespace labkit {

namespace {

std::size_t aligned(std::size_t floats) {
  return (floats + SlotLayout::kAlignFloats - 1) / SlotLayout::kAlignFloats * SlotLayout::kAlignFloats;
}

// Where each call's pointer lands in the input (or output) buffer, and the buffer's length in `total`.
std::vector<std::size_t> place(const std::vector<SlotCall>& calls, bool input, std::size_t& total) {
  std::vector<std::size_t> at;
  std::size_t pos = 0;
  for (const auto& c : calls) {
    const std::size_t start = aligned(pos) + (input ? c.in_shift : c.out_shift);
    at.push_back(start);
    pos = start + (input ? c.in_count : c.out_count) + SlotLayout::kGapFloats;
  }
  total = std::max<std::size_t>(pos, 1);
  return at;
}

std::uint32_t bits_of(float v) {
  std::uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool same_float_bits(float x, float y) { return bits_of(x) == bits_of(y); }

// The first position where a and b (of equal length) differ bit for bit; a.size() when nowhere.
std::size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  return static_cast<std::size_t>(std::mismatch(a.begin(), a.end(), b.begin(), same_float_bits).first - a.begin());
}

// The call whose slot position p is in: the last one whose pointer (`at`, increasing) is at or before p; -1: none.
int owner(const std::vector<std::size_t>& at, std::size_t p) {
  return static_cast<int>(std::upper_bound(at.begin(), at.end(), p) - at.begin()) - 1;
}

std::string value_text(float v) {
  if (is_poison(v)) return "poison (never written)";
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}

}  // namespace

SlotLayout::SlotLayout(std::vector<SlotCall> calls)
    : calls_(std::move(calls)), in_at_(place(calls_, true, in_total_)), out_at_(place(calls_, false, out_total_)) {}

std::string SlotLayout::mismatch(const std::vector<float>& in, const std::vector<float>& out,
                                 const std::function<long long(int k, std::size_t j)>& source) const {
  if (in.size() != in_total_ || out.size() != out_total_)
    return "the buffers hold " + std::to_string(in.size()) + " and " + std::to_string(out.size()) + " floats, not " +
           std::to_string(in_total_) + " and " + std::to_string(out_total_);
  std::size_t p = 0;
  std::string why;
  // Every float from p up to `end` must still be poison: it belongs to no call's output.
  auto poison_until = [&](std::size_t end) {
    for (; p < end; ++p) {
      if (is_poison(out[p])) continue;
      const int k = owner(out_at_, p);
      why = (k < 0 ? std::string("a float before call 0's output")
                   : "the float " + std::to_string(p - out_at_[std::size_t(k)] - calls_[std::size_t(k)].out_count) +
                         " past the end of call " + std::to_string(k) + "'s output") +
            " was written (" + value_text(out[p]) + ")";
      return false;
    }
    return true;
  };
  for (int k = 0; k < calls(); ++k) {
    if (!poison_until(out_at_[std::size_t(k)])) return why;
    const SlotCall& c = calls_[std::size_t(k)];
    const float* own_in = in.data() + in_at_[std::size_t(k)];
    for (std::size_t j = 0; j < c.out_count; ++j, ++p) {
      const long long s = source(k, j);
      if (s >= static_cast<long long>(c.in_count))
        throw std::logic_error("SlotLayout::mismatch: source index past the call's input");
      if (s < 0 ? is_poison(out[p]) : bits_of(out[p]) == bits_of(own_in[s])) continue;
      return "call " + std::to_string(k) + "'s out[" + std::to_string(j) + "] is " + value_text(out[p]) +
             (s < 0 ? ", where nothing may be written"
                    : ", where its in[" + std::to_string(s) + "] = " + value_text(own_in[s]) + " belongs");
    }
  }
  poison_until(out_total_);
  return why;
}

std::string SlotLayout::changed_input(const std::vector<float>& before, const std::vector<float>& now) const {
  if (before.size() != now.size()) return "the input's length changed";
  const std::size_t p = first_difference(before, now);
  if (p == before.size()) return "";
  const std::string change = " (" + value_text(before[p]) + " became " + value_text(now[p]) + ")";
  const int k = owner(in_at_, p);
  if (k >= 0 && p - in_at_[std::size_t(k)] < calls_[std::size_t(k)].in_count)
    return "call " + std::to_string(k) + "'s in[" + std::to_string(p - in_at_[std::size_t(k)]) + "] changed" + change;
  return "the input changed outside every call's own input" + change;
}

std::string SlotLayout::runs_differ(const std::vector<float>& first, const std::vector<float>& second) const {
  if (first.size() != second.size()) return "a second batch's output has another length";
  const std::size_t p = first_difference(first, second);
  if (p == first.size()) return "";
  const int k = owner(out_at_, p);
  const std::string where = k < 0 ? "before call 0's output"
                                  : "in call " + std::to_string(k) + "'s out[" +
                                        std::to_string(p - out_at_[std::size_t(k)]) + "]";
  return "a second batch on the same inputs differs, first " + where + " (" + value_text(first[p]) + ", then " +
         value_text(second[p]) + ")";
}

SlotBatch::SlotBatch(std::vector<Call> calls, std::uint64_t seed)
    : layout_(std::move(calls)),
      in_host_(random_floats(layout_.in_total(), seed)),
      din_(layout_.in_total(), "in (all the calls' inputs)"),
      dout_(layout_.out_total(), "out (all the calls' outputs)") {
  din_.upload(in_host_);
}

std::vector<float> SlotBatch::run(const std::function<void()>& launch_all) {
  dout_.poison();
  launch_all();
  LABKIT_CUDA(cudaDeviceSynchronize());  // a fault in any call surfaces here
  return dout_.download();
}

bool SlotBatch::run_and_check(const std::function<void()>& launch_all,
                              const std::function<long long(int k, std::size_t j)>& source, bool twice) {
  const auto out = run(launch_all);
  return matches(out, source) && intact() && (!twice || same_runs(out, run(launch_all)));
}

bool SlotBatch::matches(const std::vector<float>& out, const std::function<long long(int k, std::size_t j)>& source) {
  why_ = layout_.mismatch(in_host_, out, source);
  return why_.empty();
}

bool SlotBatch::intact() {
  if (const auto g = din_.check_guards(); !g.ok) return why_ = g.message, false;
  if (const auto g = dout_.check_guards(); !g.ok) return why_ = g.message, false;
  why_ = layout_.changed_input(in_host_, din_.download());
  return why_.empty();
}

bool SlotBatch::same_runs(const std::vector<float>& first, const std::vector<float>& second) {
  why_ = layout_.runs_differ(first, second);
  return why_.empty();
}

std::string SlotBatch::failure(const std::string& what) const {
  return what + ", every call made one after another on slots of its own in one input and one output buffer: " +
         why_ + "; yet each case passed on buffers of its own. Look for a race (results that change from run to "
         "run), state kept from one call to the next, or a write far from the output (into another call's slot)";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && first_difference(a, b) == a.size();
}

}  // namespace labkit
