#include <catch2/catch_test_macros.hpp>
#include <algorithm>
#include <cmath>
#include <limits>

#include "labkit/random.h"
#include "labkit/ref_sort.h"

TEST_CASE("float_order_key orders -inf < negatives < -0 < +0 < positives < inf < NaN", "[cpu][sort]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan_neg = labkit::bits_float(0xFFC00000u), nan_sig = labkit::bits_float(0x7F800001u);
  const std::vector<float> ascending{-inf, -1e30f, -1.f, -1e-40f, -0.f, 0.f, 1e-40f, 1.f, 3.f, inf};
  for (std::size_t i = 1; i < ascending.size(); ++i)
    CHECK(labkit::float_order_key(ascending[i - 1]) < labkit::float_order_key(ascending[i]));
  for (float nan : {std::numeric_limits<float>::quiet_NaN(), nan_neg, nan_sig}) {
    CHECK(labkit::float_order_key(nan) == 0xFFFFFFFFu);
    CHECK(labkit::float_order_key(nan) > labkit::float_order_key(inf));
    CHECK(labkit::float_order_key(nan, true) < labkit::float_order_key(inf, true));  // descending: NaN first
  }
  CHECK(labkit::float_order_key(0.f, true) < labkit::float_order_key(-0.f, true));  // descending: +0 before -0
}

TEST_CASE("sort_ref puts NaNs last and -0 before +0; descending is the mirror image", "[cpu][sort]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto up = labkit::sort_ref({nan, 1.f, 0.f, -0.f, -inf, inf, -1.f, nan}, false);
  const std::vector<std::uint32_t> want_up{labkit::float_bits(-inf), labkit::float_bits(-1.f), 0x80000000u, 0u,
                                           labkit::float_bits(1.f), labkit::float_bits(inf)};
  for (std::size_t i = 0; i < want_up.size(); ++i) CHECK(labkit::float_bits(up[i]) == want_up[i]);
  CHECK(std::isnan(up[6]));
  CHECK(std::isnan(up[7]));
  const auto down = labkit::sort_ref({nan, 1.f, 0.f, -0.f, -inf, inf, -1.f}, true);
  CHECK(std::isnan(down[0]));
  for (std::size_t i = 0; i < want_up.size(); ++i) CHECK(labkit::float_bits(down[6 - i]) == want_up[i]);
}

TEST_CASE("radix_sort_u32 agrees with std::sort; sorted_order_keys with sort_ref", "[cpu][sort]") {
  std::vector<std::uint32_t> v(100003);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::uint32_t(labkit::random_bits(7, i) >> (i % 3 ? 0 : 28));
  auto w = v;
  labkit::radix_sort_u32(v);
  std::sort(w.begin(), w.end());
  CHECK(v == w);
  auto f = labkit::random_floats(5000, 11, -3.f, 3.f);
  for (std::size_t i = 0; i < f.size(); i += 7) f[i] = (i % 2) ? -0.f : 0.f;
  for (bool desc : {false, true}) {
    const auto ref = labkit::sort_ref(f, desc);
    const auto keys = labkit::sorted_order_keys(f, desc);
    REQUIRE(keys.size() == ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) CHECK(keys[i] == labkit::float_order_key(ref[i], desc));
  }
}
