// labkit::SlotBatch (slot_batch.h): many small calls in one input and one output buffer, checked in one download.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <vector>

#include "labkit/check.h"
#include "labkit/device.h"
#include "labkit/slot_batch.h"

namespace {
// A "step" that copies count floats from in to out, through cudaMemcpy (no kernel of the test's own needed).
void copy(const float* in, float* out, std::size_t count) {
  if (count) LABKIT_CUDA(cudaMemcpy(out, in, count * sizeof(float), cudaMemcpyDeviceToDevice));
}
long long same_index(int, std::size_t j) { return static_cast<long long>(j); }
}  // namespace

TEST_CASE("a slot batch: aligned slots, a right batch matches, wrong ones do not", "[gpu][slot_batch]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  // Three calls: a plain one, one with both pointers 1 and 3 floats off their slot's aligned start, an empty one.
  labkit::SlotBatch b({{5, 5}, {100, 100, 1, 3}, {0, 0}}, 7);
  REQUIRE(b.calls() == 3);
  for (int k = 0; k < 3; ++k) {
    CHECK(reinterpret_cast<std::uintptr_t>(b.in(k) - (k == 1 ? 1 : 0)) % 256 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b.out(k) - (k == 1 ? 3 : 0)) % 256 == 0);
  }
  CHECK(b.in_host()[b.in_index(1)] != b.in_host()[b.in_index(0)]);  // random inputs, a slot each

  auto all = [&](std::size_t extra) {
    return b.run([&] {
      for (int k = 0; k < b.calls(); ++k) copy(b.in(k), b.out(k), k == 0 ? 5 + extra : k == 1 ? 100 : 0);
    });
  };
  const auto out = all(0);
  CHECK(b.matches(out, same_index));
  CHECK(b.intact());
  CHECK(labkit::same_bits(out, all(0)));
  // One float past call 0's output: into its gap.
  CHECK_FALSE(b.matches(all(1), same_index));
  // A value where the call must leave poison.
  CHECK_FALSE(b.matches(all(0), [](int k, std::size_t j) { return k == 1 && j == 99 ? -1LL : (long long)j; }));
  // The wrong source.
  CHECK_FALSE(b.matches(all(0), [](int k, std::size_t j) { return k == 1 ? (long long)(99 - j) : (long long)j; }));
  // A changed input.
  LABKIT_CUDA(cudaMemset(const_cast<float*>(b.in(1)), 0, sizeof(float)));
  CHECK_FALSE(b.intact());
}
