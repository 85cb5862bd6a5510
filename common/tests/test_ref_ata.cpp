// The A^T A reference (labkit/ref_ata.h): hand-checked products, exactness where plain double summation fails,
// exact symmetry, sampled elements equal to the full result, and argument checks.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <stdexcept>

#include "labkit/random.h"
#include "labkit/ref_ata.h"

TEST_CASE("ata_ref multiplies a 2x2 example", "[cpu][ref_ata]") {
  // A = [1 2; 3 4]: A^T A = [1*1+3*3, 1*2+3*4; 2*1+4*3, 2*2+4*4]
  CHECK(labkit::ata_ref(2, 2, {1, 2, 3, 4}) == std::vector<double>{10, 14, 14, 20});
}

TEST_CASE("ata_ref handles M = 1, N = 1 and rectangular A", "[cpu][ref_ata]") {
  CHECK(labkit::ata_ref(1, 1, {-3}) == std::vector<double>{9});
  CHECK(labkit::ata_ref(1, 3, {1, 2, 3}) == std::vector<double>{1, 2, 3, 2, 4, 6, 3, 6, 9});  // outer product
  CHECK(labkit::ata_ref(3, 1, {1, 2, 3}) == std::vector<double>{14});
}

TEST_CASE("dot2 is exact where plain double summation loses everything", "[cpu][ref_ata]") {
  // 1e16 + 1 - 1e16: in double, 1e16 + 1 rounds back to 1e16 (the spacing there is 2), so a plain sum gives 0.
  const std::vector<double> A{1e8, 1e8, 1, 1, -1e8, 1e8};  // columns u = (1e8, 1, -1e8), v = (1e8, 1, 1e8)
  const auto C = labkit::ata_ref(3, 2, A);
  CHECK(C[1] == 1.0);
  CHECK(C[2] == 1.0);
  volatile double naive = 1e16;
  naive = naive + 1.0;
  naive = naive - 1e16;
  CHECK(naive == 0.0);  // the failure the compensation avoids (guards against a fast-math build)
}

TEST_CASE("ata_ref is exactly symmetric and ata_ref_at agrees with it", "[cpu][ref_ata]") {
  const int M = 37, N = 23;
  const auto A = labkit::random_doubles(std::size_t(M) * N, 7);
  const auto C = labkit::ata_ref(M, N, A);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) REQUIRE(C[std::size_t(i) * N + j] == C[std::size_t(j) * N + i]);
  std::vector<std::pair<int, int>> pos{{0, 0}, {0, N - 1}, {N - 1, 0}, {5, 17}, {17, 5}, {N - 1, N - 1}};
  const auto at = labkit::ata_ref_at(M, N, A, pos);
  for (std::size_t s = 0; s < pos.size(); ++s)
    CHECK(at[s] == C[std::size_t(pos[s].first) * N + pos[s].second]);
  // Against a long double sum: the two agree to far better than the 1e-12 a double kernel is allowed here.
  for (int i = 0; i < N; ++i) {
    long double s = 0;
    for (int k = 0; k < M; ++k) s += (long double)A[std::size_t(k) * N + i] * A[std::size_t(k) * N + 3];
    CHECK(std::fabs(double(s) - C[std::size_t(i) * N + 3]) <= 1e-15 * std::fabs(C[3 * N + 3]));
  }
}

TEST_CASE("ata_ref rejects impossible arguments", "[cpu][ref_ata]") {
  CHECK_THROWS_AS(labkit::ata_ref(0, 1, {}), std::invalid_argument);
  CHECK_THROWS_AS(labkit::ata_ref(2, 2, {1, 2, 3}), std::invalid_argument);
  CHECK_THROWS_AS(labkit::ata_ref_at(1, 2, {1, 2}, {{0, 2}}), std::invalid_argument);
}
