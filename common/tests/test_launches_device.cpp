// The launch recorder on a GPU: what CUPTI reports for a kernel compiled into this binary (labkit's random fill),
// for cuBLAS called directly, and for cuBLAS replayed from a captured CUDA graph. Skipped without a device; on a
// GPU machine these are the checks that the classification rules hold on the real driver (tags [gpu]).
#include <catch2/catch_test_macros.hpp>
#include <algorithm>
#include <memory>
#include <sstream>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/cublas.h"
#include "labkit/device.h"
#include "labkit/launches.h"
#include "labkit/random.h"
#include "labkit/timing.h"
#include "test_kernels.h"

namespace {
using labkit::launches::Kernel;
using labkit::launches::Recorder;

std::string listing(const std::vector<Kernel>& ran) {
  std::ostringstream os;
  for (const Kernel& k : ran)
    os << "\n  " << labkit::launches::demangle(k.name) << " [launched from: "
       << (k.launched_from.empty() ? "-" : k.launched_from) << ", class: "
       << labkit::launches::classify(k, labkit::launches::own_symbols()).library << "]";
  return os.str();
}

// A plain host function, for the checks that a function's name alone does not make a kernel the binary's own.
__attribute__((noinline, used)) void host_function_not_a_kernel() { asm volatile(""); }

void sgemm(cublasHandle_t h, int n, const float* A, const float* B, float* C) {
  const float one = 1.f;
  LABKIT_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, n, B, n, &one, C, n));
}
}  // namespace

TEST_CASE("the recorder sees a kernel of this binary as its own", "[gpu][launches]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  labkit::DeviceBuffer<float> v(1 << 20);
  Recorder rec;
  REQUIRE(rec.available());
  CHECK(Recorder::active());
  labkit::fill_random_device(v.data(), v.size(), 7);
  const auto ran = rec.stop();
  CHECK_FALSE(Recorder::active());
  INFO("kernels:" << listing(ran));
  REQUIRE(!ran.empty());
  CHECK(labkit::launches::refusal("fill", ran, {}, labkit::launches::own_symbols()).empty());
  // Nothing is recorded after stop(): the speed gates' timed calls run outside any recorder.
  labkit::fill_random_device(v.data(), v.size(), 8);
  Recorder again;
  CHECK(again.stop().empty());
}

TEST_CASE("the recorder attributes cuBLAS's kernels to cuBLAS", "[gpu][launches]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  const int n = 1024;
  labkit::DeviceBuffer<float> A(std::size_t(n) * n), B(std::size_t(n) * n), C(std::size_t(n) * n);
  labkit::fill_random_device(A.data(), A.size(), 1);
  labkit::fill_random_device(B.data(), B.size(), 2);
  labkit::fill_random_device(C.data(), C.size(), 3);
  labkit::CublasHandle handle;
  sgemm(handle, n, A.data(), B.data(), C.data());  // cuBLAS loads its kernels on first use: outside the recorder
  LABKIT_CUDA(cudaDeviceSynchronize());
  std::vector<Kernel> ran;
  {
    Recorder rec;
    REQUIRE(rec.available());
    sgemm(handle, n, A.data(), B.data(), C.data());
    ran = rec.stop();
  }
  INFO("kernels:" << listing(ran));
  REQUIRE(!ran.empty());
  for (const Kernel& k : ran) CHECK(labkit::launches::classify(k, labkit::launches::own_symbols()).library == "cublas");
  const std::string msg = labkit::launches::refusal("step 5 (tuned)", ran, {}, labkit::launches::own_symbols());
  CHECK(msg.rfind("step 5 (tuned) ran a kernel of cuBLAS (", 0) == 0);
  CHECK(labkit::launches::refusal("step 0", ran, {"cublas"}, labkit::launches::own_symbols()).empty());

  // The same product captured into a graph and replayed: the replay has no library on the launching stack, and
  // the kernel is not compiled into this binary, so it is still not the binary's own.
  cudaStream_t s;
  LABKIT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  LABKIT_CUBLAS(cublasSetStream(handle, s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  LABKIT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  sgemm(handle, n, A.data(), B.data(), C.data());
  LABKIT_CUDA(cudaStreamEndCapture(s, &graph));
  LABKIT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<Kernel> replayed;
  {
    Recorder rec;
    REQUIRE(rec.available());
    LABKIT_CUDA(cudaGraphLaunch(exec, s));
    replayed = rec.stop();
  }
  LABKIT_CUBLAS(cublasSetStream(handle, nullptr));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  INFO("replayed kernels:" << listing(replayed));
  REQUIRE(!replayed.empty());
  CHECK_FALSE(labkit::launches::refusal("step 5 (tuned)", replayed, {}, labkit::launches::own_symbols()).empty());

  // A host function of the binary that carries the replayed kernel's name (an assembler label does it): by name
  // alone the kernel would be the binary's own; the registered-kernel check sees a host function.
  const Kernel& k = replayed.front();
  REQUIRE(k.registers > 0);
  const void* spoof = reinterpret_cast<const void*>(&host_function_not_a_kernel);
  using labkit::launches::Symbols;
  CHECK(labkit::launches::classify(k, Symbols(std::vector<std::string>{k.name})).own());
  const Symbols checked({{k.name, spoof}}, labkit::launches::registered_kernel_matches);
  CHECK(labkit::launches::classify(k, checked).library == "library");
  CHECK(cudaGetLastError() == cudaSuccess);  // the check leaves no error behind for the gates' launch checks
}

TEST_CASE("a kernel is the binary's own only with the code that was compiled under its name",
          "[gpu][launches]") {
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  labkit::DeviceBuffer<float> v(1 << 16);
  std::vector<Kernel> ran;
  {
    Recorder rec;
    REQUIRE(rec.available());
    labkit::fill_random_device(v.data(), v.size(), 9);
    ran = rec.stop();
  }
  INFO("kernels:" << listing(ran));
  REQUIRE(ran.size() == 1);
  const Kernel fill = ran.front();
  const auto& own = labkit::launches::own_symbols();
  REQUIRE(fill.registers > 0);
  REQUIRE(fill.static_shared >= 0);
  CHECK(own.compiled_here(fill));
  // The same name with other code: another register count or other static shared memory.
  Kernel other = fill;
  other.registers += 64;  // past the small counts that accept fewer compiled registers
  CHECK_FALSE(own.compiled_here(other));
  other = fill;
  other.static_shared += 16;
  CHECK_FALSE(own.compiled_here(other));
  // A host function's name: the binary has a function of that name, but no kernel.
  Kernel host = fill;
  host.name = "_ZN12_GLOBAL__N_126host_function_not_a_kernelEv";
  REQUIRE(own.contains(host.name));
  CHECK_FALSE(own.compiled_here(host));
  CHECK(labkit::launches::classify(host, own).library == "library");
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a recorder on through compare_speed takes each candidate call's kernels apart", "[gpu][launches][timing]") {
  // A step that runs its own kernel on its first call at a size and cuBLAS on every later one: the kind of step a
  // check before the timing (the old speed gates' only recorded call) never caught. Every candidate call is seen on
  // its own: the baseline's cuBLAS GEMM, the refreshes' fills and the verifications are dropped before it, and
  // compare_speed's L2 scrub runs between the drop and the call under l2_scrub_kernel_name().
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  const int n = 512;
  labkit::DeviceBuffer<float> A(std::size_t(n) * n), B(std::size_t(n) * n), C(std::size_t(n) * n), D(std::size_t(n) * n);
  labkit::CublasHandle handle;
  int candidate_calls = 0;
  auto candidate = [&](int) {
    if (candidate_calls++ == 0)
      labkit::fill_random_device(C.data(), C.size(), 5);  // "its own kernel"
    else
      sgemm(handle, n, A.data(), B.data(), C.data());
  };
  auto baseline = [&](int) { sgemm(handle, n, A.data(), B.data(), D.data()); };
  // The test's recorder: what it took from each candidate call, handed out when compare_speed destroys it.
  std::vector<std::vector<Kernel>> seen;
  struct Calls : labkit::CallRecorder {
    Recorder rec{Recorder::Attribution::names_only};  // as the speed gates' (gate::record_timed_calls)
    std::vector<std::vector<Kernel>> checked;  // the kernels of each candidate call, the scrub's included
    std::vector<std::vector<Kernel>>* out;
    explicit Calls(std::vector<std::vector<Kernel>>* o) : out(o) {}
    ~Calls() override { *out = checked; }
    void drop() override { rec.take(); }
    void check() override { checked.push_back(rec.take()); }
  };
  int made = 0;
  labkit::TimedCase tc;
  tc.refresh = [&](int k) { labkit::fill_random_device(A.data(), A.size(), 100 + std::uint64_t(k)); };
  tc.verify = [&] { labkit::fill_random_device(D.data(), D.size(), 7); };  // a kernel of the gate's, dropped
  tc.record = [&]() -> std::unique_ptr<labkit::CallRecorder> {
    ++made;
    auto r = std::make_unique<Calls>(&seen);
    REQUIRE(r->rec.available());
    return r;
  };
  labkit::TimingOptions opt;
  opt.warmup = 1;
  opt.min_repeats = opt.max_repeats = 4;
  opt.budget_ms = 0;
  tc.recorded = labkit::RecordedCalls::every_call;
  tc.verified_round = 1;
  const auto cmp = labkit::compare_speed(baseline, candidate, tc, opt);
  CHECK(made == 1);
  CHECK_FALSE(Recorder::active());  // stopped with compare_speed's end
  CHECK(candidate_calls == 5);      // one warm-up, four counted; no extra call
  CHECK(cmp.candidate.repeats == 4);
  REQUIRE(seen.size() == 5);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    INFO("candidate call " << i);
    std::vector<std::string> names;
    for (const auto& k : seen[i]) names.push_back(k.name);
    // The scrub first, then the call's own kernels only: no GEMM of the baseline's, no fill of the refresh's.
    REQUIRE(names.size() >= 2);
    CHECK(names.front() == labkit::l2_scrub_kernel_name());
    const std::vector<Kernel> own(seen[i].begin() + 1, seen[i].end());
    const std::string refused =
        labkit::launches::refusal("the step", own, {}, labkit::launches::own_symbols());
    if (i == 0)
      CHECK(refused.empty());
    else
      // No launch callbacks, so no library's name: the GEMM kernel is refused as one not compiled from the source.
      CHECK(refused.find("ran a kernel of a library (not compiled from your source)") != std::string::npos);
  }
}

namespace {
// 400 kernels of `cycles` clock cycles each, back to back on the default stream, timed by events (the device's pace,
// since each kernel outlasts the host's launch of the next).
double burst_ms(long long cycles) {
  labkit::EventTimer timer;
  timer.start();
  for (int i = 0; i < 400; ++i) labkit_test::launch_spin(cycles);
  timer.stop();
  return timer.elapsed_ms();
}
}  // namespace

TEST_CASE("the speed gates' recorder costs the device about a microsecond a kernel", "[gpu][launches][alone]") {
  // The every_call speed gates (labkit::RecordedCalls) keep the recorder on through every timed call, the
  // baseline's too, on the grounds that CUPTI's kernel records cost each kernel little against the calls those
  // gates time. This measures that cost where it is paid, on the device: kernels of 20 us each (longer than a
  // launch, so the device sets the pace), 400 at a time, plain and recorded in turn, the median of 7 of each. On an
  // H100 (2026-11-27) it was 1.1 us a kernel; 3 us would move a gate of 20-us kernels by 15 % and calls for a look at
  // which gates record every call. Alone on the GPU ([alone]): other processes' kernels would take time slices.
  if (!labkit::has_device()) SKIP(labkit::no_device_reason());
  int dev = 0, clock_khz = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const long long cycles = 20LL * clock_khz / 1000;  // 20 us at the base clock (boost only shortens it)
  burst_ms(cycles);  // warm-up: module load, clocks up
  std::vector<double> plain, recorded;
  for (int i = 0; i < 7; ++i) {
    LABKIT_CUDA(cudaDeviceSynchronize());
    plain.push_back(burst_ms(cycles));
    Recorder rec(Recorder::Attribution::names_only);  // as the speed gates' (gate::record_timed_calls)
    REQUIRE(rec.available());
    recorded.push_back(burst_ms(cycles));
    const auto ran = rec.stop();
    CHECK(ran.size() == 400);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double per_kernel_us = (median(recorded) - median(plain)) * 1e3 / 400;
  WARN("recorder (names_only) on the device: " << per_kernel_us << " us a kernel (400 kernels: " << median(plain)
                                               << " ms plain, " << median(recorded) << " ms recorded)");
  CHECK(per_kernel_us < 3.0);
}
