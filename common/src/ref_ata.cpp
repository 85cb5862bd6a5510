#include "labkit/ref_ata.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "labkit/reference.h"

namespace labkit {

namespace {

void check_args(int M, int N, const std::vector<double>& A) {
  if (M < 1 || N < 1) throw std::invalid_argument("ata_ref: M and N must be >= 1");
  if (A.size() != std::size_t(M) * std::size_t(N))
    throw std::invalid_argument("ata_ref: A has " + std::to_string(A.size()) + " elements, expected M*N = " +
                                std::to_string(std::size_t(M) * std::size_t(N)));
}

// TwoSum (Knuth): s + e == a + b exactly, s = fl(a + b). Six additions, no branch, any ordering of |a|, |b|.
inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// A^T (N x M) so that column i of A is a contiguous row.
std::vector<double> transposed(int M, int N, const std::vector<double>& A) {
  std::vector<double> At(A.size());
  parallel_for(std::size_t(N), [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i)
      for (std::size_t k = 0; k < std::size_t(M); ++k) At[i * M + k] = A[k * N + i];
  });
  return At;
}

// Dekker's split: a == hi + lo exactly, each half with at most 26 significant bits, so products of halves are
// exact in double. Valid for |a| < 2^996 (the factor 2^27 + 1 must not overflow).
inline void split(double a, double& hi, double& lo) {
  const double c = 134217729.0 * a;  // 2^27 + 1
  hi = c - (c - a);
  lo = a - hi;
}

// Four Dot2 sums sharing x, interleaved: each sum is a chain of dependent additions (TwoSum), so four
// independent chains keep the core busy where one would wait on latency. The product's error comes from
// Dekker's TwoProduct (exact, like the FMA in dot2, but inline: a libm fma() call would clobber every floating-
// point register and serialize the four chains).
void dot2_x4(const double* x, const double* const y[4], std::size_t n, double out[4]) {
  double s[4] = {0, 0, 0, 0}, c[4] = {0, 0, 0, 0};
  for (std::size_t k = 0; k < n; ++k) {
    double xh, xl;
    split(x[k], xh, xl);
    for (int r = 0; r < 4; ++r) {
      const double yk = y[r][k];
      double yh, yl;
      split(yk, yh, yl);
      const double p = x[k] * yk;
      const double pe = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl;  // x*y == p + pe exactly
      double t, se;
      two_sum(s[r], p, t, se);
      s[r] = t;
      c[r] += se + pe;
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = s[r] + c[r];
}

}  // namespace

double dot2(const double* x, std::size_t incx, const double* y, std::size_t incy, std::size_t n) {
  double s = 0, c = 0;  // running sum and the accumulated (small) correction
  for (std::size_t k = 0; k < n; ++k) {
    const double p = x[k * incx] * y[k * incy];
    const double pe = std::fma(x[k * incx], y[k * incy], -p);  // exact: x*y == p + pe
    double t, se;
    two_sum(s, p, t, se);
    s = t;
    c += se + pe;
  }
  return s + c;
}

std::vector<double> ata_ref(int M, int N, const std::vector<double>& A) {
  check_args(M, N, A);
  const std::vector<double> At = transposed(M, N, A);
  std::vector<double> C(std::size_t(N) * N);
  // Row i of the upper triangle has N - i elements: pairing row p with row N-1-p gives every task the same
  // amount of work, so the cores finish together.
  const std::size_t half = (std::size_t(N) + 1) / 2;
  parallel_for(half, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) {
      const std::size_t rows[2] = {p, std::size_t(N) - 1 - p};
      const int count = rows[0] == rows[1] ? 1 : 2;  // the middle row of an odd N comes once
      for (int r = 0; r < count; ++r) {
        const std::size_t i = rows[r];
        const double* ci = &At[i * M];
        std::size_t j = i;
        for (; j + 4 <= std::size_t(N); j += 4) {
          const double* cj[4] = {&At[j * M], &At[(j + 1) * M], &At[(j + 2) * M], &At[(j + 3) * M]};
          double v[4];
          dot2_x4(ci, cj, std::size_t(M), v);
          for (int r = 0; r < 4; ++r) C[i * N + j + r] = C[(j + r) * N + i] = v[r];
        }
        for (; j < std::size_t(N); ++j) {
          const double v = dot2(ci, 1, &At[j * M], 1, std::size_t(M));
          C[i * N + j] = v;
          C[j * N + i] = v;
        }
      }
    }
  });
  return C;
}

std::vector<double> ata_ref_at(int M, int N, const std::vector<double>& A,
                               const std::vector<std::pair<int, int>>& positions) {
  check_args(M, N, A);
  for (const auto& [i, j] : positions)
    if (i < 0 || i >= N || j < 0 || j >= N)
      throw std::invalid_argument("ata_ref_at: position (" + std::to_string(i) + ", " + std::to_string(j) +
                                  ") outside the " + std::to_string(N) + " x " + std::to_string(N) + " result");
  const std::vector<double> At = transposed(M, N, A);
  std::vector<double> out(positions.size());
  parallel_for(positions.size(), [&](std::size_t s0, std::size_t s1) {
    for (std::size_t s = s0; s < s1; ++s) {
      const auto [i, j] = positions[s];
      out[s] = dot2(&At[std::size_t(i) * M], 1, &At[std::size_t(j) * M], 1, std::size_t(M));
    }
  });
  return out;
}

}  // namespace labkit
