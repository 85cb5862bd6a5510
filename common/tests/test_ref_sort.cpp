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

TEST_CASE("float_sort_key is a bijection that refines float_order_key in both directions", "[cpu][sort]") {
  // Every special class, the boundaries between them, and a stride through all 2^32 patterns.
  std::vector<std::uint32_t> bits{0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu,
                                  0x3F800000u, 0xBF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                                  0x7F800001u, 0xFF800001u, 0x7FC00000u, 0xFFC00000u, 0x7FFFFFFFu, 0xFFFFFFFFu};
  for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); u += 65537) bits.push_back(std::uint32_t(u));
  for (std::uint32_t mask : {0u, 0xFFFFFFFFu}) {
    const bool desc = mask != 0;
    for (std::uint32_t a : bits) {
      CHECK(labkit::float_from_sort_key(labkit::float_sort_key(a, mask), mask) == a);
      for (std::uint32_t b : {0x00000000u, 0x80000000u, 0x3F800000u, 0xFF800000u, 0x7F800000u, 0x7FC00000u,
                              0xFFC00000u, a ^ 1u}) {
        const std::uint32_t oa = labkit::float_order_key(labkit::bits_float(a), desc),
                            ob = labkit::float_order_key(labkit::bits_float(b), desc);
        if (oa < ob) CHECK(labkit::float_sort_key(a, mask) < labkit::float_sort_key(b, mask));
        if (a != b) CHECK(labkit::float_sort_key(a, mask) != labkit::float_sort_key(b, mask));
      }
    }
  }
  // The largest key (0xFFFFFFFF, the sorts' padding) is a value that sorts last: a NaN ascending, -inf descending.
  CHECK(std::isnan(labkit::bits_float(labkit::float_from_sort_key(0xFFFFFFFFu))));
  CHECK(labkit::float_from_sort_key(0xFFFFFFFFu, 0xFFFFFFFFu) == 0xFF800000u);
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
  // Above 2^17 keys the sort runs in chunks on several cores (any machine with two): the same result.
  std::vector<std::uint32_t> big((std::size_t(1) << 20) + 5);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = std::uint32_t(labkit::random_bits(9, i) >> (i % 5 ? 0 : 24));
  auto big_sorted = big;
  labkit::radix_sort_u32(big);
  std::sort(big_sorted.begin(), big_sorted.end());
  CHECK(big == big_sorted);
  auto f = labkit::random_floats(5000, 11, -3.f, 3.f);
  for (std::size_t i = 0; i < f.size(); i += 7) f[i] = (i % 2) ? -0.f : 0.f;
  for (bool desc : {false, true}) {
    const auto ref = labkit::sort_ref(f, desc);
    const auto keys = labkit::sorted_order_keys(f, desc);
    REQUIRE(keys.size() == ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) CHECK(keys[i] == labkit::float_order_key(ref[i], desc));
  }
}
