#include <catch2/catch_test_macros.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "labkit/ref_saxpy.h"

TEST_CASE("saxpy_ref computes a*x+y in double with IEEE specials", "[cpu][ref_saxpy]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{1, -2, 0.5f, inf, inf, 1, -inf};
  const std::vector<float> y{3, 1, 0.25f, 1, -inf, nan, -inf};
  const auto r = labkit::saxpy_ref(2.f, x, y);
  REQUIRE(r.size() == 7);
  CHECK(r[0] == 5.0);
  CHECK(r[1] == -3.0);
  CHECK(r[2] == 1.25);
  CHECK(r[3] == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(r[4]));  // inf + -inf
  CHECK(std::isnan(r[5]));  // NaN propagates
  CHECK(r[6] == -std::numeric_limits<double>::infinity());
  CHECK(labkit::saxpy_ref(1.f, std::vector<float>{}, std::vector<float>{}).empty());
}

TEST_CASE("norm2_ref, sum_ref and the saxpy error bound", "[cpu][ref_saxpy]") {
  using D = std::vector<double>;
  CHECK(labkit::norm2_ref(D{3.0, 4.0}) == 5.0);
  CHECK(labkit::norm2_ref(D{}) == 0.0);
  CHECK(labkit::norm2_ref(std::vector<float>{-3.f, 4.f}) == 5.0);
  CHECK(std::isinf(labkit::norm2_ref(D{1.0, -std::numeric_limits<double>::infinity()})));
  CHECK(std::isnan(labkit::norm2_ref(D{1.0, std::numeric_limits<double>::quiet_NaN(), 2.0})));
  std::vector<float> v(100001, 0.5f);
  v[7] = -1.5f;
  CHECK(labkit::sum_ref(v) == 0.5 * 100000 - 1.5);
  CHECK(labkit::sum_abs_ref(v) == 0.5 * 100000 + 1.5);
  // 1 * 1 + 2^-24: the exact result 1 + 2^-24 is a tie between two floats, within one rounding of either.
  CHECK(labkit::saxpy_error_bound(1.f, 1.f, 0x1p-24f) >= 0x1p-24);
  CHECK(labkit::saxpy_error_bound(0.f, 0.f, 0.f) == 0.0);
}
