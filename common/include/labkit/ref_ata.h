// CPU reference for C = A^T A (lab 06). A is M x N row-major double; C is N x N row-major, full (both triangles).
//
// Every element is a compensated dot product (Dot2 of Ogita, Rump and Oishi: the products' rounding errors are
// recovered exactly with an FMA and the additions' with TwoSum), so the result is as accurate as if it had been
// accumulated in twice the working precision and then rounded once. A double GPU kernel's error (of order K*u
// in the worst case, u = 2^-53) is then entirely its own. Deterministic and portable: no long double, whose
// width differs between x86 (80 bits), aarch64 (128-bit software) and MSVC (64 bits).
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace labkit {

// sum_k x[k*incx] * y[k*incy] for k in [0, n), compensated (Dot2).
double dot2(const double* x, std::size_t incx, const double* y, std::size_t incy, std::size_t n);

// C = A^T A, all N x N elements, computed on every host core (each pair (i, j), i <= j, once; then mirrored, so
// the reference is exactly symmetric). Throws std::invalid_argument for M < 1, N < 1 or A.size() != M*N.
std::vector<double> ata_ref(int M, int N, const std::vector<double>& A);

// Selected elements (i, j) of A^T A, in the order given, for outputs too large for a full reference. A is
// transposed once internally so that each dot product reads contiguous memory.
std::vector<double> ata_ref_at(int M, int N, const std::vector<double>& A,
                               const std::vector<std::pair<int, int>>& positions);

}  // namespace labkit
