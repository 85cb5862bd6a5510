#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>

#include "labkit/compare.h"
#include "labkit/guard.h"
#include "labkit/random.h"
#include "labkit/reference.h"

using Catch::Matchers::ContainsSubstring;
using labkit::CheckOptions;

namespace {
std::vector<double> ramp(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 1.0 + 0.5 * double(i % 7) - double(i % 3);
  return v;
}
std::vector<float> as_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
CheckOptions matrix(std::size_t rows, std::size_t cols, double tol = 1e-6) {
  CheckOptions o;
  o.tolerance = tol;
  o.rows = rows;
  o.cols = cols;
  return o;
}
}  // namespace

TEST_CASE("check_close accepts an answer within the tolerance", "[cpu][compare]") {
  auto exp = ramp(100);
  auto got = as_float(exp);
  auto v = labkit::check_close(got, exp, matrix(10, 10));
  CHECK(v.ok);
  CHECK(v.message.empty());
  CHECK(v.rel_error < 1e-7);
}

TEST_CASE("check_close names the first wrong element with expected and got", "[cpu][compare]") {
  auto exp = ramp(12);
  auto got = as_float(exp);
  got[7] += 0.5f;
  auto v = labkit::check_close(got, exp, matrix(3, 4));
  REQUIRE_FALSE(v.ok);
  CHECK(v.wrong == 1);
  CHECK_THAT(v.message, ContainsSubstring("C(1,3)") && ContainsSubstring("index 7"));
}

TEST_CASE("check_close uses the relative infinity norm", "[cpu][compare]") {
  std::vector<double> exp{1000.0, 1.0};
  std::vector<float> got{1000.0f, 1.0005f};  // error 5e-4 relative to ||exp|| = 1000 -> 5e-7
  CHECK(labkit::check_close(got, exp, matrix(1, 2, 1e-6)).ok);
  CHECK_FALSE(labkit::check_close(got, exp, matrix(1, 2, 1e-7)).ok);
}

TEST_CASE("check_close measures errors against the scale of cancelling terms when given one", "[cpu][compare]") {
  // C = c0 + a*b in float with a*b ~ -c0: the exact 1x1x1 case that once failed every step's gate for one seed.
  const float a = 0.7310586f, b = -0.9184314f, c0 = 0.6744292f;
  const std::vector<float> A{a}, B{b}, C0{c0};
  const std::vector<double> exp{double(c0) + double(a) * double(b)};
  const std::vector<float> got{std::fma(a, b, c0) + 4 * 0x1p-24f * std::fabs(a * b)};  // a few float roundings off
  CheckOptions o = matrix(1, 1, 16 * std::sqrt(2.0) * 0x1p-24);
  CHECK_FALSE(labkit::check_close(got, exp, o).ok);  // relative to |C| ~ 3e-3 the rounding looks large
  o.scale = labkit::matmul_abs_max(1, 1, 1, A, B, C0);
  CHECK(o.scale == double(std::fabs(c0)) + double(std::fabs(a)) * std::fabs(b));
  CHECK(labkit::check_close(got, exp, o).ok);  // relative to |c0| + |a||b| it is a few units in the last place
  CHECK(labkit::check_close_at(got, {{0, exp[0]}}, o).ok);
  // A real mistake is still far outside: the product dropped.
  CHECK_FALSE(labkit::check_close(std::vector<float>{c0}, exp, o).ok);
}

TEST_CASE("matmul_abs_max is the largest |C0| + |A||B| over the elements", "[cpu][compare]") {
  const std::vector<float> A{1, -2, 3, -4}, B{-1, 2, 3, 4}, C0{-10, 0, 0, 1};  // 2x2 times 2x2
  // |A||B| = [1*1+2*3, 1*2+2*4; 3*1+4*3, 3*2+4*4] = [7, 10; 15, 22]; plus |C0|: [17, 10; 15, 23]
  CHECK(labkit::matmul_abs_max(2, 2, 2, A, B, C0) == 23.0);
}

TEST_CASE("poisoned elements are reported as never written", "[cpu][compare]") {
  auto exp = ramp(16);
  auto got = as_float(exp);
  got[5] = labkit::poison_value<float>();
  auto v = labkit::check_close(got, exp, matrix(4, 4));
  REQUIRE_FALSE(v.ok);
  CHECK(v.unwritten == 1);
  CHECK_THAT(v.message, ContainsSubstring("never written"));
}

TEST_CASE("NaN in the output is wrong even where the error cannot be measured", "[cpu][compare]") {
  auto exp = ramp(4);
  auto got = as_float(exp);
  got[2] = std::nanf("");
  auto v = labkit::check_close(got, exp, matrix(1, 4));
  REQUIRE_FALSE(v.ok);
  CHECK(v.nonfinite == 1);
}

TEST_CASE("whole untouched rows are recognised", "[cpu][compare]") {
  const std::size_t R = 8, C = 5;
  auto exp = ramp(R * C);
  auto got = as_float(exp);
  std::vector<float> initial(R * C, 0.25f);
  for (std::size_t c = 0; c < C; ++c) got[6 * C + c] = got[7 * C + c] = 0.25f;
  auto opt = matrix(R, C);
  opt.initial = initial.data();
  auto v = labkit::check_close(got, exp, opt);
  REQUIRE_FALSE(v.ok);
  CHECK(v.unwritten == 2 * C);
  CHECK_THAT(v.message, ContainsSubstring("whole rows are wrong: 6-7"));
  CHECK_THAT(v.message, ContainsSubstring("their initial value"));
}

TEST_CASE("whole wrong columns are recognised", "[cpu][compare]") {
  const std::size_t R = 6, C = 9;
  auto exp = ramp(R * C);
  auto got = as_float(exp);
  for (std::size_t r = 0; r < R; ++r) got[r * C + 2] += 1.0f;
  auto v = labkit::check_close(got, exp, matrix(R, C));
  REQUIRE_FALSE(v.ok);
  CHECK_THAT(v.message, ContainsSubstring("whole columns are wrong: 2"));
}

TEST_CASE("errors confined to the partial edge tiles are recognised", "[cpu][compare]") {
  const std::size_t R = 40, C = 40;  // 32x32 tiles leave a partial band of 8
  auto exp = ramp(R * C);
  auto got = as_float(exp);
  got[35 * C + 3] += 1.0f;
  got[4 * C + 36] += 1.0f;
  auto v = labkit::check_close(got, exp, matrix(R, C));
  REQUIRE_FALSE(v.ok);
  CHECK_THAT(v.message, ContainsSubstring("at the edge") && ContainsSubstring("rows >= 32 or columns >= 32"));
}

TEST_CASE("a matching hypothesis names the likely mistake", "[cpu][compare]") {
  auto exp = ramp(9);
  std::vector<double> wrong(9, 3.0);
  std::vector<float> got(9, 3.0f);
  auto opt = matrix(3, 3);
  opt.hypotheses.push_back({"the accumulation into C is missing", wrong});
  auto v = labkit::check_close(got, exp, opt);
  REQUIRE_FALSE(v.ok);
  CHECK_THAT(v.message, ContainsSubstring("likely cause: the accumulation into C is missing"));
}

TEST_CASE("sampled comparison checks only the samples but still finds poison everywhere", "[cpu][compare]") {
  std::vector<float> got(100, 1.0f);
  got[99] = labkit::poison_value<float>();
  std::vector<std::pair<std::size_t, double>> samples{{0, 1.0}, {50, 1.0}};
  auto v = labkit::check_close_at(got, samples, matrix(10, 10));
  CHECK_FALSE(v.ok);
  CHECK(v.unwritten == 1);
  got[99] = 1.0f;
  CHECK(labkit::check_close_at(got, samples, matrix(10, 10)).ok);
  // A large output is scanned on every core: poison at both ends and in the middle is still counted once each.
  const std::size_t n = 1024 * 1030;
  std::vector<float> big(n, 1.0f);
  for (std::size_t at : {std::size_t(0), n / 2 + 1, n - 1}) big[at] = labkit::poison_value<float>();
  auto w = labkit::check_close_at(big, samples, matrix(1024, 1030));
  CHECK_FALSE(w.ok);
  CHECK(w.unwritten == 3);
}

TEST_CASE("a large comparison (on every core) finds every wrong element, the first one first", "[cpu][compare]") {
  const std::size_t n = (std::size_t(1) << 21) + 7;
  std::vector<double> exp(n), got(n);
  for (std::size_t i = 0; i < n; ++i) exp[i] = got[i] = labkit::uniform_double(3, i, -1.0, 1.0);
  exp[n / 3] = 4.0;  // the norm comes from one range only
  got[n / 3] = 4.0;
  const std::size_t bad[] = {17, n / 2, n / 2 + 1, n - 1};
  for (std::size_t i : bad) got[i] += 0.5;
  got[n - 2] = std::nan("");
  labkit::CheckOptions o;
  o.name = "x";
  o.tolerance = 1e-12;
  auto v = labkit::check_close(got, exp, o);
  CHECK_FALSE(v.ok);
  CHECK(v.checked == n);
  CHECK(v.wrong == 5);
  CHECK(v.nonfinite == 1);
  CHECK(std::isinf(v.rel_error));
  CHECK_THAT(v.message, ContainsSubstring("x[17]"));
  got[n - 2] = exp[n - 2];
  for (std::size_t i : bad) got[i] = exp[i];
  v = labkit::check_close(got, exp, o);
  CHECK(v.ok);
  CHECK(v.rel_error == 0);
}

TEST_CASE("runs that differ are diagnosed as a race", "[cpu][compare]") {
  std::vector<float> a{1, 2, 3, 4}, b{1, 2, 3.5f, 4};
  auto v = labkit::check_same_runs(a, b, matrix(2, 2));
  REQUIRE_FALSE(v.ok);
  CHECK_THAT(v.message, ContainsSubstring("__syncthreads") && ContainsSubstring("C(1,0)"));
  CHECK(labkit::check_same_runs(a, a, matrix(2, 2)).ok);
}

TEST_CASE("exact comparison and unmodified inputs", "[cpu][compare]") {
  std::vector<int> a{1, 2, 3}, b{1, 2, 4};
  CHECK(labkit::check_equal(a, a, matrix(1, 3)).ok);
  auto v = labkit::check_equal(a, b, matrix(1, 3));
  CHECK_FALSE(v.ok);
  CHECK_THAT(v.message, ContainsSubstring("C[2]"));
  auto u = labkit::check_unmodified(b, a, "A");
  CHECK_FALSE(u.ok);
  CHECK_THAT(u.message, ContainsSubstring("input A was modified"));
}

TEST_CASE("format_ranges compresses runs", "[cpu][compare]") {
  CHECK(labkit::format_ranges({1, 2, 3, 7, 9, 10}) == "1-3, 7, 9-10");
  CHECK(labkit::format_ranges({1, 3, 5, 7, 9, 11, 13, 15}, 3) == "1, 3, 5, ...");
}
