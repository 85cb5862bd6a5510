// Comparison with a diagnosis. The metric is the relative error in the infinity norm,
//     ||got - expected||_inf / ||expected||_inf,
// and an element counts as wrong when its own error alone exceeds tolerance * ||expected||_inf. When the check
// fails, the message says what a student needs to find the bug: how many elements are wrong or were never
// written, the first wrong one with expected and got, and the pattern (whole rows or columns untouched, errors
// only in the partial tiles at the edge, a known mistake such as overwriting instead of accumulating).
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace labkit {

// A wrong answer that a common mistake produces; if the output matches it, the diagnosis names the mistake.
struct Hypothesis {
  std::string mistake;           // "C was overwritten instead of accumulated (C = A*B, the + C is missing)"
  std::vector<double> expected;  // what that mistake computes, same layout as the output
};

struct CheckOptions {
  double tolerance = 0;          // relative infinity-norm tolerance
  double scale = 0;              // > 0: errors are relative to max(||expected||_inf, scale), for results whose
                                 // terms can cancel (C0 + A*B): rounding scales with the terms, not with the sum
  std::string name = "C";        // how the array is called in messages
  std::size_t rows = 1;          // layout for messages and patterns: rows x cols row-major; rows == 1 is a vector
  std::size_t cols = 0;          // 0: cols = size / rows
  const void* initial = nullptr; // in/out arrays: the contents before the call (same type as got); elements still
                                 // bit-identical to it, where the answer differs, count as never written
  std::vector<Hypothesis> hypotheses;
};

struct Verdict {
  bool ok = true;
  double rel_error = 0;
  double tolerance = 0;
  std::size_t checked = 0, wrong = 0, unwritten = 0, nonfinite = 0;
  std::string message;  // empty when ok
};

// Full comparison of every element.
template <class T>
Verdict check_close(const std::vector<T>& got, const std::vector<double>& expected, const CheckOptions& opt);

// Comparison at sampled positions only (for outputs too large for a full CPU reference). Unwritten elements are
// still found over the whole array (poison or initial contents).
template <class T>
Verdict check_close_at(const std::vector<T>& got, const std::vector<std::pair<std::size_t, double>>& samples,
                       const CheckOptions& opt);

// Two runs of the same kernel on the same inputs must agree bit for bit (no atomics in these labs): a difference
// means a race, most often a missing __syncthreads().
template <class T>
Verdict check_same_runs(const std::vector<T>& first, const std::vector<T>& second, const CheckOptions& opt);

// Exact equality (integers, permutations, sorted keys).
template <class T>
Verdict check_equal(const std::vector<T>& got, const std::vector<T>& expected, const CheckOptions& opt);

// An input the kernel must not modify.
template <class T>
Verdict check_unmodified(const std::vector<T>& after, const std::vector<T>& before, const std::string& name);
// check_unmodified's message for an input first modified at index `first` (the device check words it the same).
std::string unmodified_message(const std::string& name, std::size_t first);

// "rows 3, 7, 64-99" from a sorted list of indices.
std::string format_ranges(const std::vector<std::size_t>& sorted_indices, std::size_t max_items = 6);
// "C(3,17)" or "x[42]"
std::string format_index(const CheckOptions& opt, std::size_t index);

}  // namespace labkit
