#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "labkit/guard.h"

namespace labkit {

std::uint64_t next_guard_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

std::size_t default_guard_bytes(std::size_t array_bytes, std::size_t requested_bytes) {
  std::size_t bytes = std::max({kMinGuardBytes, std::min(array_bytes, kMaxGuardBytes), requested_bytes});
  return (bytes + 255) / 256 * 256;
}

bool guard_bands_in_use() {
  static const bool in_use = [] {
    const char* tool = std::getenv("LABKIT_SANITIZER");
    return !(tool && std::string(tool) == "memcheck");
  }();
  return in_use;
}

namespace {

std::uint64_t load_word(const void* base, std::size_t i, unsigned elem_size) {
  if (elem_size == 4) {
    std::uint32_t w;
    std::memcpy(&w, static_cast<const unsigned char*>(base) + i * 4, 4);
    return w;
  }
  std::uint64_t w;
  std::memcpy(&w, static_cast<const unsigned char*>(base) + i * 8, 8);
  return w;
}

std::string hex(std::uint64_t word, unsigned elem_size) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, int(elem_size * 2), word);
  return buf;
}

// "row 1038, column 4": element `index` of the array (negative: before its start) in rows of `row_length`.
std::string row_col(std::ptrdiff_t index, std::size_t row_length) {
  const auto L = static_cast<std::ptrdiff_t>(row_length);
  std::ptrdiff_t row = index / L, col = index % L;
  if (col < 0) col += L, row -= 1;  // floor division for positions before the start
  std::ostringstream os;
  os << "row " << row << ", column " << col;
  return os.str();
}

// What the first changed word holds says what kind of bug wrote it.
std::string contents(std::uint64_t word, unsigned elem_size) {
  if (has_guard_form(word, elem_size))
    return "holds guard bytes that belong elsewhere (another position, or another array's band): out-of-range "
           "data (read past the end of an array) was copied there";
  return "holds " + hex(word, elem_size) + " (a value stored there)";
}

}  // namespace

void fill_guard_host(void* base, std::size_t begin, std::size_t end, unsigned elem_size, std::uint64_t key) {
  auto* bytes = static_cast<unsigned char*>(base);
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint64_t w = guard_word(key, i, elem_size);
    if (elem_size == 4) {
      const auto w32 = static_cast<std::uint32_t>(w);
      std::memcpy(bytes + i * 4, &w32, 4);
    } else {
      std::memcpy(bytes + i * 8, &w, 8);
    }
  }
}

GuardScan scan_guard_host(const void* base, std::size_t begin, std::size_t end, unsigned elem_size,
                          std::uint64_t key) {
  GuardScan s;
  for (std::size_t i = begin; i < end; ++i) {
    if (load_word(base, i, elem_size) == guard_word(key, i, elem_size)) continue;
    if (s.count++ == 0) s.first = i, s.first_word = load_word(base, i, elem_size);
    s.last = i;
  }
  return s;
}

GuardReport guard_report(const GuardScan& lower, const GuardScan& upper, const GuardLayout& g,
                         const std::string& name) {
  GuardReport r;
  r.before = lower.count;
  r.after = upper.count;
  r.ok = r.before == 0 && r.after == 0;
  if (r.ok) return r;
  const std::size_t L = g.row_length;
  const std::size_t band_bytes = g.guard_elems * g.elem_size;
  std::ostringstream os;
  os << "out-of-bounds write:";
  if (r.after) {
    // Word indices of the upper band start at guard_elems + n; the offset past the end counts from 0.
    r.first_after = upper.first - (g.guard_elems + g.n);
    r.last_after = upper.last - (g.guard_elems + g.n);
    os << " " << r.after << " element(s) written past the end of " << name << ", from " << name << "[n+"
       << r.first_after << "] to " << name << "[n+" << r.last_after << "] (n = " << g.n << ", its size)";
    if (L) {
      const auto first = static_cast<std::ptrdiff_t>(g.n + r.first_after);
      const auto last = static_cast<std::ptrdiff_t>(g.n + r.last_after);
      const std::size_t rows = (g.n + L - 1) / L, rows_past = (g.n + r.last_after) / L + 1 - rows;
      os << "; " << name << " has " << rows << " row(s) of " << L << ", the writes reach " << row_col(first, L)
         << " to " << row_col(last, L);
      if (rows_past) os << ": up to " << rows_past << " row(s) past its last row";
    }
    os << "; the first " << contents(upper.first_word, g.elem_size);
    if (r.last_after + 1 == g.guard_elems)
      os << "; they reach the end of the " << band_bytes << "-byte guard band and may go further";
  }
  if (r.before) {
    // The lower band is [0, guard_elems): word i lies guard_elems - i elements before the start.
    r.first_before = -static_cast<std::ptrdiff_t>(g.guard_elems - lower.first);
    const auto closest = -static_cast<std::ptrdiff_t>(g.guard_elems - lower.last);
    os << (r.after ? ";" : "") << " " << r.before << " element(s) written before the start of " << name
       << ", from " << name << "[" << r.first_before << "] to " << name << "[" << closest << "]";
    if (L) os << " (" << row_col(r.first_before, L) << " to " << row_col(closest, L) << ", in rows of " << L << ")";
    if (!r.after) os << "; the lowest " << contents(lower.first_word, g.elem_size);
    if (lower.first == 0)
      os << "; they reach the start of the " << band_bytes << "-byte guard band and may go further";
  }
  os << ": a thread outside the array did not skip its store (check the bounds test before writing)";
  r.message = os.str();
  return r;
}

}  // namespace labkit
