// The device fast paths of compare_device.h and ref_saxpy.h against the host checks they stand in for: they must
// pass exactly where the host check passes and hand over (nullopt, or a count) wherever it fails. GPU only: skipped
// without a device.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/compare.h"
#include "labkit/compare_device.h"
#include "labkit/device.h"
#include "labkit/guard.h"
#include "labkit/random.h"
#include "labkit/ref_saxpy.h"

namespace {

constexpr std::size_t kN = 100003;  // odd: not a multiple of the blocks or the warps

labkit::CheckOptions options(double tolerance) {
  labkit::CheckOptions o;
  o.tolerance = tolerance;
  o.name = "C";
  return o;
}

// The device verdict where it has one must be the host's; where it has none, the host check must fail.
void agrees(const std::vector<float>& got, const std::vector<float>& expected, const labkit::CheckOptions& o) {
  labkit::DeviceBuffer<float> dg(got), de(expected);
  const auto fast = labkit::check_close_device(dg.data(), de.data(), got.size(), o);
  const auto host = labkit::check_close(got, std::vector<double>(expected.begin(), expected.end()), o);
  if (fast) {
    CHECK(host.ok);
    CHECK(fast->ok);
    CHECK(fast->rel_error == host.rel_error);
  } else {
    CHECK_FALSE(host.ok);
  }
}

}  // namespace

TEST_CASE("check_close_device passes exactly where check_close does", "[gpu][compare]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  const auto expected = labkit::random_floats(kN, 11);
  auto got = expected;
  const auto o = options(1e-6);
  agrees(got, expected, o);  // identical
  for (std::size_t i = 0; i < kN; i += 7) got[i] = std::nextafter(got[i], 2.f);  // rounding-sized differences
  agrees(got, expected, o);
  got[kN - 1] = expected[kN - 1] + 2e-6f;  // one element just outside
  agrees(got, expected, o);
  got = expected;
  got[kN / 2] = std::numeric_limits<float>::quiet_NaN();  // a NaN must never pass a max-error test
  agrees(got, expected, o);
  got[kN / 2] = std::numeric_limits<float>::infinity();
  agrees(got, expected, o);
  auto with_nan = expected;  // NaN expected and produced: right
  with_nan[3] = std::numeric_limits<float>::quiet_NaN();
  agrees(with_nan, with_nan, o);
  agrees(expected, with_nan, o);  // NaN expected, a number produced: wrong
  got = expected;
  got[5] = labkit::poison_value<float>();  // never written
  agrees(got, expected, o);
}

TEST_CASE("check_close_at_device finds poison anywhere and wrong samples", "[gpu][compare]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  const auto values = labkit::random_floats(kN, 12);
  std::vector<std::pair<std::size_t, double>> samples;
  for (std::size_t i = 0; i < kN; i += 997) samples.emplace_back(i, values[i]);
  const auto o = options(1e-6);
  labkit::DeviceBuffer<float> d(values);
  const auto fast = labkit::check_close_at_device(d.data(), kN, samples, o);
  REQUIRE(fast);
  CHECK(fast->ok);
  CHECK(fast->checked == samples.size());
  auto poisoned = values;
  poisoned[1] = labkit::poison_value<float>();  // not a sampled position
  labkit::DeviceBuffer<float> dp(poisoned);
  CHECK_FALSE(labkit::check_close_at_device(dp.data(), kN, samples, o));
  CHECK_FALSE(labkit::check_close_at(poisoned, samples, o).ok);
  auto off = values;
  off[997] += 0.5f;
  labkit::DeviceBuffer<float> dw(off);
  CHECK_FALSE(labkit::check_close_at_device(dw.data(), kN, samples, o));
  CHECK_FALSE(labkit::check_close_at_device(d.data(), kN, {{kN, 0.0}}, o));  // outside: the host check throws
}

TEST_CASE("check_unmodified_device gives check_unmodified's verdict", "[gpu][compare]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  labkit::DeviceBuffer<double> d(kN);
  labkit::fill_random_device(d.data(), kN, 13);
  const auto same = labkit::check_unmodified_device(d.data(), kN, 13, "A");
  CHECK(same.ok);
  CHECK(same.checked == kN);
  auto changed = labkit::random_doubles(kN, 13);
  const auto before = changed;
  changed[4242] = -0.0;
  changed[kN - 1] += 1;
  d.upload(changed);
  const auto fast = labkit::check_unmodified_device(d.data(), kN, 13, "A");
  const auto host = labkit::check_unmodified(changed, before, "A");
  CHECK_FALSE(fast.ok);
  CHECK(fast.wrong == host.wrong);
  CHECK(fast.message == host.message);
}

TEST_CASE("saxpy_scan_device counts what the host rule counts; norm2_device is norm2_ref", "[gpu][saxpy]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  const float a = -1.75f;
  const auto x = labkit::random_floats(kN, 21), y0 = labkit::random_floats(kN, 22);
  std::vector<float> y(kN);
  for (std::size_t i = 0; i < kN; ++i) y[i] = std::fmaf(a, x[i], y0[i]);
  labkit::DeviceBuffer<float> d(y);
  CHECK(labkit::saxpy_scan_device(d.data(), kN, a, 21, 22).wrong == 0);
  CHECK(std::fabs(labkit::norm2_device(d.data(), kN) - labkit::norm2_ref(y)) <= 1e-12 * labkit::norm2_ref(y));
  y[77] = std::nextafter(std::nextafter(std::nextafter(y[77], 9.f), 9.f), 9.f);  // three ulps: outside 2 bounds
  y[90000] = std::numeric_limits<float>::quiet_NaN();
  d.upload(y);
  const auto scan = labkit::saxpy_scan_device(d.data(), kN, a, 21, 22);
  std::size_t host_wrong = 0;
  for (std::size_t i = 0; i < kN; ++i) {
    const double ex = double(a) * x[i] + double(y0[i]);
    host_wrong += !(std::fabs(y[i] - ex) <= 2 * labkit::saxpy_error_bound(a, x[i], y0[i]));
  }
  CHECK(scan.wrong == host_wrong);
  CHECK(scan.wrong >= 1);
  CHECK(scan.first == (host_wrong == 2 ? 77u : 90000u));
  CHECK(std::isnan(labkit::norm2_device(d.data(), kN)));
}
