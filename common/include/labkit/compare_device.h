// Device-side fast paths of compare.h's checks, for the large outputs of speed gates. Copying a 64 MB output and
// its reference to the host and comparing them there costs a speed gate a few hundred milliseconds, during which
// the grading machine's GPU sits idle. A pass on the device computes the same reductions the host check is made of
// (the norm of the expected values, the largest error, the elements that are wrong whatever the tolerance) and
// copies back a few numbers. When they prove that the host check would pass, its passing Verdict is returned; when
// they do not, std::nullopt, and the caller runs the host check on downloaded copies: a failure is diagnosed by
// exactly the code (and message) that diagnosed it before. The device arithmetic is the host's, operation for
// operation (no contraction into fma), so "proved here" and "passes on the host" are the same statement.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "labkit/compare.h"

namespace labkit {

// check_close(got, expected, opt) for device arrays of n elements each (expected in the same type as got, which
// for float and double is the exact value check_close would receive). opt.initial is not read: it only shapes the
// message of a failure, which the host check writes.
template <class T>
std::optional<Verdict> check_close_device(const T* got, const T* expected, std::size_t n, const CheckOptions& opt);

// check_close_at(got, samples, opt) for a device array of n elements: the sampled values are gathered on the
// device and checked on the host, the poison (never-written elements) is counted over the whole array on the
// device. nullopt also for a sample index outside the array (the host check then throws, as before).
template <class T>
std::optional<Verdict> check_close_at_device(const T* got, std::size_t n,
                                             const std::vector<std::pair<std::size_t, double>>& samples,
                                             const CheckOptions& opt);

// check_unmodified for an input the gate filled with fill_random_device(dev, n, seed, lo, hi): each element is
// compared, bit for bit, with the value the generator gives again on the device. The whole Verdict (count and
// first modified index, the same message) comes back; nothing is downloaded.
Verdict check_unmodified_device(const float* dev, std::size_t n, std::uint64_t seed, const std::string& name,
                                float lo = -1.f, float hi = 1.f);
Verdict check_unmodified_device(const double* dev, std::size_t n, std::uint64_t seed, const std::string& name,
                                double lo = -1.0, double hi = 1.0);

// The device verdict where there is one, else the host check `host` (a callable returning a Verdict), which
// downloads what it needs only then.
template <class HostCheck>
Verdict device_or_host(const std::optional<Verdict>& fast, HostCheck&& host) {
  return fast ? *fast : host();
}

}  // namespace labkit
