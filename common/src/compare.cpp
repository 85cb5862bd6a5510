#include "labkit/compare.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "labkit/guard.h"
#include "labkit/reference.h"  // parallel_for

namespace labkit {
namespace {

// How many elements still hold the poison (never written). On every core for large outputs: lab 03's sweep scans
// 1.8 G elements (3 s on one core of the grading machine); the count does not depend on the split.
template <class T>
std::size_t count_poison(const std::vector<T>& got) {
  std::atomic<std::size_t> total{0};
  parallel_for(
      got.size(),
      [&](std::size_t b, std::size_t e) {
        std::size_t c = 0;
        for (std::size_t i = b; i < e; ++i) c += is_poison(got[i]);
        total += c;
      },
      kElementGrain);
  return total;
}

std::size_t cols_of(const CheckOptions& opt, std::size_t n) {
  if (opt.cols) return opt.cols;
  return opt.rows ? n / opt.rows : n;
}

std::string num(double v) {
  std::ostringstream os;
  if (std::isnan(v))
    os << "NaN";
  else
    os << std::setprecision(9) << v;
  return os.str();
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Wrong elements as (index) list, with the shape, turned into the pattern a student can act on.
struct PatternInput {
  std::size_t rows, cols;
  const std::vector<std::size_t>* wrong;  // sorted indices
};

std::string describe_pattern(const CheckOptions& opt, const PatternInput& in) {
  const auto& wrong = *in.wrong;
  if (wrong.empty() || in.rows <= 1 || in.cols == 0) return "";
  std::vector<std::size_t> per_row(in.rows, 0), per_col(in.cols, 0);
  for (std::size_t idx : wrong) {
    ++per_row[idx / in.cols];
    ++per_col[idx % in.cols];
  }
  std::vector<std::size_t> full_rows, full_cols, any_rows, any_cols;
  for (std::size_t r = 0; r < in.rows; ++r) {
    if (per_row[r]) any_rows.push_back(r);
    if (per_row[r] == in.cols) full_rows.push_back(r);
  }
  for (std::size_t c = 0; c < in.cols; ++c) {
    if (per_col[c]) any_cols.push_back(c);
    if (per_col[c] == in.rows) full_cols.push_back(c);
  }
  std::ostringstream os;
  const std::size_t total = in.rows * in.cols;
  if (wrong.size() == total) return "every element is wrong";
  // Whole rows / whole columns.
  if (!full_rows.empty() && full_rows.size() * in.cols == wrong.size())
    os << "whole rows are wrong: " << format_ranges(full_rows) << " (" << full_rows.size() << " of " << in.rows
       << " rows), the others are right";
  else if (!full_cols.empty() && full_cols.size() * in.rows == wrong.size())
    os << "whole columns are wrong: " << format_ranges(full_cols) << " (" << full_cols.size() << " of " << in.cols
       << " columns), the others are right";
  if (!os.str().empty()) return os.str();
  // Errors only in the partial tiles at the bottom/right edge.
  for (std::size_t t : {8, 16, 32, 64, 128, 256}) {
    std::size_t r0 = in.rows / t * t, c0 = in.cols / t * t;
    if (r0 == in.rows && c0 == in.cols) continue;  // no partial tile of this size
    if (r0 == 0 && c0 == 0) continue;              // the whole matrix is one partial tile: says nothing
    bool edge_only = std::all_of(wrong.begin(), wrong.end(), [&](std::size_t idx) {
      return idx / in.cols >= r0 || idx % in.cols >= c0;
    });
    if (edge_only) {
      os << "all wrong elements lie at the edge: rows >= " << r0 << " or columns >= " << c0 << " of " << in.rows
         << "x" << in.cols << " (the partial tiles if the tile is " << t << " wide): check the bounds tests for "
         << "the last, incomplete tile";
      return os.str();
    }
  }
  os << "wrong elements in rows " << format_ranges(any_rows) << " and columns " << format_ranges(any_cols);
  return os.str();
}

// The indices i < n where differs(i), in ascending order, found on every core: lab 05's repeat runs and unmodified
// inputs compare 2^24 elements, lab 01's 4 M, about 20 ms each on one core. Ranges are merged in index order, so
// the list is the one a single loop gives.
template <class Differs>
std::vector<std::size_t> differing_indices(std::size_t n, const Differs& differs) {
  std::vector<std::size_t> all;
  for (const auto& found : parallel_parts<std::vector<std::size_t>>(n, [&](std::size_t b, std::size_t e) {
         std::vector<std::size_t> f;
         for (std::size_t i = b; i < e; ++i)
           if (differs(i)) f.push_back(i);
         return f;
       }))
    all.insert(all.end(), found.begin(), found.end());
  return all;
}

template <class T>
double to_double(const T& v) {
  return static_cast<double>(v);
}

}  // namespace

std::string format_ranges(const std::vector<std::size_t>& idx, std::size_t max_items) {
  std::ostringstream os;
  std::size_t items = 0;
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) ++j;
    if (items == max_items) {
      os << ", ...";
      break;
    }
    if (items) os << ", ";
    os << idx[i];
    if (j > i) os << "-" << idx[j];
    ++items;
    i = j + 1;
  }
  return os.str();
}

std::string format_index(const CheckOptions& opt, std::size_t index) {
  std::ostringstream os;
  if (opt.rows > 1 && opt.cols) {
    os << opt.name << "(" << index / opt.cols << "," << index % opt.cols << ")";
  } else if (opt.rows > 1) {
    os << opt.name << "[" << index << "]";
  } else {
    os << opt.name << "[" << index << "]";
  }
  return os.str();
}

namespace {

template <class T>
Verdict finish(const std::vector<T>& got, const CheckOptions& opt, Verdict v, std::vector<std::size_t>& wrong,
               std::size_t first_bad, double first_expected, double norm, const std::string& scope) {
  CheckOptions named = opt;
  named.cols = cols_of(opt, got.size());
  v.ok = wrong.empty() && v.unwritten == 0;
  if (v.ok) return v;
  std::ostringstream os;
  os << std::setprecision(3);
  os << opt.name << " is wrong" << scope << ": relative error " << v.rel_error << " (allowed " << v.tolerance
     << ")";
  if (v.unwritten)
    os << "\n  " << v.unwritten << " of " << got.size() << " elements were never written (still "
       << (opt.initial ? "their initial value" : "the poison value") << ")";
  if (!wrong.empty()) {
    os << "\n  " << wrong.size() << " of " << v.checked << " checked elements are wrong";
    if (v.nonfinite) os << " (" << v.nonfinite << " are NaN or Inf)";
    os << "\n  first wrong element " << format_index(named, first_bad) << " [index " << first_bad
       << "]: expected " << num(first_expected) << ", got " << num(to_double(got[first_bad]));
    if (is_poison(got[first_bad])) os << " (poison: never written)";
    os << "; allowed error " << num(v.tolerance * norm);
  }
  std::sort(wrong.begin(), wrong.end());
  if (named.rows > 1 && v.checked == got.size()) {
    std::string pattern = describe_pattern(named, PatternInput{named.rows, named.cols, &wrong});
    if (!pattern.empty()) os << "\n  pattern: " << pattern;
  }
  v.message = os.str();
  return v;
}

template <class T>
bool untouched(const std::vector<T>& got, const CheckOptions& opt, std::size_t i) {
  if (is_poison(got[i])) return true;
  if (opt.initial) return same_bits(got[i], static_cast<const T*>(opt.initial)[i]);
  return false;
}

}  // namespace

template <class T>
Verdict check_close(const std::vector<T>& got, const std::vector<double>& expected, const CheckOptions& opt) {
  Verdict v;
  v.tolerance = opt.tolerance;
  if (got.size() != expected.size()) {
    v.ok = false;
    v.message = opt.name + " has " + std::to_string(got.size()) + " elements, expected " +
                std::to_string(expected.size());
    return v;
  }
  // Large outputs (lab 06's 8192^2 C, 67 M elements: ~0.4 s a check on one core) are compared on every core, in
  // ranges whose findings are merged in index order: the verdict is the one a single pass would give.
  struct Part {
    double norm = 0, max_err = 0;
    std::size_t nonfinite = 0, unwritten = 0;
    std::vector<std::size_t> wrong;
  };
  std::mutex parts_mutex;
  std::map<std::size_t, Part> parts;  // by the first index of the range
  auto in_ranges = [&](const std::function<void(std::size_t, std::size_t, Part&)>& body) {
    parts.clear();
    auto run = [&](std::size_t b, std::size_t e) {
      Part part;
      body(b, e, part);
      std::lock_guard<std::mutex> lock(parts_mutex);
      parts.emplace(b, std::move(part));
    };
    parallel_for(got.size(), run, kElementGrain);
  };
  in_ranges([&](std::size_t b, std::size_t e, Part& part) {
    for (std::size_t i = b; i < e; ++i)
      if (std::isfinite(expected[i])) part.norm = std::max(part.norm, std::fabs(expected[i]));
  });
  double norm = 0;
  for (const auto& [b, part] : parts) norm = std::max(norm, part.norm);
  norm = std::max(norm, opt.scale);
  const double allowed = opt.tolerance * (norm > 0 ? norm : 1.0);
  in_ranges([&](std::size_t b, std::size_t end, Part& part) {
    for (std::size_t i = b; i < end; ++i) {
      const double g = to_double(got[i]), e = expected[i];
      bool bad;
      if (!std::isfinite(e)) {
        bad = !(std::isnan(e) ? std::isnan(g) : g == e);
      } else if (!std::isfinite(g)) {
        bad = true;
        ++part.nonfinite;
        part.max_err = std::numeric_limits<double>::infinity();
      } else {
        double err = std::fabs(g - e);
        part.max_err = std::max(part.max_err, err);
        bad = err > allowed;
      }
      if (bad) {
        // An element that still holds its initial value where the answer differs was never written.
        if (untouched(got, opt, i)) ++part.unwritten;
        part.wrong.push_back(i);
      }
    }
  });
  std::vector<std::size_t> wrong;
  double max_err = 0;
  for (auto& [b, part] : parts) {
    max_err = std::max(max_err, part.max_err);
    v.nonfinite += part.nonfinite;
    v.unwritten += part.unwritten;
    wrong.insert(wrong.end(), part.wrong.begin(), part.wrong.end());
  }
  const std::size_t first_bad = wrong.empty() ? 0 : wrong.front();
  const double first_expected = wrong.empty() ? 0 : expected[first_bad];
  v.checked = got.size();
  v.wrong = wrong.size();
  v.rel_error = norm > 0 ? max_err / norm : max_err;
  v = finish(got, opt, v, wrong, first_bad, first_expected, norm, "");
  if (!v.ok) {
    for (const auto& h : opt.hypotheses) {
      if (h.expected.size() != got.size()) continue;
      bool match = true;
      for (std::size_t i = 0; i < got.size() && match; ++i)
        match = std::isfinite(to_double(got[i])) && std::fabs(to_double(got[i]) - h.expected[i]) <= allowed;
      if (match) {
        v.message += "\n  likely cause: " + h.mistake;
        break;
      }
    }
  }
  return v;
}

template <class T>
Verdict check_close_at(const std::vector<T>& got, const std::vector<std::pair<std::size_t, double>>& samples,
                       const CheckOptions& opt) {
  Verdict v;
  v.tolerance = opt.tolerance;
  double norm = 0;
  for (const auto& s : samples)
    if (std::isfinite(s.second)) norm = std::max(norm, std::fabs(s.second));
  norm = std::max(norm, opt.scale);
  const double allowed = opt.tolerance * (norm > 0 ? norm : 1.0);
  std::vector<std::size_t> wrong;
  double max_err = 0, first_expected = 0;
  std::size_t first_bad = 0;
  for (const auto& [i, e] : samples) {
    const double g = to_double(got.at(i));
    bool bad = !std::isfinite(g) || std::fabs(g - e) > allowed;
    if (!std::isfinite(g)) ++v.nonfinite;
    max_err = std::max(max_err, std::isfinite(g) ? std::fabs(g - e) : std::numeric_limits<double>::infinity());
    if (bad) {
      if (wrong.empty() || i < first_bad) {
        first_bad = i;
        first_expected = e;
      }
      wrong.push_back(i);
    }
  }
  v.unwritten += count_poison(got);  // initial-value checks need the answer; poison needs nothing
  v.checked = samples.size();
  v.wrong = wrong.size();
  v.rel_error = norm > 0 ? max_err / norm : max_err;
  return finish(got, opt, v, wrong, first_bad, first_expected, norm, " (at sampled positions)");
}

template <class T>
Verdict check_same_runs(const std::vector<T>& first, const std::vector<T>& second, const CheckOptions& opt) {
  Verdict v;
  CheckOptions named = opt;
  named.cols = cols_of(opt, first.size());
  const std::vector<std::size_t> diff = differing_indices(
      std::min(first.size(), second.size()), [&](std::size_t i) { return !same_bits(first[i], second[i]); });
  v.checked = first.size();
  v.wrong = diff.size();
  v.ok = diff.empty() && first.size() == second.size();
  if (!v.ok) {
    std::ostringstream os;
    os << "two identical runs gave different " << opt.name << ": " << diff.size() << " elements differ, first "
       << format_index(named, diff.front()) << " (" << num(to_double(first[diff.front()])) << " then "
       << num(to_double(second[diff.front()])) << ").\n  Results that change between identical runs mean a "
       << "race: most often a missing __syncthreads() between writing shared memory and reading it, or before "
       << "the next tile overwrites it.";
    v.message = os.str();
  }
  return v;
}

template <class T>
Verdict check_equal(const std::vector<T>& got, const std::vector<T>& expected, const CheckOptions& opt) {
  Verdict v;
  CheckOptions named = opt;
  named.cols = cols_of(opt, got.size());
  if (got.size() != expected.size()) {
    v.ok = false;
    v.message = opt.name + " has " + std::to_string(got.size()) + " elements, expected " +
                std::to_string(expected.size());
    return v;
  }
  std::vector<std::size_t> wrong;
  for (std::size_t i = 0; i < got.size(); ++i) {
    bool eq = same_bits(got[i], expected[i]) || got[i] == expected[i];
    if (!eq) {
      wrong.push_back(i);
      if (is_poison(got[i])) ++v.unwritten;
    }
  }
  v.checked = got.size();
  v.wrong = wrong.size();
  v.ok = wrong.empty();
  if (!v.ok) {
    std::ostringstream os;
    os << opt.name << " is wrong: " << wrong.size() << " of " << got.size() << " elements differ";
    if (v.unwritten) os << " (" << v.unwritten << " never written: still the poison value)";
    os << "\n  first wrong element " << format_index(named, wrong.front()) << ": expected "
       << num(to_double(expected[wrong.front()])) << ", got " << num(to_double(got[wrong.front()]));
    if (named.rows > 1) {
      std::string pattern = describe_pattern(named, PatternInput{named.rows, named.cols, &wrong});
      if (!pattern.empty()) os << "\n  pattern: " << pattern;
    }
    v.message = os.str();
  }
  return v;
}

std::string unmodified_message(const std::string& name, std::size_t first) {
  return "the input " + name + " was modified (first at " + name + "[" + std::to_string(first) +
         "]): a kernel wrote to an array it should only read";
}

template <class T>
Verdict check_unmodified(const std::vector<T>& after, const std::vector<T>& before, const std::string& name) {
  Verdict v;
  v.checked = before.size();
  const std::vector<std::size_t> changed =
      differing_indices(before.size(), [&](std::size_t i) { return !same_bits(after[i], before[i]); });
  v.wrong = changed.size();
  if (v.wrong)
    v.message = unmodified_message(name, changed.front());
  v.ok = v.wrong == 0;
  return v;
}

#define LABKIT_INSTANTIATE(T)                                                                               \
  template Verdict check_close<T>(const std::vector<T>&, const std::vector<double>&, const CheckOptions&);  \
  template Verdict check_close_at<T>(const std::vector<T>&, const std::vector<std::pair<std::size_t, double>>&, \
                                     const CheckOptions&);                                                  \
  template Verdict check_same_runs<T>(const std::vector<T>&, const std::vector<T>&, const CheckOptions&);   \
  template Verdict check_equal<T>(const std::vector<T>&, const std::vector<T>&, const CheckOptions&);       \
  template Verdict check_unmodified<T>(const std::vector<T>&, const std::vector<T>&, const std::string&);
LABKIT_INSTANTIATE(float)
LABKIT_INSTANTIATE(double)
LABKIT_INSTANTIATE(std::int32_t)
LABKIT_INSTANTIATE(std::uint32_t)
LABKIT_INSTANTIATE(std::int64_t)
LABKIT_INSTANTIATE(std::uint64_t)
#undef LABKIT_INSTANTIATE

}  // namespace labkit
