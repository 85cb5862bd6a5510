#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <set>

#include "labkit/guard.h"
#include "labkit/random.h"

using Catch::Matchers::ContainsSubstring;

TEST_CASE("poison values are NaN for floating point and recognisable", "[cpu][guard]") {
  CHECK(std::isnan(labkit::poison_value<float>()));
  CHECK(std::isnan(labkit::poison_value<double>()));
  CHECK(labkit::is_poison(labkit::poison_value<float>()));
  CHECK_FALSE(labkit::is_poison(std::nanf("")));  // an ordinary NaN is not the poison
  CHECK(labkit::is_poison(labkit::poison_value<int>()));
  CHECK_FALSE(labkit::is_poison(-1));
}

TEST_CASE("random streams are reproducible, distinct and in range", "[cpu][random]") {
  auto a = labkit::random_floats(1000, 42, -1.f, 1.f);
  auto b = labkit::random_floats(1000, 42, -1.f, 1.f);
  auto c = labkit::random_floats(1000, 43, -1.f, 1.f);
  CHECK(a == b);
  CHECK(a != c);
  std::set<float> distinct(a.begin(), a.end());
  CHECK(distinct.size() > 990);
  for (float x : a) {
    CHECK(x >= -1.f);
    CHECK(x < 1.f);
  }
  double mean = 0;
  for (float x : labkit::random_floats(100000, 7, 0.f, 1.f)) mean += x;
  CHECK(std::fabs(mean / 100000 - 0.5) < 0.01);
}

TEST_CASE("large random streams (filled on every core) equal the element-wise stream", "[cpu][random]") {
  // From 2^17 elements the fill is split among threads (labkit::kElementGrain); every element must still be the one its index gives,
  // since gates regenerate on the host what fill_random_device wrote on the GPU and compare bit for bit.
  const std::size_t n = (std::size_t(1) << 20) + 37;
  const auto f = labkit::random_floats(n, 11, -2.f, 3.f);
  const auto d = labkit::random_doubles(n, 12, -1.0, 1.0);
  REQUIRE(f.size() == n);
  REQUIRE(d.size() == n);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    wrong += f[i] != labkit::uniform_float(11, i, -2.f, 3.f);
    wrong += d[i] != labkit::uniform_double(12, i, -1.0, 1.0);
  }
  CHECK(wrong == 0);
}

TEST_CASE("derived seeds differ by label and by base", "[cpu][random]") {
  CHECK(labkit::derive_seed(1, "A") != labkit::derive_seed(1, "B"));
  CHECK(labkit::derive_seed(1, "A") != labkit::derive_seed(2, "A"));
  CHECK(labkit::derive_seed(1, "A") == labkit::derive_seed(1, "A"));
}

TEST_CASE("random integers cover an inclusive range", "[cpu][random]") {
  std::set<long long> seen;
  for (int i = 0; i < 1000; ++i) {
    auto v = labkit::uniform_int(9, i, -2, 2);
    CHECK(v >= -2);
    CHECK(v <= 2);
    seen.insert(v);
  }
  CHECK(seen.size() == 5);
}
