// Matrix Market reader and writer: the accepted dialect, one test per malformed-input message (with its line
// number), round trips, and a replay of the seed corpus and of every input the fuzzer ever crashed on.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "labkit/mmio.h"
#include "labkit/sparse.h"

using namespace labkit;
using Catch::Matchers::ContainsSubstring;
namespace fs = std::filesystem;

namespace {

const std::string kGeneral = "%%MatrixMarket matrix coordinate real general\n";
const std::string kSymmetric = "%%MatrixMarket matrix coordinate real symmetric\n";
const std::string kPattern = "%%MatrixMarket matrix coordinate pattern general\n";
const std::string kInteger = "%%MatrixMarket matrix coordinate integer general\n";
const std::string kArray = "%%MatrixMarket matrix array real general\n";

Csr parse(const std::string& text, const MatrixMarketLimits& limits = {}) {
  std::istringstream in(text);
  return read_matrix_market(in, "t.mtx", limits);
}

// The error message for `text`, or "" when it parses.
std::string error_of(const std::string& text, const MatrixMarketLimits& limits = {}) {
  try {
    parse(text, limits);
  } catch (const MatrixMarketError& e) {
    return e.what();
  }
  return "";
}

std::string read_file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool same(const Csr& a, const Csr& b) {
  return a.rows == b.rows && a.cols == b.cols && a.row_ptr == b.row_ptr && a.col_idx == b.col_idx &&
         a.values == b.values;
}

}  // namespace

TEST_CASE("mmio.read.general_with_comments_blank_lines_and_unsorted_entries", "[cpu][mmio]") {
  MatrixMarketHeader h;
  const Csr A = read_matrix_market(std::string("mmio_corpus/valid_general_real.mtx"), {}, &h);
  REQUIRE(A.first_problem() == "");
  REQUIRE(h.format == "coordinate");
  REQUIRE(h.field == "real");
  REQUIRE(h.symmetry == "general");
  REQUIRE(h.entries == 6);
  REQUIRE(A.rows == 4);
  REQUIRE(A.cols == 5);
  REQUIRE(to_dense(A) == std::vector<double>{1, 0, 0, 0, 7.5,  //
                                             0, 0, -1.5, 0, 0,  //
                                             -2, 0, 0, 0, 0,    //
                                             0, 1e-3, 0, 0, 3.25});
}

TEST_CASE("mmio.read.symmetric_expands_to_full", "[cpu][mmio]") {
  const Csr L = read_matrix_market(std::string("mmio_corpus/valid_symmetric_lower.mtx"));
  REQUIRE(L.nnz() == 10);  // 4 diagonal entries once, 3 off-diagonal twice
  REQUIRE(is_symmetric(L));
  REQUIRE(to_dense(L) == std::vector<double>{4, -1, 0, 0, -1, 4, -1, 0, 0, -1, 4, -1, 0, 0, -1, 4});

  // Upper-triangle entries are mirrored the same way.
  const Csr U = read_matrix_market(std::string("mmio_corpus/valid_symmetric_upper.mtx"));
  REQUIRE(to_dense(U) == std::vector<double>{2, 0.5, 0, 0.5, 2, 0.25, 0, 0.25, 2});

  // A diagonal entry given twice is summed once per occurrence, not mirrored.
  REQUIRE(to_dense(parse(kSymmetric + "2 2 3\n1 1 1\n1 1 2\n2 1 5\n")) == std::vector<double>{3, 5, 5, 0});
}

TEST_CASE("mmio.read.pattern_integer_array", "[cpu][mmio]") {
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_pattern.mtx"))) ==
          std::vector<double>{1, 0, 0, 0, 0, 1, 1, 0, 1});
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_pattern_symmetric.mtx"))) ==
          std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0, 0});
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_integer_symmetric.mtx"))) ==
          std::vector<double>{10, -3, 0, -3, 7, 0, 0, 0, 5});
  // Array files are column-major; zeros are not stored.
  const Csr G = read_matrix_market(std::string("mmio_corpus/valid_array_general.mtx"));
  REQUIRE(G.nnz() == 4);
  REQUIRE(to_dense(G) == std::vector<double>{1, 0, 0, 4, -2.5, 50});
  // Symmetric array: the lower triangle column by column.
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_array_symmetric.mtx"))) ==
          std::vector<double>{4, 1, 0, 1, 5, 2, 0, 2, 6});
}

TEST_CASE("mmio.read.dialect_details", "[cpu][mmio]") {
  // Duplicates are summed (in file order).
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_duplicates_summed.mtx"))) ==
          std::vector<double>{7, 0, 5, 0});
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_crlf.mtx"))) ==
          std::vector<double>{1.5, 0, 0, -1.5});
  REQUIRE(read_matrix_market(std::string("mmio_corpus/valid_case_insensitive.mtx")).values ==
          std::vector<double>{3.5});
  REQUIRE(to_dense(read_matrix_market(std::string("mmio_corpus/valid_no_final_newline.mtx"))) ==
          std::vector<double>{0, 0, 9, 0});
  const Csr E = read_matrix_market(std::string("mmio_corpus/valid_no_entries.mtx"));
  REQUIRE(E.rows == 3);
  REQUIRE(E.cols == 4);
  REQUIRE(E.nnz() == 0);
  REQUIRE(E.first_problem() == "");
  // Leading '+', exponents, subnormals (accepted), tabs.
  const Csr S = parse(kGeneral + "1 3 3\n+1\t+1 +2.5\n1 2 -1E-2\n1 3 4.9e-324\n");
  REQUIRE(S.values == std::vector<double>{2.5, -0.01, 4.9e-324});
  // Values far below the smallest subnormal underflow to zero (kept as an explicit entry).
  REQUIRE(parse(kGeneral + "1 1 1\n1 1 1e-400\n").values == std::vector<double>{0.0});
  // Comments may appear before the size line and between entries, also indented.
  REQUIRE(parse(kGeneral + "%c\n\n  % indented\n1 1 1\n  %x\n\n1 1 2\n").values == std::vector<double>{2});
}

TEST_CASE("mmio.read.stream_and_string_entry_points", "[cpu][mmio]") {
  const std::string text = kGeneral + "2 2 2\n1 1 1\n2 2 2\n";
  REQUIRE(same(parse(text), parse_matrix_market(text)));
  try {
    parse_matrix_market(kGeneral + "2 2 1\n3 1 1\n", "my.mtx");
    FAIL("no error");
  } catch (const MatrixMarketError& e) {
    REQUIRE(e.source() == "my.mtx");
    REQUIRE(e.line() == 3);
    REQUIRE(e.detail() == "row index 3 is out of range 1..2");
    REQUIRE(std::string(e.what()) == "my.mtx: line 3: row index 3 is out of range 1..2");
  }
}

// One row per message: the input and a substring the message must contain, including the line number.
TEST_CASE("mmio.errors.table", "[cpu][mmio]") {
  struct Row {
    std::string text;
    std::string expect;
  };
  const std::string ok_entry = "1 1 1\n";
  std::string truncated = kGeneral + "% 12 declared, 9 present\n4 4 12\n";
  for (int k = 0; k < 9; ++k) truncated += std::to_string(k % 4 + 1) + " " + std::to_string(k / 4 + 1) + " 1\n";
  truncated += "\n% trailing comment on line 14\n";
  const std::vector<Row> rows = {
      // banner
      {"", "t.mtx: line 1: the file is empty"},
      {"hello\n1 1 1\n", "t.mtx: line 1: expected the banner '%%MatrixMarket matrix coordinate|array"},
      {"\n" + kGeneral, "line 1: expected the banner"},
      {"%MatrixMarket matrix coordinate real general\n", "line 1: expected the banner"},
      {"%%MatrixMarket matrix coordinate real\n1 1 1\n", "line 1: the banner is incomplete"},
      {"%%MatrixMarket matrix coordinate real general extra\n", "line 1: unexpected 'extra' after the banner"},
      {"%%MatrixMarket matrix coordinate complex general\n", "line 1: unsupported field 'complex'"},
      {"%%MatrixMarket matrix coordinate real hermitian\n", "line 1: unsupported symmetry 'hermitian'"},
      {"%%MatrixMarket matrix coordinate real skew-symmetric\n", "line 1: unsupported symmetry 'skew-symmetric'"},
      {"%%MatrixMarket vector coordinate real general\n", "line 1: unsupported object 'vector'"},
      {"%%MatrixMarket tensor coordinate real general\n", "line 1: unknown object 'tensor'"},
      {"%%MatrixMarket matrix sparse real general\n", "line 1: unknown format 'sparse'"},
      {"%%MatrixMarket matrix coordinate float general\n", "line 1: unknown field 'float'"},
      {"%%MatrixMarket matrix coordinate real upper\n", "line 1: unknown symmetry 'upper'"},
      {"%%MatrixMarket matrix array pattern general\n2 2\n", "line 1: field 'pattern' is only valid with the coordinate"},
      {"\x01\xff\n", "line 1: expected the banner '%%MatrixMarket matrix coordinate|array real|integer|pattern "
                     "general|symmetric', found '\\x01\\xff'"},
      // size line
      {kGeneral + "% only a comment\n\n", "line 3: the file ends before the size line"},
      {kGeneral + "3 3\n", "line 2: the size line should be 'rows columns entries', found only 2 numbers"},
      {kGeneral + "3\n", "line 2: the size line should be 'rows columns entries', found only 1 number"},
      {kGeneral + "3 x 3\n", "line 2: size line: columns 'x' is not an integer"},
      {kGeneral + "3 3 1.0\n", "line 2: size line: entries '1.0' is not an integer"},
      {kGeneral + "3 3 1 7\n", "line 2: unexpected '7' after the size line 'rows columns entries'"},
      {kGeneral + "0 3 0\n", "line 2: size line: rows must be at least 1, got 0"},
      {kGeneral + "3 -3 1\n", "line 2: size line: columns must be at least 1, got -3"},
      {kGeneral + "3 3 -1\n", "line 2: size line: entries must be >= 0, got -1"},
      {kGeneral + "3000000000 3 1\n", "line 2: size line: rows 3000000000 exceeds the limit 2147483647 (int32 indices)"},
      {kGeneral + "3 2147483648 1\n", "line 2: size line: columns 2147483648 exceeds the limit 2147483647"},
      {kGeneral + "99999999999999999999 3 1\n", "line 2: size line: rows '99999999999999999999' is far too large"},
      {kGeneral + "3 3 10\n", "line 2: size line declares 10 entries but a 3 x 3 matrix has only 9 positions"},
      {kSymmetric + "3 3 7\n", "line 2: size line declares 7 entries but a symmetric 3 x 3 matrix has only 6 positions"},
      {kSymmetric + "3 4 1\n", "line 2: a symmetric matrix must be square, the size line declares 3 x 4"},
      {kGeneral + "2000000000 2000000000 2147483648\n",
       "line 2: size line declares 2147483648 entries, more than the limit 2147483647 (int32 row_ptr)"},
      {kArray + "2 2 4\n", "line 2: unexpected '4' after the size line 'rows columns'"},
      {kArray + "100000 100000\n", "line 2: an array (dense) 100000 x 100000 matrix holds 10000000000 values, more than"},
      // entry count
      {truncated, "t.mtx: line 14: expected 12 entries (size line at line 3), the file ends after 9"},
      {kGeneral + "2 2 3\n1 1 1\n", "line 3: expected 3 entries (size line at line 2), the file ends after 1"},
      {kGeneral + "2 2 1\n1 1 1\n2 2 2\n", "line 4: more entries than the 1 declared on the size line (line 2)"},
      {kGeneral + "2 2 1\n1 1 1\n% comment\n\n2 2 2\n", "line 6: more entries than the 1 declared"},
      {kArray + "2 2\n1\n2\n3\n", "line 5: expected 4 values (size line at line 2), the file ends after 3"},
      {kArray + "2 2\n1\n2\n3\n4\n5\n", "line 7: more values than the 4 of the 2 x 2 array"},
      // indices
      {kGeneral + "4 4 1\n5 1 1\n", "line 3: row index 5 is out of range 1..4"},
      {kGeneral + "4 4 1\n1 0 1\n", "line 3: column index 0 is out of range 1..4 (indices are 1-based)"},
      {kGeneral + "4 4 1\n-1 1 1\n", "line 3: row index -1 is out of range 1..4"},
      {kGeneral + "4 4 2\n1 1 1\n1 5 1\n", "line 4: column index 5 is out of range 1..4"},
      {kGeneral + "4 4 1\n123456789012345678901 1 1\n", "line 3: row index '123456789012345678901' is out of range"},
      {kGeneral + "4 4 1\n1.5 1 1\n", "line 3: row index '1.5' is not an integer"},
      {kGeneral + "4 4 1\n1,1,1.0\n", "line 3: row index '1,1,1.0' is not an integer"},
      {kSymmetric + "3 3 1\n1 4 1\n", "line 3: column index 4 is out of range 1..3"},
      {kGeneral + "4 4 1\n1\n", "line 3: the entry has no column index (an entry line is 'row column value')"},
      {kPattern + "4 4 1\n2\n", "line 3: the entry has no column index (an entry line is 'row column')"},
      // values
      {kGeneral + "2 2 1\n1 1\n", "line 3: the entry has no value (an entry line is 'row column value')"},
      {kGeneral + "2 2 1\n1 1 abc\n", "line 3: value 'abc' is not a number"},
      {kGeneral + "2 2 1\n1 1 1.0.0\n", "line 3: value '1.0.0' is not a number"},
      {kGeneral + "2 2 1\n1 1 0x10\n", "line 3: value '0x10' is not a number"},
      {kGeneral + "2 2 1\n1 1 +-1\n", "line 3: value '+-1' is not a number"},
      {kGeneral + "2 2 1\n1 1 nan\n", "line 3: value 'nan' is not finite"},
      {kGeneral + "2 2 1\n1 1 -inf\n", "line 3: value '-inf' is not finite"},
      {kGeneral + "2 2 1\n1 1 1e999\n", "line 3: value '1e999' is out of the range of a double"},
      {kInteger + "2 2 1\n1 1 1.5\n", "line 3: value '1.5' is not an integer (the field is 'integer')"},
      {kInteger + "2 2 1\n1 1 99999999999999999999\n", "line 3: value '99999999999999999999' does not fit"},
      {kGeneral + "1 1 2\n1 1 1\n1 1 1\n", "line 2: size line declares 2 entries but a 1 x 1 matrix has only 1 position"},
      // duplicates are summed; a sum that overflows names the line where it does
      {kGeneral + "2 2 3\n1 1 1e308\n2 2 1\n1 1 1e308\n",
       "line 5: duplicate entries at row 1, column 1 sum to infinity"},
      {kSymmetric + "2 2 2\n2 1 -1e308\n1 2 -1e308\n", "line 4: duplicate entries at row 1, column 2 sum to infinity"},
      // trailing garbage
      {kGeneral + "2 2 1\n1 1 1.0 extra\n", "line 3: unexpected 'extra' after the entry"},
      {kGeneral + "2 2 1\n1 1 1.0 % inline comment\n", "line 3: unexpected '%' after the entry"},
      {kPattern + "2 2 1\n1 1 1.0\n", "line 3: unexpected '1.0' after the entry (an entry line is 'row column')"},
      {kArray + "2 1\n1 2\n", "line 3: unexpected '2' after the value (an array file has one value per line)"},
      {kGeneral + "2 2 1\n1 1 1\x01\n", "line 3: value '1\\x01' is not a number"},
      // line numbers count CRLF lines and comments
      {"%%MatrixMarket matrix coordinate real general\r\n%c\r\n2 2 1\r\n\r\n1 3 1\r\n", "line 5: column index 3"},
  };
  for (const Row& row : rows) {
    INFO("input: " << row.text);
    const std::string message = error_of(row.text);
    REQUIRE_THAT(message, ContainsSubstring(row.expect));
  }
}

TEST_CASE("mmio.errors.limits", "[cpu][mmio]") {
  MatrixMarketLimits small;
  small.max_rows = 100;
  small.max_entries = 3;
  REQUIRE_THAT(error_of(kGeneral + "1000 1 0\n", small),
               ContainsSubstring("line 2: size line: rows 1000 exceeds the limit 100 (MatrixMarketLimits::max_rows)"));
  REQUIRE_THAT(error_of(kGeneral + "10 10 4\n", small),
               ContainsSubstring("line 2: size line declares 4 entries, more than the limit 3 "
                                 "(MatrixMarketLimits::max_entries)"));
  // Symmetric expansion is counted too: 2 off-diagonal entries become 4.
  REQUIRE_THAT(error_of(kSymmetric + "3 3 2\n2 1 1\n3 1 1\n", small),
               ContainsSubstring("line 4: the symmetric matrix expands to more than 3 entries"));
  REQUIRE(error_of(kSymmetric + "3 3 2\n2 1 1\n3 3 1\n", small) == "");
}

TEST_CASE("mmio.errors.missing_file", "[cpu][mmio]") {
  try {
    read_matrix_market(std::string("mmio_corpus/no_such_file.mtx"));
    FAIL("no error");
  } catch (const MatrixMarketError& e) {
    REQUIRE(e.line() == 0);
    REQUIRE_THAT(std::string(e.what()), ContainsSubstring("mmio_corpus/no_such_file.mtx: cannot open the file"));
  }
}

TEST_CASE("mmio.write.round_trip", "[cpu][mmio]") {
  SECTION("general, values that need all 17 digits, subnormals and signed zero") {
    const Csr A = from_triplets(3, 4, {0, 0, 1, 2, 2, 2}, {0, 3, 1, 0, 2, 3},
                                {0.1, -1.0 / 3.0, 4.9e-324, 1.7976931348623157e308, -0.0, 6.02214076e23});
    std::stringstream ss;
    write_matrix_market(ss, A);
    REQUIRE_THAT(ss.str(), ContainsSubstring("%%MatrixMarket matrix coordinate real general\n"));
    const Csr B = read_matrix_market(ss);
    REQUIRE(same(A, B));
  }
  SECTION("symmetric writes the lower triangle and reads back the full matrix") {
    const Csr A = random_spd(500, 7, 99);
    std::stringstream ss;
    write_matrix_market(ss, A, true);
    MatrixMarketHeader h;
    const Csr B = read_matrix_market(ss, "rt", {}, &h);
    REQUIRE(h.symmetry == "symmetric");
    REQUIRE(h.entries == (A.nnz() + 500) / 2);  // lower triangle incl. the diagonal
    REQUIRE(same(A, B));
  }
  SECTION("through a file") {
    const Csr A = poisson2d(7, 5);
    const fs::path path = fs::temp_directory_path() / "labkit_test_mmio_round_trip.mtx";
    write_matrix_market(path.string(), A, true);
    const Csr B = read_matrix_market(path.string());
    fs::remove(path);
    REQUIRE(same(A, B));
  }
  SECTION("refusals") {
    std::stringstream ss;
    REQUIRE_THROWS_AS(write_matrix_market(ss, from_dense(2, 2, {1, 2, 3, 4}), true), std::invalid_argument);
    REQUIRE_THROWS_AS(write_matrix_market(ss, from_dense(1, 1, {std::nan("")}), false), std::invalid_argument);
    REQUIRE_THROWS_AS(write_matrix_market(ss, Csr{}, false), std::invalid_argument);
    Csr bad = poisson2d(2, 2);
    bad.col_idx[0] = 3;
    bad.col_idx[1] = 0;
    REQUIRE_THROWS_AS(write_matrix_market(ss, bad, false), std::invalid_argument);
    REQUIRE_THROWS_AS(write_matrix_market(std::string("/nonexistent-dir/x.mtx"), poisson2d(2, 2)), std::runtime_error);
  }
}

TEST_CASE("mmio.read.large_file", "[cpu][mmio]") {
  // 2e5 entries through the whole path (reserve, sort, duplicate merge) to catch size-dependent mistakes.
  const Csr A = random_spd(20000, 11, 5);
  std::stringstream ss;
  write_matrix_market(ss, A, false);
  REQUIRE(same(read_matrix_market(ss), A));
}

// Manual timing, hidden from ctest and from "[mmio]": run with `labkit_tests "[perf]"` (about 10 s, 1.5 GB).
TEST_CASE("mmio.perf.ten_million_entries", "[.][perf]") {
  const Csr A = random_spd(1000000, 11, 1);  // ~1.1e7 stored entries
  std::stringstream ss;
  write_matrix_market(ss, A, false);
  const std::string text = ss.str();
  const auto t0 = std::chrono::steady_clock::now();
  const Csr B = parse_matrix_market(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("parsed " << B.nnz() << " entries (" << text.size() / 1e6 << " MB) in " << s << " s");
  REQUIRE(same(A, B));
}

namespace {

// What fuzz/fuzz_mmio.cpp checks for every input, with the same limits: a clean MatrixMarketError, or a valid CSR
// that survives write + read unchanged (general, and symmetric when is_symmetric says so).
void check_like_the_fuzzer(const std::string& text, const std::string& name) {
  MatrixMarketLimits limits;
  limits.max_rows = 1 << 16;
  limits.max_entries = 1 << 20;
  Csr A;
  try {
    A = parse_matrix_market(text, name, limits);
  } catch (const MatrixMarketError& e) {
    REQUIRE(e.line() >= 1);
    REQUIRE(std::string(e.what()).rfind(name + ": line ", 0) == 0);
    return;
  }
  REQUIRE(A.first_problem() == "");
  for (bool symmetric : {false, true}) {
    if (symmetric && !is_symmetric(A)) continue;
    std::stringstream ss;
    write_matrix_market(ss, A, symmetric);
    REQUIRE(same(read_matrix_market(ss, "round trip", limits), A));
  }
}

}  // namespace

TEST_CASE("mmio.corpus.replay", "[cpu][mmio]") {
  // valid_*: must parse into a valid CSR. bad_*: must throw MatrixMarketError. regressions/*: inputs that once
  // crashed the fuzzer; each must do one or the other, never crash or throw anything else.
  int valid = 0, bad = 0, regressions = 0;
  REQUIRE(fs::is_directory("mmio_corpus"));  // the tests run in common/tests
  for (const auto& entry : fs::recursive_directory_iterator("mmio_corpus")) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
    const std::string name = entry.path().filename().string();
    const std::string where = entry.path().parent_path().filename().string();
    const std::string text = read_file_bytes(entry.path());
    INFO(entry.path().string());
    if (where == "regressions") {
      ++regressions;
      check_like_the_fuzzer(text, name);
    } else if (name.rfind("valid_", 0) == 0) {
      ++valid;
      const Csr A = parse_matrix_market(text, name);
      REQUIRE(A.first_problem() == "");
    } else if (name.rfind("bad_", 0) == 0) {
      ++bad;
      REQUIRE_THROWS_AS(parse_matrix_market(text, name), MatrixMarketError);
    }
  }
  REQUIRE(valid >= 10);
  REQUIRE(bad >= 20);
  INFO(regressions << " regression inputs replayed");
}
