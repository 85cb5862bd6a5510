// labkit::SlotLayout and SlotBatch (slot_batch.h): many small calls in one input and one output buffer, checked in
// one download. The layout and the host-side checks run without a device; the buffers need one.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/guard.h"
#include "labkit/launches.h"
#include "labkit/not_implemented.h"
#include "labkit/slot_batch.h"

using Catch::Matchers::ContainsSubstring;
using labkit::SlotLayout;

namespace {
long long same_index(int, std::size_t j) { return static_cast<long long>(j); }

// What a right batch of copies leaves: every call's out[j] = its in[j], poison everywhere else.
std::vector<float> copies(const SlotLayout& l, const std::vector<float>& in) {
  std::vector<float> out(l.out_total(), labkit::poison_value<float>());
  for (int k = 0; k < l.calls(); ++k)
    for (std::size_t j = 0; j < l.call(k).out_count; ++j) out[l.out_at(k) + j] = in[l.in_at(k) + j];
  return out;
}
std::vector<float> counting(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f + float(i);
  return v;
}
}  // namespace

TEST_CASE("slot layout: slots 256-byte aligned plus their shifts, a gap after each", "[cpu][slot_batch]") {
  // Three calls: a plain one, one with its pointers 1 and 3 floats off the slot's aligned start, an empty one.
  const SlotLayout l({{5, 5}, {100, 100, 1, 3}, {0, 0}});
  REQUIRE(l.calls() == 3);
  CHECK(l.in_at(0) == 0);
  CHECK(l.out_at(0) == 0);
  CHECK(l.in_at(1) == 128 + 1);  // 5 + 64 floats of gap, rounded up to 64, then the shift
  CHECK(l.out_at(1) == 128 + 3);
  CHECK(l.in_at(2) == 320);      // 129 + 100 + 64 = 293, rounded up
  CHECK(l.out_at(2) == 320);
  CHECK(l.in_total() == 320 + 64);
  CHECK(l.out_total() == 320 + 64);
  for (int k = 0; k < 3; ++k) CHECK((l.in_at(k) - l.call(k).in_shift) % SlotLayout::kAlignFloats == 0);
}

TEST_CASE("slot layout: a right batch passes; each kind of wrong one is named", "[cpu][slot_batch]") {
  const SlotLayout l({{5, 5}, {100, 100, 1, 3}, {0, 0}});
  const auto in = counting(l.in_total());
  const auto out = copies(l, in);
  CHECK(l.mismatch(in, out, same_index).empty());
  CHECK(l.changed_input(in, in).empty());
  CHECK(l.runs_differ(out, out).empty());
  {  // one float past call 0's output, into its gap
    auto o = out;
    o[5] = 1.f;
    CHECK_THAT(l.mismatch(in, o, same_index),
               ContainsSubstring("the float 0 past the end of call 0's output was written (1)"));
  }
  {  // into call 1's shift, before its pointer: still call 0's gap
    auto o = out;
    o[l.out_at(1) - 1] = 2.f;
    CHECK_THAT(l.mismatch(in, o, same_index), ContainsSubstring("past the end of call 0's output was written (2)"));
  }
  {  // after the last call
    auto o = out;
    o.back() = 3.f;
    CHECK_THAT(l.mismatch(in, o, same_index), ContainsSubstring("past the end of call 2's output"));
  }
  {  // an element never written
    auto o = out;
    o[l.out_at(1) + 7] = labkit::poison_value<float>();
    const auto why = l.mismatch(in, o, same_index);
    CHECK_THAT(why, ContainsSubstring("call 1's out[7] is poison (never written), where its in[7] = "));
  }
  // a value where the call must leave poison, and the wrong source
  const auto poison_at_99 = [](int k, std::size_t j) { return k == 1 && j == 99 ? -1LL : (long long)j; };
  CHECK_THAT(l.mismatch(in, out, poison_at_99),
             ContainsSubstring("call 1's out[99] is 228.5, where nothing may be written"));  // in[129 + 99]
  const auto reversed = [](int k, std::size_t j) { return k == 1 ? (long long)(99 - j) : (long long)j; };
  CHECK_THAT(l.mismatch(in, out, reversed), ContainsSubstring("call 1's out[0]"));
  CHECK_THROWS_AS(l.mismatch(in, out, [](int, std::size_t j) { return j == 0 ? 5LL : (long long)j; }),
                  std::logic_error);  // call 0 has 5 inputs: in[5] is past them
  CHECK_THAT(l.mismatch(in, std::vector<float>(3), same_index), ContainsSubstring("the buffers hold"));
  {  // a changed input, and a changed gap of the input
    auto now = in;
    now[l.in_at(1) + 4] = -1.f;
    CHECK_THAT(l.changed_input(in, now), ContainsSubstring("call 1's in[4] changed (133.5 became -1)"));
    now = in;
    now[l.in_at(0) + 5] = -1.f;
    CHECK_THAT(l.changed_input(in, now), ContainsSubstring("outside every call's own input"));
  }
  {  // two runs that differ, and a NaN whose payload changed
    auto o = out;
    o[l.out_at(1) + 2] += 1.f;
    CHECK_THAT(l.runs_differ(out, o),
               ContainsSubstring("a second batch on the same inputs differs, first in call 1's out[2]"));
    o = out;
    std::uint32_t bits = 0x7fc00001u;
    std::memcpy(&o[10], &bits, 4);
    CHECK_FALSE(l.runs_differ(out, o).empty());
  }
}

TEST_CASE("a slot batch on the device: aligned pointers, a right batch matches, a changed input is seen",
          "[gpu][slot_batch]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  labkit::SlotBatch b({{5, 5}, {100, 100, 1, 3}, {0, 0}}, 7);
  REQUIRE(b.calls() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(reinterpret_cast<std::uintptr_t>(b.in(k) - b.layout().call(k).in_shift) % 256 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b.out(k) - b.layout().call(k).out_shift) % 256 == 0);
  }
  // Every call copies its input to its output (cudaMemcpy: no kernel of the test's own), call 0 `extra` floats more.
  const auto copies_of = [&](std::size_t extra) {
    return [&b, extra] {
      for (int k = 0; k < b.calls(); ++k) {
        const std::size_t count = b.layout().call(k).out_count + (k == 0 ? extra : 0);
        if (count) LABKIT_CUDA(cudaMemcpy(b.out(k), b.in(k), count * sizeof(float), cudaMemcpyDeviceToDevice));
      }
    };
  };
  const auto all = [&](std::size_t extra) { return b.run(copies_of(extra)); };
  const auto out = all(0);
  CHECK(b.matches(out, same_index));
  CHECK(b.intact());
  CHECK(b.same_runs(out, all(0)));
  // What a gate calls: the run and every check, twice.
  CHECK(b.run_and_check(copies_of(0), same_index, true));
  CHECK_FALSE(b.run_and_check(copies_of(1), same_index, true));  // one float past call 0's output
  CHECK_THAT(b.why(), ContainsSubstring("past the end of call 0's output"));
  CHECK_THAT(b.failure("step 9, 3 cases"), ContainsSubstring("step 9, 3 cases, every call made one after another"));
  LABKIT_CUDA(cudaMemset(const_cast<float*>(b.in(1)), 0, sizeof(float)));
  CHECK_FALSE(b.intact());
  CHECK_THAT(b.why(), ContainsSubstring("call 1's in[0] changed"));
}

// labkit::gate::require_batch, the fallback of labs 01 and 04: a right batch passes without the one-by-one cases; a
// finding, a failed call or a CUDA error that leaves the context usable sends every case through `each` (which fails
// at the wrong one: here it throws, which ends the call before the batch's own failure); a step not written passes
// its NotImplemented on, for the gate's status.
TEST_CASE("require_batch: the one-by-one cases run exactly when the batch is not right", "[cpu][slot_batch]") {
  struct CaseFailed : std::runtime_error {
    CaseFailed() : std::runtime_error("case 3 is wrong") {}
  };
  int each_runs = 0;
  auto each = [&] {
    ++each_runs;
    throw CaseFailed();
  };
  labkit::gate::require_batch("step 9, 3 cases", "in one buffer", [] { return std::string(); }, each);
  CHECK(each_runs == 0);
  CHECK_THROWS_AS(labkit::gate::require_batch(
                      "step 9, 3 cases", "in one buffer",
                      []() -> std::string { throw labkit::NotImplemented("step 9"); }, each),
                  labkit::NotImplemented);
  CHECK(each_runs == 0);
  const std::vector<std::function<std::string()>> not_right = {
      [] { return std::string("case 3: C[7] is 2, where 3 belongs"); },
      []() -> std::string { throw std::runtime_error("a step's own check refused the size"); },
      []() -> std::string { throw labkit::CudaError(cudaErrorInvalidConfiguration, "invalid configuration"); },
  };
  for (const auto& batch : not_right) {
    CHECK_THROWS_AS(labkit::gate::require_batch("step 9, 3 cases", "in one buffer", batch, each), CaseFailed);
  }
  CHECK(each_runs == int(not_right.size()));
}
