// The Matrix Market reader and writer of labkit/mmio.h, one file of about 500 lines: the writer must produce what
// the reader accepts, and fuzz/CMakeLists.txt builds this file alone (with sparse.cpp) to fuzz both in a round trip.
#include "labkit/mmio.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <ostream>
#include <system_error>
#include <vector>

namespace labkit {

namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

std::string with_location(const std::string& source, std::int64_t line, const std::string& what) {
  return line > 0 ? source + ": line " + std::to_string(line) + ": " + what : source + ": " + what;
}

}  // namespace

MatrixMarketError::MatrixMarketError(std::string source, std::int64_t line, const std::string& what)
    : std::runtime_error(with_location(source, line, what)), source_(std::move(source)), line_(line), detail_(what) {}

namespace {

// A token as it appears in a message: quoted, at most 32 characters, bytes outside printable ASCII escaped, so
// that a binary file produces a readable (and terminal-safe) message.
std::string quote(std::string_view token) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  const std::size_t shown = std::min<std::size_t>(token.size(), 32);
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      out += char(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (token.size() > shown) out += "...";
  return out + "'";
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

// Whitespace-separated fields of one line, without allocating.
class Fields {
 public:
  explicit Fields(std::string_view line) : line_(line) {}
  // The next field, or an empty view at the end of the line.
  std::string_view next() {
    while (pos_ < line_.size() && is_blank(line_[pos_])) ++pos_;
    const std::size_t begin = pos_;
    while (pos_ < line_.size() && !is_blank(line_[pos_])) ++pos_;
    return line_.substr(begin, pos_ - begin);
  }

 private:
  std::string_view line_;
  std::size_t pos_ = 0;
};

enum class Parsed { ok, not_a_number, out_of_range };

// One optional leading '+' (from_chars takes only '-'), then the whole token must be consumed.
std::string_view strip_plus(std::string_view t) {
  if (t.size() > 1 && t[0] == '+' && t[1] != '-' && t[1] != '+') t.remove_prefix(1);
  return t;
}

Parsed parse_int(std::string_view token, std::int64_t& out) {
  const std::string_view t = strip_plus(token);
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  if (ec == std::errc::result_out_of_range) return Parsed::out_of_range;
  if (ec != std::errc() || ptr != t.data() + t.size()) return Parsed::not_a_number;
  return Parsed::ok;
}

// std::from_chars rather than strtod: it is bounded by the token (the text is not NUL-terminated per line),
// ignores the C locale's decimal separator, and is several times faster. Out-of-range results are re-read with
// strtod, which distinguishes overflow (rejected) from underflow to a subnormal or zero (accepted).
Parsed parse_double(std::string_view token, double& out) {
  const std::string_view t = strip_plus(token);
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), out, std::chars_format::general);
  if (ec == std::errc::result_out_of_range && ptr == t.data() + t.size()) {
    const std::string copy(t);
    errno = 0;
    out = std::strtod(copy.c_str(), nullptr);
    return std::isinf(out) ? Parsed::out_of_range : Parsed::ok;
  }
  if (ec != std::errc() || ptr != t.data() + t.size()) return Parsed::not_a_number;
  return Parsed::ok;
}

const char* kBannerForm = "%%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric";

class Parser {
 public:
  Parser(std::string_view text, const std::string& source, const MatrixMarketLimits& limits)
      : text_(text), source_(source), limits_(limits) {
    // Limits above what int32 CSR can hold would only postpone the failure.
    limits_.max_rows = std::min(limits_.max_rows, kMaxInt32);
    limits_.max_entries = std::min(limits_.max_entries, kMaxInt32);
  }

  Csr parse(MatrixMarketHeader* header_out) {
    read_all_lines();
    if (header_out) *header_out = header_;
    // All indices were range-checked while reading, so from_triplets cannot throw here.
    Csr A = from_triplets(std::int32_t(header_.rows), std::int32_t(header_.cols), row_, col_, val_);
    // Finite values can still sum to infinity when duplicates are added up (1e308 twice). Rare, so the line is
    // found only then: a second pass watches that one position and fails where its running sum overflows (the
    // same sum in the same order as from_triplets: duplicates are added in file order).
    for (std::int32_t i = 0; i < A.rows; ++i)
      for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k)
        if (!std::isfinite(A.values[k])) {
          Parser again(text_, source_, limits_);
          again.watch_ = true;
          again.watch_row_ = i;
          again.watch_col_ = A.col_idx[k];
          again.read_all_lines();
          fail("duplicate entries at row " + std::to_string(i + 1) + ", column " + std::to_string(A.col_idx[k] + 1) +
               " sum to a non-finite value");  // not reached: the second pass throws with the line
        }
    return A;
  }

 private:
  void read_all_lines() {
    read_banner();
    read_size_line();
    if (header_.format == "coordinate")
      read_coordinate_entries();
    else
      read_array_entries();
  }

  [[noreturn]] void fail(const std::string& what) const { throw MatrixMarketError(source_, line_no_, what); }

  // The next line without its '\n' (and '\r'); false at the end of the text.
  bool next_line(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const char* begin = text_.data() + pos_;
    const void* nl = std::memchr(begin, '\n', text_.size() - pos_);
    const std::size_t len = nl ? std::size_t(static_cast<const char*>(nl) - begin) : text_.size() - pos_;
    line = std::string_view(begin, len);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ += len + (nl ? 1 : 0);
    ++line_no_;
    return true;
  }

  // The next line that is neither blank nor a comment; false at the end of the text.
  bool next_data_line(std::string_view& line) {
    while (next_line(line)) {
      std::size_t i = 0;
      while (i < line.size() && is_blank(line[i])) ++i;
      if (i < line.size() && line[i] != '%') return true;
    }
    return false;
  }

  void read_banner() {
    std::string_view line;
    if (!next_line(line)) {
      line_no_ = 1;
      fail("the file is empty; expected the banner '" + std::string(kBannerForm) + "'");
    }
    Fields f(line);
    const std::string_view banner = f.next();
    if (lower(banner) != "%%matrixmarket")
      fail("expected the banner '" + std::string(kBannerForm) + "', found " + quote(line));
    const std::string_view object = f.next(), format = f.next(), field = f.next(), symmetry = f.next();
    const std::string extra(f.next());
    if (symmetry.empty())
      fail("the banner is incomplete: expected '" + std::string(kBannerForm) + "', found " + quote(line));
    if (!extra.empty()) fail("unexpected " + quote(extra) + " after the banner's symmetry qualifier");

    const std::string obj = lower(object);
    if (obj == "vector") fail("unsupported object 'vector': labkit reads matrices only");
    if (obj != "matrix") fail("unknown object " + quote(object) + " in the banner (expected 'matrix')");

    header_.format = lower(format);
    if (header_.format != "coordinate" && header_.format != "array")
      fail("unknown format " + quote(format) + " in the banner (expected 'coordinate' or 'array')");

    header_.field = lower(field);
    if (header_.field == "complex")
      fail("unsupported field 'complex': labkit reads real, integer and pattern matrices only");
    if (header_.field != "real" && header_.field != "integer" && header_.field != "pattern")
      fail("unknown field " + quote(field) + " in the banner (expected 'real', 'integer' or 'pattern')");
    if (header_.field == "pattern" && header_.format == "array")
      fail("field 'pattern' is only valid with the coordinate format, not 'array'");

    header_.symmetry = lower(symmetry);
    if (header_.symmetry == "skew-symmetric" || header_.symmetry == "hermitian")
      fail("unsupported symmetry " + quote(symmetry) + ": labkit reads 'general' and 'symmetric' matrices only");
    if (header_.symmetry != "general" && header_.symmetry != "symmetric")
      fail("unknown symmetry " + quote(symmetry) + " in the banner (expected 'general' or 'symmetric')");
    symmetric_ = header_.symmetry == "symmetric";
    pattern_ = header_.field == "pattern";
    integer_ = header_.field == "integer";
  }

  std::int64_t size_field(Fields& f, const char* name, const char* form, int have) {
    const std::string_view t = f.next();
    if (t.empty())
      fail(std::string("the size line should be '") + form + "', found only " + std::to_string(have) +
           (have == 1 ? " number" : " numbers"));
    std::int64_t v = 0;
    switch (parse_int(t, v)) {
      case Parsed::ok: break;
      case Parsed::out_of_range: fail(std::string("size line: ") + name + " " + quote(t) + " is far too large");
      case Parsed::not_a_number:
        fail(std::string("size line: ") + name + " " + quote(t) + " is not an integer (the size line should be '" +
             form + "')");
    }
    return v;
  }

  void check_dimension(const char* name, std::int64_t v) {
    if (v < 1) fail(std::string("size line: ") + name + " must be at least 1, got " + std::to_string(v));
    if (v > limits_.max_rows)
      fail(std::string("size line: ") + name + " " + std::to_string(v) + " exceeds the limit " +
           std::to_string(limits_.max_rows) +
           (limits_.max_rows == kMaxInt32 ? " (int32 indices)" : " (MatrixMarketLimits::max_rows)"));
  }

  std::string entries_limit_reason() const {
    return limits_.max_entries == kMaxInt32 ? " (int32 row_ptr)" : " (MatrixMarketLimits::max_entries)";
  }

  void read_size_line() {
    std::string_view line;
    if (!next_data_line(line)) fail("the file ends before the size line");
    size_line_ = line_no_;
    const bool coordinate = header_.format == "coordinate";
    const char* form = coordinate ? "rows columns entries" : "rows columns";
    Fields f(line);
    header_.rows = size_field(f, "rows", form, 0);
    header_.cols = size_field(f, "columns", form, 1);
    if (coordinate) header_.entries = size_field(f, "entries", form, 2);
    const std::string_view extra = f.next();
    if (!extra.empty()) fail("unexpected " + quote(extra) + " after the size line '" + form + "'");

    check_dimension("rows", header_.rows);
    check_dimension("columns", header_.cols);
    const std::string shape = std::to_string(header_.rows) + " x " + std::to_string(header_.cols);
    if (symmetric_ && header_.rows != header_.cols)
      fail("a symmetric matrix must be square, the size line declares " + shape);
    // Both factors are <= 2^31-1 here, so the products fit int64.
    const std::int64_t positions =
        symmetric_ ? header_.rows * (header_.rows + 1) / 2 : header_.rows * header_.cols;
    if (coordinate) {
      if (header_.entries < 0) fail("size line: entries must be >= 0, got " + std::to_string(header_.entries));
      if (header_.entries > positions)
        fail("size line declares " + std::to_string(header_.entries) + " entries but a " +
             (symmetric_ ? "symmetric " + shape + " matrix has only " + std::to_string(positions) +
                               " positions in one triangle"
                         : shape + " matrix has only " + std::to_string(positions) + (positions == 1 ? " position" : " positions")));
      if (header_.entries > limits_.max_entries)
        fail("size line declares " + std::to_string(header_.entries) + " entries, more than the limit " +
             std::to_string(limits_.max_entries) + entries_limit_reason());
    } else {
      header_.entries = positions;  // an array file holds every value of its (triangle of the) matrix
      if (positions > limits_.max_entries)
        fail("an array (dense) " + shape + " matrix holds " + std::to_string(positions) +
             " values, more than the limit " + std::to_string(limits_.max_entries) + entries_limit_reason());
    }
    // Reserve for what the rest of the input can actually hold (an entry line takes at least 4 bytes), not for
    // what the size line claims: a 40-byte file declaring 2e9 entries must not allocate 32 GB.
    const std::int64_t can_hold = std::int64_t(text_.size() - pos_) / 4 + 1;
    std::int64_t expect = std::min(header_.entries, can_hold);
    if (symmetric_) expect *= 2;
    row_.reserve(std::size_t(expect));
    col_.reserve(std::size_t(expect));
    val_.reserve(std::size_t(expect));
  }

  std::int64_t index_field(std::string_view t, const char* name, std::int64_t bound, const char* form) {
    if (t.empty()) fail(std::string("the entry has no ") + name + " index (an entry line is '" + form + "')");
    std::int64_t v = 0;
    const Parsed p = parse_int(t, v);
    if (p == Parsed::not_a_number) fail(std::string(name) + " index " + quote(t) + " is not an integer");
    if (p == Parsed::out_of_range || v < 1 || v > bound)
      fail(std::string(name) + " index " + (p == Parsed::ok ? std::to_string(v) : quote(t)) + " is out of range 1.." +
           std::to_string(bound) + (p == Parsed::ok && v == 0 ? " (indices are 1-based)" : ""));
    return v;
  }

  double value_field(std::string_view t, const char* form) {
    if (t.empty()) fail(std::string("the entry has no value (an entry line is '") + form + "')");
    if (integer_) {
      std::int64_t v = 0;
      switch (parse_int(t, v)) {
        case Parsed::ok: return double(v);
        case Parsed::out_of_range: fail("value " + quote(t) + " does not fit a 64-bit integer");
        case Parsed::not_a_number: fail("value " + quote(t) + " is not an integer (the field is 'integer')");
      }
    }
    double v = 0;
    switch (parse_double(t, v)) {
      case Parsed::ok: break;
      case Parsed::out_of_range: fail("value " + quote(t) + " is out of the range of a double");
      case Parsed::not_a_number: fail("value " + quote(t) + " is not a number");
    }
    if (!std::isfinite(v)) fail("value " + quote(t) + " is not finite (NaN and infinity are rejected)");
    return v;
  }

  // Adds (i, j) (0-based) and, for symmetric files, its mirror.
  void add(std::int64_t i, std::int64_t j, double v) {
    const std::size_t adding = (symmetric_ && i != j) ? 2 : 1;
    if (std::int64_t(row_.size() + adding) > limits_.max_entries)
      fail("the symmetric matrix expands to more than " + std::to_string(limits_.max_entries) + " entries" +
           entries_limit_reason());
    row_.push_back(std::int32_t(i)), col_.push_back(std::int32_t(j)), val_.push_back(v);
    if (adding == 2) row_.push_back(std::int32_t(j)), col_.push_back(std::int32_t(i)), val_.push_back(v);
    if (watch_ && ((i == watch_row_ && j == watch_col_) || (adding == 2 && j == watch_row_ && i == watch_col_))) {
      watch_sum_ += v;
      if (!std::isfinite(watch_sum_))
        fail("duplicate entries at row " + std::to_string(watch_row_ + 1) + ", column " +
             std::to_string(watch_col_ + 1) + " sum to infinity (overflow of a double; duplicates are summed)");
    }
  }

  [[noreturn]] void fail_truncated(std::int64_t got, const char* what) const {
    throw MatrixMarketError(source_, std::max<std::int64_t>(line_no_, 1),
                            "expected " + std::to_string(header_.entries) + " " + what + " (size line at line " +
                                std::to_string(size_line_) + "), the file ends after " + std::to_string(got));
  }

  void read_coordinate_entries() {
    const char* form = pattern_ ? "row column" : "row column value";
    std::string_view line;
    std::int64_t count = 0;
    while (next_data_line(line)) {
      if (count == header_.entries)
        fail("more entries than the " + std::to_string(header_.entries) + " declared on the size line (line " +
             std::to_string(size_line_) + ")");
      Fields f(line);
      const std::int64_t i = index_field(f.next(), "row", header_.rows, form);
      const std::int64_t j = index_field(f.next(), "column", header_.cols, form);
      const double v = pattern_ ? 1.0 : value_field(f.next(), form);
      const std::string_view extra = f.next();
      if (!extra.empty()) fail("unexpected " + quote(extra) + " after the entry (an entry line is '" + form + "')");
      add(i - 1, j - 1, v);
      ++count;
    }
    if (count < header_.entries) fail_truncated(count, "entries");
  }

  // Column-major values, one per line; symmetric: the lower triangle of each column.
  void read_array_entries() {
    std::string_view line;
    std::int64_t count = 0, r = 0, c = 0;
    while (next_data_line(line)) {
      if (count == header_.entries)
        fail("more values than the " + std::to_string(header_.entries) + " of the " + std::to_string(header_.rows) +
             " x " + std::to_string(header_.cols) + " array declared on the size line (line " +
             std::to_string(size_line_) + ")");
      Fields f(line);
      const double v = value_field(f.next(), "value");
      const std::string_view extra = f.next();
      if (!extra.empty()) fail("unexpected " + quote(extra) + " after the value (an array file has one value per line)");
      if (v != 0) add(r, c, v);
      ++count;
      if (++r == header_.rows) {
        ++c;
        r = symmetric_ ? c : 0;
      }
    }
    if (count < header_.entries) fail_truncated(count, "values");
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::int64_t line_no_ = 0;    // the line last read (1-based)
  std::int64_t size_line_ = 0;  // where the size line was, for messages about the entry count
  const std::string& source_;
  MatrixMarketLimits limits_;
  MatrixMarketHeader header_;
  bool symmetric_ = false, pattern_ = false, integer_ = false;
  bool watch_ = false;  // second pass after an overflowing sum: the position to watch and its running sum
  std::int64_t watch_row_ = 0, watch_col_ = 0;
  double watch_sum_ = 0;
  std::vector<std::int32_t> row_, col_;
  std::vector<double> val_;
};

// The whole stream in one string: line splitting and number parsing on a buffer are several times faster than
// getline + istringstream per line.
std::string read_all(std::istream& in, const std::string& source) {
  std::string text;
  std::size_t used = 0, chunk = std::size_t(1) << 16;
  // A seekable stream (a file, a string stream) says how much is left: one allocation, one read.
  const std::istream::pos_type start = in.tellg();
  if (start != std::istream::pos_type(-1) && in.seekg(0, std::ios::end)) {
    const std::istream::pos_type end = in.tellg();
    in.seekg(start);
    if (end != std::istream::pos_type(-1) && end > start) chunk = std::size_t(end - start) + 1;  // +1: see EOF
  }
  in.clear(in.rdstate() & ~std::ios::failbit);
  while (in) {
    text.resize(used + chunk);
    in.read(&text[used], std::streamsize(chunk));
    used += std::size_t(in.gcount());
    chunk = std::min<std::size_t>(2 * chunk, std::size_t(1) << 30);  // a pipe: grow geometrically
  }
  if (in.bad()) throw MatrixMarketError(source, 0, "read error after " + std::to_string(used) + " bytes");
  text.resize(used);
  return text;
}

}  // namespace

Csr parse_matrix_market(std::string_view text, const std::string& source, const MatrixMarketLimits& limits,
                        MatrixMarketHeader* header) {
  return Parser(text, source, limits).parse(header);
}

Csr read_matrix_market(std::istream& in, const std::string& source, const MatrixMarketLimits& limits,
                       MatrixMarketHeader* header) {
  const std::string text = read_all(in, source);
  return parse_matrix_market(text, source, limits, header);
}

Csr read_matrix_market(const std::string& path, const MatrixMarketLimits& limits, MatrixMarketHeader* header) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MatrixMarketError(path, 0, std::string("cannot open the file: ") + std::strerror(errno));
  return read_matrix_market(in, path, limits, header);
}

// ---- writer ------------------------------------------------------------------------------------------------

void write_matrix_market(std::ostream& out, const Csr& A, bool symmetric) {
  A.validate();
  if (A.rows == 0 || A.cols == 0)
    throw std::invalid_argument("write_matrix_market: a " + std::to_string(A.rows) + " x " + std::to_string(A.cols) +
                                " matrix has no Matrix Market form that read_matrix_market accepts");
  for (double v : A.values)
    if (!std::isfinite(v)) throw std::invalid_argument("write_matrix_market: the matrix holds a non-finite value");
  if (symmetric && !is_symmetric(A))
    throw std::invalid_argument("write_matrix_market: symmetric = true but the matrix is not exactly symmetric "
                                "(writing its lower triangle would change it)");
  std::int64_t count = 0;
  for (std::int32_t i = 0; i < A.rows; ++i)
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) count += (!symmetric || A.col_idx[k] <= i);

  std::string buf = std::string("%%MatrixMarket matrix coordinate real ") + (symmetric ? "symmetric" : "general") +
                    "\n% written by labkit::write_matrix_market\n" + std::to_string(A.rows) + " " +
                    std::to_string(A.cols) + " " + std::to_string(count) + "\n";
  char tmp[64];
  auto put = [&](auto v) {
    // Shortest representation that reads back to the same value (std::to_chars's guarantee for doubles).
    const auto res = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf.append(tmp, res.ptr);
  };
  for (std::int32_t i = 0; i < A.rows; ++i) {
    for (std::int32_t k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      if (symmetric && A.col_idx[k] > i) continue;
      put(i + 1);
      buf += ' ';
      put(A.col_idx[k] + 1);
      buf += ' ';
      put(A.values[k]);
      buf += '\n';
    }
    if (buf.size() > (std::size_t(1) << 20)) {
      out.write(buf.data(), std::streamsize(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), std::streamsize(buf.size()));
  if (!out) throw std::runtime_error("write_matrix_market: the stream failed while writing");
}

void write_matrix_market(const std::string& path, const Csr& A, bool symmetric) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("write_matrix_market: cannot open '" + path + "' for writing: " + std::strerror(errno));
  write_matrix_market(out, A, symmetric);
  out.close();
  if (!out) throw std::runtime_error("write_matrix_market: writing '" + path + "' failed");
}

}  // namespace labkit
