// labkit::HugeDeviceArray (huge.h): a range past 2^32 floats over one repeated chunk and a tail of its own.
#include <catch2/catch_test_macros.hpp>

#include <vector>

#include "labkit/buffer.h"
#include "labkit/device.h"
#include "labkit/huge.h"
#include "test_kernels.h"

namespace {
std::vector<float> counting_floats(std::size_t bytes, float first) {
  std::vector<float> v(bytes / sizeof(float));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = first + float(i % 1000003);
  return v;
}
}  // namespace

TEST_CASE("a huge device array reads its chunk again and again, and its tail once", "[gpu][huge]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  if (const auto why = labkit::HugeDeviceArray::unavailable(); !why.empty()) FAIL(why);
  const std::size_t n = (std::size_t(1) << 32) + 4099;  // floats: a 16 GiB range
  labkit::HugeDeviceArray src(n * 4, 1 << 21), dst(n * 4, 1 << 21);
  REQUIRE(src.bytes() >= n * 4);
  REQUIRE(src.tail_offset() + src.tail_bytes() == src.bytes());
  REQUIRE(src.tail_offset() % src.chunk_bytes() == 0);
  const std::size_t chunk = src.chunk_bytes() / 4, first = src.tail_offset() / 4;
  src.fill_chunk(counting_floats(src.chunk_bytes(), 0.f));
  src.fill_tail(counting_floats(src.tail_bytes(), 1e6f));
  dst.fill_chunk(std::vector<float>(dst.chunk_bytes() / 4, 0.f));
  dst.fill_tail(std::vector<float>(dst.tail_bytes() / 4, 0.f));
  // Indices across the whole range: the start, both sides of 2^31 and 2^32, the chunk's seams, the tail, n - 1.
  const std::vector<unsigned long long> at = {0,          1,          chunk - 1,     chunk,     (1ull << 31) - 1,
                                              1ull << 31, first - 1,  first,         n - 2,     n - 1,
                                              first + 17, 3 * chunk + 5};
  labkit::DeviceBuffer<unsigned long long> d_at(at);
  labkit::DeviceBuffer<float> out(at.size());
  labkit_test::launch_gather_scatter(static_cast<const float*>(src.data()), static_cast<float*>(dst.data()),
                                     d_at.data(), out.data(), int(at.size()));
  LABKIT_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  for (std::size_t k = 0; k < at.size(); ++k) {
    INFO("element " << at[k]);
    const float expected = at[k] < first ? float((at[k] % chunk) % 1000003) : 1e6f + float((at[k] - first) % 1000003);
    CHECK(got[k] == expected);
  }
  // What the kernel stored in the tail is there, once each; below the tail it went to the shared chunk.
  const auto tail = dst.read_tail<float>();
  for (std::size_t k = 0; k < at.size(); ++k)
    if (at[k] >= first) CHECK(tail[at[k] - first] == float(k) + 0.5f);
  CHECK(tail[1] == 0.f);  // no index wrote it
}

TEST_CASE("a huge device array whose length is no whole number of chunks", "[gpu][huge]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  // Lab 02's 65553 x 65573 floats: the driver maps a handle only whole, so the tail takes what the chunks leave.
  const std::size_t bytes = std::size_t(65553) * 65573 * 4;
  labkit::HugeDeviceArray a(bytes, 1 << 21);
  CHECK(a.bytes() >= bytes);
  CHECK(a.tail_offset() % a.chunk_bytes() == 0);
  CHECK(a.tail_bytes() >= (std::size_t(1) << 21));
  CHECK(a.tail_bytes() < a.chunk_bytes() + (std::size_t(1) << 21) + 1);
  a.fill_tail(std::vector<unsigned char>(a.tail_bytes(), 7));
  CHECK(a.read_tail<unsigned char>()[a.tail_bytes() - 1] == 7);
}
