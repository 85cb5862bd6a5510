// Matrix Market (.mtx) reading and writing, into and from labkit::Csr.
//
// Accepted: "%%MatrixMarket matrix coordinate real|integer|pattern general|symmetric" and
// "%%MatrixMarket matrix array real|integer general|symmetric" (qualifiers case-insensitive). '%' comment lines and
// blank lines may appear anywhere after the banner; CRLF line ends are accepted. Conventions applied:
//   - indices are 1-based in the file, 0-based in the Csr;
//   - duplicate coordinate entries are SUMMED (the finite-element assembly convention; a sum that cancels stays
//     as an explicit zero, a sum that overflows is an error naming the line). The declared entry count may still
//     not exceed rows*cols (n(n+1)/2 for symmetric), duplicates or not: a bound checked before reading;
//   - symmetric files hold one triangle; each off-diagonal entry is stored at (i,j) and (j,i), the diagonal once.
//     An entry above the diagonal is mirrored the same way (some writers store the upper triangle). A file that
//     stores both (i,j) and (j,i) gets both summed into each position, like any other duplicate;
//   - pattern entries get the value 1;
//   - array files (column-major dense) keep only their nonzero elements;
//   - values must be finite: "nan" and "inf" are rejected, as are values outside the range of a double.
// Rejected with an "unsupported" message: complex fields, hermitian and skew-symmetric matrices, "vector" objects.
//
// Every problem throws MatrixMarketError, whose message reads "<source>: line N: <what is wrong>" (source is the
// file name, or the name given for a stream), e.g.
//   "bcsstk01.mtx: line 14: expected 12 entries (size line at line 3), the file ends after 9"
//   "A.mtx: line 7: row index 5 is out of range 1..4"
// Sizes are checked against int32 and against MatrixMarketLimits on the size line, before anything is allocated
// for them; the entry arrays then only ever grow with entries actually present in the input.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <string_view>

#include "labkit/sparse.h"

namespace labkit {

class MatrixMarketError : public std::runtime_error {
 public:
  MatrixMarketError(std::string source, std::int64_t line, const std::string& what);
  const std::string& source() const noexcept { return source_; }
  std::int64_t line() const noexcept { return line_; }  // 1-based; 0 when the problem is not on a line (no file)
  const std::string& detail() const noexcept { return detail_; }  // the message without "<source>: line N: "

 private:
  std::string source_;
  std::int64_t line_;
  std::string detail_;
};

// Upper bounds checked on the size line. The defaults are what int32 CSR can hold; a caller reading untrusted
// input with little memory (the fuzzer) lowers them, because a legal 2e9 x 2e9 size line costs an 8 GB row_ptr.
struct MatrixMarketLimits {
  std::int64_t max_rows = 2147483647;     // rows and columns each
  std::int64_t max_entries = 2147483647;  // stored entries after symmetric expansion (int32 row_ptr)
};

// What the header said (for callers that care whether the file was symmetric, pattern, ...).
struct MatrixMarketHeader {
  std::string format;    // "coordinate" | "array" (lowercase)
  std::string field;     // "real" | "integer" | "pattern"
  std::string symmetry;  // "general" | "symmetric"
  std::int64_t rows = 0, cols = 0;
  std::int64_t entries = 0;  // entries the file declares (coordinate) or holds (array); before expansion
};

// Parses a whole Matrix Market text. `source` names it in error messages.
Csr parse_matrix_market(std::string_view text, const std::string& source = "<string>",
                        const MatrixMarketLimits& limits = {}, MatrixMarketHeader* header = nullptr);
// Reads the stream to its end, then parses it.
Csr read_matrix_market(std::istream& in, const std::string& source = "<stream>", const MatrixMarketLimits& limits = {},
                       MatrixMarketHeader* header = nullptr);
// Reads a file; a file that cannot be opened or read throws MatrixMarketError with line 0.
Csr read_matrix_market(const std::string& path, const MatrixMarketLimits& limits = {},
                       MatrixMarketHeader* header = nullptr);

// Writes "coordinate real general", or "coordinate real symmetric" with the lower triangle only. Values are
// written in the shortest form that reads back to the same double, so write + read is exact. Throws
// std::invalid_argument for an invalid Csr, a non-finite value (the reader would reject it), or symmetric ==
// true for a matrix that is not exactly symmetric (writing one triangle would silently change it); the path
// overload throws std::runtime_error when the file cannot be written.
void write_matrix_market(std::ostream& out, const Csr& A, bool symmetric = false);
void write_matrix_market(const std::string& path, const Csr& A, bool symmetric = false);

}  // namespace labkit
