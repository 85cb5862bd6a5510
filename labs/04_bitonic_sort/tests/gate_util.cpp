// Lab 04 gates: the bodies of gate_util.h's helpers (the steps behind one switch, the sort check and its
// diagnosis).
#include "gate_util.h"

#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "labkit/gate.h"
#include "labkit/launches.h"
#include "labkit/ref_sort.h"

namespace lab04_gates {

const char* order_name(Order o) { return o == Order::ascending ? "ascending" : "descending"; }

void run_keys(Step s, float* keys, std::size_t n, Order o) {
  switch (s) {
    case Step::pow2: return lab04::sort_global_pow2(keys, n);  // ascending only
    case Step::global: return lab04::sort_global(keys, n, o);
    case Step::shared: return lab04::sort_shared(keys, n, o);
    case Step::fused: return lab04::sort_fused(keys, n, o);
    case Step::pairs: break;
  }
  throw std::logic_error("run_keys: not a keys-only step");
}

// The calls the correctness gates make: a step's sort must be its own kernels, not
// thrust::sort or a CUB radix sort (labkit/launches.h). The speed gates record through TimedCase::record.
void run_keys_checked(Step s, float* keys, std::size_t n, Order o) {
  labkit::gate::own_kernels(kStepName[int(s)], [&] { run_keys(s, keys, n, o); });
}

namespace {

std::string show(float x) {
  std::ostringstream os;
  if (std::isnan(x)) os << "NaN";
  else if (x == 0) os << (std::signbit(x) ? "-0.0" : "+0.0");
  else os << x;
  os << " (0x" << std::hex << labkit::float_bits(x) << ")";
  return os.str();
}

labkit::Verdict fail(const std::string& message, std::size_t checked, std::size_t wrong) {
  labkit::Verdict v;
  v.ok = false;
  v.checked = checked;
  v.wrong = wrong;
  v.message = message;
  return v;
}

}  // namespace

labkit::Verdict check_sort(const std::vector<float>& got, const std::vector<float>& in, Order order) {
  const std::size_t n = in.size();
  const bool desc = order == Order::descending;
  if (got.size() != n) return fail("keys has " + std::to_string(got.size()) + " elements, expected " +
                                   std::to_string(n), 0, n);
  // 1. A permutation of the input, bit for bit (NaN payloads and zero signs included): compare the sorted bits.
  std::vector<u32> gb(n), ib(n);
  for (std::size_t i = 0; i < n; ++i) gb[i] = labkit::float_bits(got[i]), ib[i] = labkit::float_bits(in[i]);
  labkit::radix_sort_u32(gb);
  labkit::radix_sort_u32(ib);
  if (gb != ib) {
    std::size_t missing = 0, extra = 0, a = 0, b = 0;
    u32 first_missing = 0, first_extra = 0;
    while (a < n || b < n) {  // merge the two sorted bit lists: what the input has that the output lacks, and back
      if (b == n || (a < n && ib[a] < gb[b])) {
        if (!missing++) first_missing = ib[a];
        ++a;
      } else if (a == n || gb[b] < ib[a]) {
        if (!extra++) first_extra = gb[b];
        ++b;
      } else {
        ++a, ++b;
      }
    }
    std::ostringstream os;
    os << "keys is not a permutation of the input: " << missing << " input values are missing (first: "
       << show(labkit::bits_float(first_missing)) << ") and " << extra
       << " values appear that were not in the input, or too often (first: " << show(labkit::bits_float(first_extra))
       << ").\n  A compare-exchange must write both values back (swap, not copy); two threads must never own the "
          "same slot in one step; and every step must see all writes of the previous one (a new launch, or "
          "__syncthreads() in shared memory). Padding slots (>= n) must never be stored.";
    return fail(os.str(), n, missing + extra);
  }
  // 2. In order: no descent of the key from one position to the next.
  std::size_t descents = 0, first = 0, run = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (labkit::float_order_key(got[i - 1], desc) > labkit::float_order_key(got[i], desc)) {
      if (!descents++) first = i;
      const std::size_t low_bit = i & (~i + 1);  // the largest power of two dividing i
      run = run ? std::min(run, low_bit) : low_bit;
    }
  if (!descents) return labkit::Verdict{};
  std::ostringstream os;
  os << "keys is not sorted (" << order_name(order) << ", in the order of labkit::float_order_key): " << descents
     << " places where a key is followed by a smaller one; the first at keys[" << first - 1 << "] = "
     << show(got[first - 1]) << ", keys[" << first << "] = " << show(got[first]) << ".";
  const float x = got[first - 1], y = got[first];
  if (x == 0 && y == 0)
    os << "\n  -0.0 and +0.0 are different keys here (-0.0 first when ascending): compare "
          "labkit::float_order_key() values, not floats with < (which calls them equal).";
  else if (std::isnan(x) || std::isnan(y))
    os << "\n  NaNs sort " << (desc ? "first" : "last") << ": any comparison with a NaN through < is false, so a "
       << "network that compares floats leaves NaNs where they are. Compare labkit::float_order_key() values.";
  else if (n > 1) {
    bool reversed = true;  // sorted, but the other way round?
    for (std::size_t i = 1; i < n && reversed; ++i)
      reversed = labkit::float_order_key(got[i - 1], !desc) <= labkit::float_order_key(got[i], !desc);
    if (reversed) os << "\n  The keys are sorted " << order_name(desc ? Order::ascending : Order::descending)
                     << ": the direction is inverted.";
    else if (run >= 2 && run < n)
      os << "\n  pattern: every run of " << run << " aligned elements is sorted but the runs are not merged: the "
         << "stages k > " << run << " are missing or wrong (in step 3: the global steps j >= chunk, the mirror "
         << "step of each stage, or the shared-memory merge of each stage).";
  }
  return fail(os.str(), n, descents);
}

// Key-value: values started as i ^ mask beside key i; they must come out as a permutation of those, each still
// beside the key it started with.
labkit::Verdict check_pairs(const std::vector<float>& keys, const std::vector<u32>& values,
                            const std::vector<float>& in, Order order, u32 mask) {
  labkit::Verdict v = check_sort(keys, in, order);
  if (!v.ok) return v;
  const std::size_t n = in.size();
  std::vector<char> seen(n, 0);
  for (std::size_t p = 0; p < n; ++p) {
    const u32 idx = values[p] ^ mask;  // the index of the key the value started beside
    if (idx >= n || seen[idx]) {
      std::ostringstream os;
      os << "values is not a permutation of the values passed in: values[" << p << "] = " << values[p]
         << (idx >= n ? " was not among them" : " appears twice")
         << ".\n  Every swap of two keys must swap their two values too, in global and in shared memory; a value "
            "is the caller's data (the gates pass other numbers than 0..n-1): never write a key's index in its place.";
      return fail(os.str(), n, 1);
    }
    seen[idx] = 1;
    if (labkit::float_bits(keys[p]) != labkit::float_bits(in[idx])) {
      std::ostringstream os;
      os << "keys and values were separated: at position " << p << " the key is " << show(keys[p])
         << " but the value " << values[p] << " started beside the key " << show(in[idx]) << " (input position "
         << idx << ")"
         << ".\n  A swap moved a key without its value (or a value without its key), or values were loaded from or "
            "stored to other slots than their keys.";
      return fail(os.str(), n, 1);
    }
  }
  return v;
}

void require_guards(const labkit::GuardReport& g, const std::string& ctx) {
  if (!g.ok) FAIL(ctx << ": " << g.message << "\n  " << labkit::gate::reproduce_hint());
}

}  // namespace lab04_gates
