// Guard bands: the pattern, the width and the report, on the host (the device scan computes what
// scan_guard_host computes); the last two cases run the same on the device and skip without one.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <set>
#include <vector>

#include "labkit/device.h"
#include "labkit/gate.h"
#include "labkit/guard.h"
#include "labkit/launches.h"
#include "test_kernels.h"

using Catch::Matchers::ContainsSubstring;
using labkit::GuardLayout;
using labkit::GuardScan;

namespace {

float as_float(std::uint64_t w) {
  const auto w32 = static_cast<std::uint32_t>(w);
  float f;
  std::memcpy(&f, &w32, 4);
  return f;
}
double as_double(std::uint64_t w) {
  double d;
  std::memcpy(&d, &w, 8);
  return d;
}

// A host model of one guarded allocation: [lower band | array | upper band], filled as the device fills it.
struct HostGuarded {
  std::size_t n, g;
  unsigned elem;
  std::uint64_t key;
  std::vector<unsigned char> bytes;
  HostGuarded(std::size_t n_, std::size_t g_, unsigned elem_, std::uint64_t id)
      : n(n_), g(g_), elem(elem_), key(labkit::guard_key(id)), bytes((n_ + 2 * g_) * elem_) {
    labkit::fill_guard_host(bytes.data(), 0, n + 2 * g, elem, key);
  }
  unsigned char* word(std::size_t i) { return bytes.data() + i * elem; }
  std::size_t after(std::size_t k) const { return g + n + k; }  // word index of element n+k
  std::size_t before(std::size_t k) const { return g - k; }     // word index of element -k
  labkit::GuardReport report(const std::string& name, std::size_t row_length = 0) const {
    const GuardScan lo = labkit::scan_guard_host(bytes.data(), 0, g, elem, key);
    const GuardScan hi = labkit::scan_guard_host(bytes.data(), g + n, 2 * g + n, elem, key);
    return labkit::guard_report(lo, hi, GuardLayout{n, g, elem, row_length}, name);
  }
};

}  // namespace

TEST_CASE("every guard word is a signalling NaN whose arithmetic changes its bits", "[cpu][guard]") {
  const std::uint64_t key = labkit::guard_key(7);
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const std::uint64_t w4 = labkit::guard_word(key, i, 4), w8 = labkit::guard_word(key, i, 8);
    REQUIRE(w4 >> 32 == 0);
    REQUIRE(std::isnan(as_float(w4)));
    REQUIRE(std::isnan(as_double(w8)));
    REQUIRE((w4 & 0x00400000u) == 0);              // quiet bit clear
    REQUIRE((w8 & 0x0008000000000000ull) == 0);    // quiet bit clear
    REQUIRE(labkit::has_guard_form(w4, 4));
    REQUIRE(labkit::has_guard_form(w8, 8));
    // What arithmetic on it returns: the GPU's canonical NaN, or the same payload made quiet (x86, and fp64 on
    // GPUs that keep payloads). Neither is a guard word.
    REQUIRE(0x7FFFFFFFull != w4);
    REQUIRE_FALSE(labkit::has_guard_form(w4 | 0x00400000u, 4));
    REQUIRE_FALSE(labkit::has_guard_form(w8 | 0x0008000000000000ull, 8));
  }
  // And on this CPU: a + 0.0f on a guard word (what a thread past the edge of a zero-padded tile does).
  volatile float f = as_float(labkit::guard_word(key, 3, 4));
  const float g = f + 0.0f;
  std::uint32_t gb;
  std::memcpy(&gb, &g, 4);
  CHECK(gb != labkit::guard_word(key, 3, 4));
  // Neither the poison nor ordinary values look like guard bytes.
  std::uint32_t poison;
  const float p = labkit::poison_value<float>();
  std::memcpy(&poison, &p, 4);
  CHECK_FALSE(labkit::has_guard_form(poison, 4));
  CHECK_FALSE(labkit::has_guard_form(0x7FFFFFFFu, 4));
  CHECK_FALSE(labkit::has_guard_form(0xFFFFFFFFu, 4));  // the old guard byte pattern
  CHECK_FALSE(labkit::has_guard_form(0x3F800000u, 4));  // 1.0f
  CHECK_FALSE(labkit::has_guard_form(0xFFFFFFFFFFFFFFFFull, 8));
}

TEST_CASE("the gate's own kernels inside a step's scope are told by their names in namespace labkit", "[cpu][guard]") {
  // own_kernels_ran leaves these out of the step's records: the stream spin and the shared-memory fill between a
  // batch's calls. CUPTI reports mangled names; a demangled one counts too. Nothing outside namespace labkit does.
  CHECK(labkit::is_stream_spin("_ZN6labkit11stream_spinEy"));
  CHECK(labkit::is_stream_spin("labkit::stream_spin(unsigned long long)"));
  CHECK(labkit::is_shared_poison("_ZN6labkit13poison_sharedEj"));
  CHECK(labkit::is_shared_poison("labkit::poison_shared(unsigned int)"));
  for (const char* other : {"_ZN5lab0811stream_spinEy", "_ZN5lab0113poison_sharedEj", "_ZN6labkit14stream_spinnerEy",
                            "labkit::stream_spinner(int)", "lab01::poison_shared(unsigned int)", "poison_shared", "_Z",
                            ""}) {
    INFO(other);
    CHECK_FALSE(labkit::is_stream_spin(other));
    CHECK_FALSE(labkit::is_shared_poison(other));
  }
}

TEST_CASE("guard words differ between positions and between buffers", "[cpu][guard]") {
  // A copy of a run of guard words to another place is seen unless every word of the run equals its target;
  // with 21 random bits a word, about 1 pair in 2 million agrees, so even a copy of 2 words is all but certain
  // to be seen. Measure that rate for the shifts a kernel gets wrong (one element, one tile, one row).
  const std::uint64_t a = labkit::guard_key(1), b = labkit::guard_key(2);
  CHECK(a != b);
  for (unsigned elem : {4u, 8u}) {
    for (std::uint64_t shift : {1ull, 32ull, 999ull, 4096ull, 65536ull}) {
      int same = 0;
      for (std::uint64_t i = 0; i < 100000; ++i)
        same += labkit::guard_word(a, i, elem) == labkit::guard_word(a, i + shift, elem);
      CHECK(same <= 2);  // expectation 0.05 for 4-byte words
    }
    int same = 0;  // the same position in another buffer (out-of-range input copied to out-of-range output)
    for (std::uint64_t i = 0; i < 100000; ++i) same += labkit::guard_word(a, i, elem) == labkit::guard_word(b, i, elem);
    CHECK(same <= 2);
  }
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 100; ++i) ids.insert(labkit::next_guard_id());
  CHECK(ids.size() == 100);
}

TEST_CASE("the guard band is at least one tile row of every lab 01 shape and bounded", "[cpu][guard]") {
  // Bands everywhere but under memcheck (LABKIT_SANITIZER=memcheck: the array is its own allocation there, so that
  // memcheck sees a read past its end); this test process runs without it.
  CHECK(labkit::guard_bands_in_use() == (std::getenv("LABKIT_SANITIZER") == nullptr ||
                                         std::string(std::getenv("LABKIT_SANITIZER")) != "memcheck"));
  CHECK(labkit::default_guard_bytes(0) == labkit::kMinGuardBytes);
  CHECK(labkit::default_guard_bytes(4) == labkit::kMinGuardBytes);
  CHECK(labkit::default_guard_bytes(std::size_t(16) << 20) == std::size_t(16) << 20);  // 2048^2 floats
  CHECK(labkit::default_guard_bytes(std::size_t(1) << 30) == labkit::kMaxGuardBytes);  // a 1 GiB array (2^28 floats)
  CHECK(labkit::default_guard_bytes(4, std::size_t(100) << 20) == std::size_t(100) << 20);  // a gate asks for more
  CHECK(labkit::default_guard_bytes((std::size_t(3) << 20) + 3) % 256 == 0);  // the array stays 256-byte aligned
  // A store one whole tile row too far (T rows of N elements after the last row) lands inside the band, for the
  // shapes lab 01 tests and the tiles its steps use (32, 64 and 128 rows; floats), and for lab 06 (doubles).
  const int shapes[][2] = {{1, 1},     {2, 3},       {7, 13},     {31, 37},    {33, 65},
                           {64, 64},   {127, 131},   {1, 300},    {300, 1},    {5, 7},
                           {1000, 1100}, {1037, 999}, {513, 1027}, {1024, 1024}, {2048, 2048}};
  for (const auto& s : shapes)
    for (std::size_t elem : {4, 8})
      for (std::size_t T : {32, 64, 128}) {
        const std::size_t M = s[0], N = s[1];
        const std::size_t tile_row = T * N * elem, band = labkit::default_guard_bytes(M * N * elem);
        INFO("M=" << M << " N=" << N << " tile rows " << T << " of " << elem << "-byte elements");
        CHECK(tile_row <= band);
      }
}

TEST_CASE("an intact band passes; a copy of guard bytes onto guard bytes fails", "[cpu][guard]") {
  HostGuarded c(1000, 4096, 4, 11);
  CHECK(c.report("C").ok);
  CHECK(c.report("C").message.empty());
  // The measured miss: a tile row of 32 guard words copied one tile row further. Under one byte pattern
  // everywhere nothing changed; here every word moved to a position whose word differs.
  std::memcpy(c.word(c.after(32)), c.word(c.after(0)), 32 * 4);
  const auto r = c.report("C");
  REQUIRE_FALSE(r.ok);
  CHECK(r.after == 32);
  CHECK(r.first_after == 32);
  CHECK(r.last_after == 63);
  CHECK(r.before == 0);
  CHECK_THAT(r.message, ContainsSubstring("out-of-bounds write: 32 element(s) written past the end of C"));
  CHECK_THAT(r.message, ContainsSubstring("from C[n+32] to C[n+63] (n = 1000, its size)"));
  CHECK_THAT(r.message, ContainsSubstring("guard bytes that belong elsewhere"));
}

TEST_CASE("guard bytes of another buffer copied to the same position are seen", "[cpu][guard]") {
  // A transpose-like copy that reads past the end of `in` and writes past the end of `out`: equal sizes, equal
  // offsets, so only the per-buffer key tells the words apart.
  HostGuarded in(256, 1024, 4, 21), out(256, 1024, 4, 22);
  std::memcpy(out.word(out.after(0)), in.word(in.after(0)), 64 * 4);
  const auto r = out.report("out");
  REQUIRE_FALSE(r.ok);
  CHECK(r.after == 64);
  CHECK_THAT(r.message, ContainsSubstring("guard bytes that belong elsewhere"));
  CHECK(in.report("in").ok);
}

TEST_CASE("computed values, far writes and writes before the start are located", "[cpu][guard]") {
  SECTION("C[n+2] += 0 on the GPU: the canonical NaN") {
    HostGuarded c(10, 4096, 4, 31);
    const std::uint32_t canonical = 0x7FFFFFFF;
    std::memcpy(c.word(c.after(2)), &canonical, 4);
    const auto r = c.report("C");
    REQUIRE_FALSE(r.ok);
    CHECK(r.first_after == 2);
    CHECK_THAT(r.message, ContainsSubstring("C[n+2] to C[n+2]"));
    CHECK_THAT(r.message, ContainsSubstring("holds 0x7fffffff (a value stored there)"));
    CHECK_THAT(r.message, ContainsSubstring("did not skip its store"));
  }
  SECTION("the far end of the band: it may go further") {
    HostGuarded c(10, 4096, 8, 32);
    const double v = 1.5;
    std::memcpy(c.word(c.after(4095)), &v, 8);
    const auto r = c.report("y");
    REQUIRE_FALSE(r.ok);
    CHECK(r.first_after == 4095);
    CHECK_THAT(r.message, ContainsSubstring("holds 0x3ff8000000000000"));
    CHECK_THAT(r.message, ContainsSubstring("reach the end of the 32768-byte guard band and may go further"));
  }
  SECTION("before the start: element -1 and the start of the band") {
    HostGuarded c(10, 4096, 4, 33);
    std::memset(c.word(c.before(1)), 0, 4);
    auto r = c.report("C");
    REQUIRE_FALSE(r.ok);
    CHECK(r.first_before == -1);
    CHECK_THAT(r.message, ContainsSubstring("1 element(s) written before the start of C, from C[-1] to C[-1]"));
    std::memset(c.word(0), 0, 4);
    r = c.report("C");
    CHECK(r.first_before == -4096);
    CHECK_THAT(r.message, ContainsSubstring("from C[-4096] to C[-1]"));
    CHECK_THAT(r.message, ContainsSubstring("reach the start of the 16384-byte guard band"));
  }
  SECTION("both sides in one message") {
    HostGuarded c(10, 64, 4, 34);
    std::memset(c.word(c.after(0)), 0, 4);
    std::memset(c.word(c.before(3)), 0, 4);
    const auto r = c.report("C");
    CHECK(r.after == 1);
    CHECK(r.before == 1);
    CHECK_THAT(r.message, ContainsSubstring("past the end of C") && ContainsSubstring("before the start of C"));
  }
}

TEST_CASE("with the row length known, the diagnosis names rows past the last one", "[cpu][guard]") {
  // A 37 x 100 matrix (rows 0..36) whose tile store wrote rows 37..63 of columns 0..31 (a 32-row tile past M).
  HostGuarded c(37 * 100, 8192, 4, 41);
  const std::uint32_t canonical = 0x7FFFFFFF;
  for (std::size_t row = 37; row < 64; ++row)
    for (std::size_t col = 0; col < 32; ++col) std::memcpy(c.word(c.after((row - 37) * 100 + col)), &canonical, 4);
  const auto r = c.report("C", 100);
  REQUIRE_FALSE(r.ok);
  CHECK(r.after == 27 * 32);
  CHECK(r.first_after == 0);
  CHECK(r.last_after == 26 * 100 + 31);
  CHECK_THAT(r.message, ContainsSubstring("C has 37 row(s) of 100, the writes reach row 37, column 0 to row 63, "
                                          "column 31: up to 27 row(s) past its last row"));
  // Without the row length: elements only.
  CHECK_THAT(c.report("C").message, !ContainsSubstring("row(s) past"));
  // Before the start, rows are negative.
  HostGuarded d(37 * 100, 8192, 4, 42);
  std::memcpy(d.word(d.before(150)), &canonical, 4);
  CHECK_THAT(d.report("C", 100).message,
             ContainsSubstring("C[-150] to C[-150] (row -2, column 50 to row -2, column 50"));
}

// ---- on the device (skipped without one) -------------------------------------------------------------------

TEST_CASE("device guards: intact, copied guard bytes, far writes, another buffer's band", "[guard][gpu]") {
  LABKIT_REQUIRE_GPU();
  labkit::GuardedBuffer<float> c(1000, "C"), a(1000, "A");
  c.set_row_length(100);
  REQUIRE(c.guard_elems() == labkit::kMinGuardBytes / 4);
  c.poison();
  REQUIRE(c.check_guards().ok);
  REQUIRE(a.check_guards().ok);
  {  // download_into gives what download gives, whatever the vector held before (larger or smaller)
    std::vector<float> values(1000);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i) - 500.f;
    a.upload(values);
    std::vector<float> into(5000, 7.f), small(3, 7.f);
    a.download_into(into);
    a.download_into(small);
    CHECK(into == values);
    CHECK(small == values);
    CHECK(a.download() == values);
  }
  float* end = c.data() + c.size();
  // Word index of element n+k in the allocation, and how many of `count` words copied from `from` to `to`
  // (element offsets past the end) differ from what was there: the count the device scan must find.
  const auto at = [&](std::size_t k) { return c.guard_elems() + c.size() + k; };
  const auto moved = [](std::uint64_t key_from, std::size_t from, std::uint64_t key_to, std::size_t to,
                        std::size_t count) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < count; ++i)
      d += labkit::guard_word(key_from, from + i, 4) != labkit::guard_word(key_to, to + i, 4);
    return d;
  };
  SECTION("a tile row of guard bytes copied one tile row further (device to device)") {
    LABKIT_CUDA(cudaMemcpy(end + 3200, end, 3200 * sizeof(float), cudaMemcpyDeviceToDevice));
    const auto r = c.check_guards();
    REQUIRE_FALSE(r.ok);
    CHECK(r.after == moved(c.guard_key(), at(0), c.guard_key(), at(3200), 3200));
    CHECK(r.after > 3190);  // about one word in 2 million is equal by chance
    CHECK_THAT(r.message, ContainsSubstring("guard bytes that belong elsewhere"));
    CHECK_THAT(r.message, ContainsSubstring("C has 10 row(s) of 100, the writes reach row 42, column"));
  }
  SECTION("A's upper band copied onto C's, same offsets") {
    LABKIT_CUDA(cudaMemcpy(end, a.data() + a.size(), 64 * sizeof(float), cudaMemcpyDeviceToDevice));
    const auto r = c.check_guards();
    REQUIRE_FALSE(r.ok);
    CHECK(r.after == moved(a.guard_key(), a.guard_elems() + a.size(), c.guard_key(), at(0), 64));
    CHECK(r.after > 60);
    CHECK(a.check_guards().ok);
  }
  SECTION("one word at the far end of the band, and one before the start") {
    LABKIT_CUDA(cudaMemset(end + c.guard_elems() - 1, 0, sizeof(float)));
    LABKIT_CUDA(cudaMemset(c.data() - 5, 0, sizeof(float)));
    const auto r = c.check_guards();
    REQUIRE_FALSE(r.ok);
    CHECK(r.first_after == c.guard_elems() - 1);
    CHECK(r.first_before == -5);
    CHECK_THAT(r.message, ContainsSubstring("holds 0x00000000"));
  }
}

TEST_CASE("device guards: doubles, and the cost on a lab 05 sized array", "[guard][gpu][alone]") {
  LABKIT_REQUIRE_GPU();
  labkit::GuardedBuffer<double> y(12345, "y");
  REQUIRE(y.check_guards().ok);
  LABKIT_CUDA(cudaMemcpy(y.data() + y.size() + 100, y.data() + y.size(), 50 * sizeof(double),
                         cudaMemcpyDeviceToDevice));
  CHECK(y.check_guards().after == 50);  // 50 words moved by 100 positions; an equal pair is a 2^-50 chance
  // 2^28 floats (1 GiB) get 64 MiB a side. Checking them must cost a scan on the device, not the bands' trip to the
  // host: the check's time is compared with that trip (both bands copied into a host vector whose pages are already
  // mapped), each the best of five, taken turn about. The test has the GPU to itself ([alone]: CTest runs it on its
  // own), since kernels of other processes take the GPU in time slices: beside the other tests under ctest -j 8 on an
  // H100 the check took 5-9 ms, the copy 13 ms; alone 0.5 and 9 ms. (A wall-clock limit of 50 ms failed there too.)
  labkit::GuardedBuffer<float> big(std::size_t(1) << 28, "x");
  LABKIT_CUDA(cudaDeviceSynchronize());
  const std::size_t band = big.guard_elems();
  CHECK(band * sizeof(float) == labkit::kMaxGuardBytes);
  std::vector<float> host(2 * band);
  const auto copy_bands_to_host = [&] {
    LABKIT_CUDA(cudaMemcpy(host.data(), big.data() - band, band * sizeof(float), cudaMemcpyDeviceToHost));
    LABKIT_CUDA(cudaMemcpy(host.data() + band, big.data() + big.size(), band * sizeof(float), cudaMemcpyDeviceToHost));
  };
  copy_bands_to_host();  // the host pages are mapped once, here, not in the first timed copy
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  double check_ms = 1e30, copy_ms = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t = Clock::now();
    const auto r = big.check_guards();
    check_ms = std::min(check_ms, ms_since(t));
    REQUIRE(r.ok);
    t = Clock::now();
    copy_bands_to_host();
    copy_ms = std::min(copy_ms, ms_since(t));
  }
  WARN("GuardedBuffer<float>(2^28): check_guards " << check_ms << " ms, the bands to the host " << copy_ms
                                                  << " ms (best of 5 each)");
  // Two scans of 64 MiB are about 0.1 ms of HBM time plus launches, the copy of 128 MiB several milliseconds: a check
  // that brought the bands to the host would take at least the copy's time.
  CHECK(check_ms * 4 < copy_ms);
}

TEST_CASE("poison_shared_memory leaves NaNs where the next kernel reads shared memory it never wrote",
          "[guard][gpu][alone]") {
  // A tile of 12 KiB per block (a lab 01 step 3 pair of 32 x 32 float tiles and then some), eight blocks per SM:
  // every block of the reading kernel must see only NaNs, whichever SM and whichever part of shared memory it got.
  // Before the fill, a kernel that wrote 1.0 into the same tiles leaves finite values there, so the fill is what
  // the reading kernel sees. [alone]: another process's kernel between the fill and the read would leave its own
  // values there (in a batch that only hides a bug now and then; here it would fail the test).
  LABKIT_REQUIRE_GPU();
  const labkit::DeviceInfo info = labkit::device_info();
  const int words = 3072, blocks = 8 * info.sm_count;
  labkit::DeviceBuffer<int> counts(static_cast<std::size_t>(blocks));
  auto unwritten_nans = [&] {
    LABKIT_CUDA(cudaMemset(counts.data(), 0, counts.size() * sizeof(int)));
    labkit_test::launch_count_unwritten_shared_nans(blocks, words, counts.data());
    LABKIT_CUDA(cudaDeviceSynchronize());
    std::vector<int> h(counts.size());
    LABKIT_CUDA(cudaMemcpy(h.data(), counts.data(), h.size() * sizeof(int), cudaMemcpyDeviceToHost));
    return h;
  };
  labkit_test::launch_write_shared_ones(blocks, words);
  LABKIT_CUDA(cudaDeviceSynchronize());
  const auto before = unwritten_nans();
  CHECK(*std::max_element(before.begin(), before.end()) < words);  // the ones are still there
  labkit::poison_shared_memory();
  const auto after = unwritten_nans();
  for (int b = 0; b < blocks; ++b) {
    INFO("block " << b << " of " << blocks << " (" << info.sm_count << " SMs)");
    CHECK(after[std::size_t(b)] == words);
  }
}

TEST_CASE("spin_on_streams: a step's two streams taken as ordered come out the wrong way round", "[guard][gpu]") {
  // The two mistakes lab 08's gates look for, each on a non-blocking stream of the step's own: x zeroed on the legacy
  // default stream and then read on the other stream (caught with the spin on the legacy stream), and a result
  // written on the other stream and copied back with a cudaMemcpy that waits for the legacy stream only (caught with
  // the spin on the step's stream). Without a spin both usually come out right, which is the trouble.
  LABKIT_REQUIRE_GPU();
  const int n = 1 << 16;
  cudaStream_t own = nullptr;
  LABKIT_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  labkit::DeviceBuffer<float> x(n), y(n);
  std::vector<float> host(n);
  const std::vector<float> ones(n, 1.0f);
  int device = 0;
  LABKIT_CUDA(cudaGetDevice(&device));
  // The copy kernel and the spin loaded first: loading a kernel lazily at its first launch (CUDA's default) waits
  // for the device, and would let the spin and the memset finish before the copy is queued.
  labkit_test::launch_copy_on(x.data(), y.data(), 1, cudaStreamLegacy);
  labkit::spin_on_streams({{device, cudaStreamLegacy}}, 0.0);
  LABKIT_CUDA(cudaDeviceSynchronize());
  SECTION("zeroed on the legacy stream, read on a non-blocking one") {
    x.upload(ones);
    labkit::launches::Recorder recorder;
    REQUIRE(recorder.available());
    labkit::spin_on_streams({{device, cudaStreamLegacy}}, 50.0);  // far longer than a busy host's pause
    LABKIT_CUDA(cudaMemsetAsync(x.data(), 0, n * sizeof(float), cudaStreamLegacy));
    labkit_test::launch_copy_on(x.data(), y.data(), n, own);
    LABKIT_CUDA(cudaStreamSynchronize(own));
    LABKIT_CUDA(cudaDeviceSynchronize());
    const auto ran = recorder.stop();
    LABKIT_CUDA(cudaMemcpy(host.data(), y.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(host == ones);  // the copy ran before the memset: the step's result is wrong, every time
    // The spin is recorded like any kernel; is_stream_spin tells it (own_kernels_ran leaves it out of the step's).
    const auto spins =
        std::count_if(ran.begin(), ran.end(), [](const auto& k) { return labkit::is_stream_spin(k.name); });
    INFO("kernels recorded: " << ran.size());
    CHECK(spins == 1);
    CHECK(ran.size() - std::size_t(spins) >= 1);  // the step's copy
  }
  SECTION("written on a non-blocking stream, read on the legacy one") {
    // Read by a kernel on the legacy stream, which does not wait for non-blocking streams (a synchronous cudaMemcpy
    // of the result may or may not: the driver may synchronize more than the stream for a pageable copy).
    labkit::DeviceBuffer<float> z(n);
    x.upload(ones);
    LABKIT_CUDA(cudaMemset(y.data(), 0, n * sizeof(float)));
    labkit::spin_on_streams({{device, own}}, 50.0);
    labkit_test::launch_copy_on(x.data(), y.data(), n, own);
    labkit_test::launch_copy_on(y.data(), z.data(), n, cudaStreamLegacy);
    LABKIT_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
    LABKIT_CUDA(cudaDeviceSynchronize());
    LABKIT_CUDA(cudaMemcpy(host.data(), z.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(host == std::vector<float>(n, 0.0f));  // read before the spun-behind kernel wrote it
  }
  CHECK(labkit::is_stream_spin("_ZN6labkit11stream_spinEy"));
  CHECK_FALSE(labkit::is_stream_spin("_ZN5lab0811stream_spinEy"));
  LABKIT_CUDA(cudaStreamDestroy(own));
}
