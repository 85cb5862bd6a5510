// Lab 04 tuning harness (not part of the lab): correctness of steps 3 and 5 at large n against std::sort, then
// timings of step 1, step 3, step 5 and thrust::sort (labkit::compare_speed, interleaved), ratios, and a per-kernel
// breakdown at 2^24. It includes step 5's file (for its kernel templates) and links steps 1 and 3 (step 3's kernels
// are timed in tune04_step3.cu, which includes that file: two step files cannot share one translation unit, as each
// repeats its small helpers). Build from the repository root (after the main build made liblabkit.a):
//   nvcc -std=c++17 -O3 -arch=sm_90 --extended-lambda -Ilabs/04_bitonic_sort -Ilabs/04_bitonic_sort/tests \
//     -Icommon/include tools/tuning/tune04.cu tools/tuning/tune04_step3.cu \
//     solutions/04_bitonic_sort/step1_global_pow2.cu build/gpu/common/liblabkit.a -lcublas -lcusparse -o /tmp/tune04
// Variants: add -DLAB04_FUSE_GLOBAL=4 (steps per fused global pass, 1..5), -DLAB04_BALANCED_PASSES=0 (5 + 1, not
// 3 + 3) or -DLAB04_ALTERNATE_WALK=0 (every kernel walks the keys from the start);
// for step 3, -DLAB04_STEP3_CHUNK_LOG2=13 (the largest chunk, 2^13 keys) and -DLAB04_STEP3_THREADS=512.
// Usage: /tmp/tune04 [--quick] [--step5] [--gate-like]   (--quick: 2^24 only, no 2^26; --step5: only step 5 against
// thrust, with 2^20 and a few small sizes added; --gate-like: step 5 against thrust as the gate times it, fresh keys
// and a scrubbed L2 before every call, instead of the restore copy that leaves the last 50 MB it wrote in L2)
#include "../../solutions/04_bitonic_sort/step5_fused.cu"
#include "thrust_sort.cu"
#include "tune04.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/device.h"
#include "labkit/random.h"
#include "labkit/ref_sort.h"
#include "labkit/timing.h"

namespace {

using u32 = std::uint32_t;
using SortFn = std::function<void(float*, std::size_t)>;
int g_failures = 0;
bool g_step5_only = false;  // --step5: step 5 and thrust only
bool g_gate_like = false;   // --gate-like: step 5 vs thrust timed as step5.speed times them

// Exact check against std::sort (labkit::sort_ref): position by position the order keys must agree (NaNs are all
// equal there), and the output must be, bit for bit, a permutation of the input.
bool check_against_std_sort(const std::vector<float>& got, const std::vector<float>& in, bool desc, const char* what) {
  const std::vector<float> ref = labkit::sort_ref(in, desc);
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (labkit::float_order_key(got[i], desc) != labkit::float_order_key(ref[i], desc)) {
      if (!bad++) first = i;
    }
  std::vector<u32> gb(in.size()), ib(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) gb[i] = labkit::float_bits(got[i]), ib[i] = labkit::float_bits(in[i]);
  labkit::radix_sort_u32(gb);
  labkit::radix_sort_u32(ib);
  const bool perm = gb == ib;
  const bool ok = bad == 0 && perm;
  std::printf("  %-34s n = %10zu %-10s %s", what, in.size(), desc ? "descending" : "ascending", ok ? "OK" : "WRONG");
  if (bad) std::printf(" (%zu positions differ from std::sort, first at %zu)", bad, first);
  if (!perm) std::printf(" (not a permutation of the input)");
  std::printf("\n");
  if (!ok) ++g_failures;
  return ok;
}

std::vector<float> specials(std::size_t n, std::uint64_t seed) {  // random with NaNs, infinities and signed zeros
  std::vector<float> k = labkit::random_floats(n, seed, -1.f, 1.f);
  const u32 nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0xFFFFFFFFu};
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = labkit::uniform_int(seed + 1, i, 0, 15);
    if (r < 5) k[i] = labkit::bits_float(nans[r]);
    else if (r == 5) k[i] = 1.f / 0.f;
    else if (r == 6) k[i] = -1.f / 0.f;
    else if (r == 7) k[i] = -0.f;
    else if (r == 8) k[i] = 0.f;
  }
  return k;
}

void correctness(std::size_t n) {
  for (int pattern = 0; pattern < 2; ++pattern)
    for (bool desc : {false, true}) {
      const std::vector<float> in = pattern ? specials(n, 99 + n) : labkit::random_floats(n, 7 + n, -1.f, 1.f);
      const lab04::Order o = desc ? lab04::Order::descending : lab04::Order::ascending;
      labkit::DeviceBuffer<float> d(in);
      if (!g_step5_only) {
        lab04::sort_shared(d.data(), n, o);
        LABKIT_CUDA(cudaDeviceSynchronize());
        check_against_std_sort(d.download(), in, desc, pattern ? "step 3, NaN/inf/zeros" : "step 3, random");
        d.upload(in);
      }
      lab04::sort_fused(d.data(), n, o);
      LABKIT_CUDA(cudaDeviceSynchronize());
      check_against_std_sort(d.download(), in, desc, pattern ? "step 5, NaN/inf/zeros" : "step 5, random");
    }
}

labkit::TimingOptions timing_opts() {
  labkit::TimingOptions opt;
  opt.warmup = 2;
  opt.min_repeats = 7;
  opt.budget_ms = 400;
  return opt;
}

// Median ms of a sort (restore + sort, as in the gates) and of the restore alone.
struct Timed {
  std::string name;
  double ms;
};

void speed(std::size_t n) {
  const std::vector<float> in = labkit::random_floats(n, 12345, -1.f, 1.f);
  labkit::DeviceBuffer<float> src(in), work(n);
  auto restore = [&] {
    LABKIT_CUDA(cudaMemcpyAsync(work.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice));
  };
  const bool pow2 = (n & (n - 1)) == 0;
  const SortFn step1 = [](float* k, std::size_t m) { lab04::sort_global_pow2(k, m); };
  const SortFn step3 = [](float* k, std::size_t m) { lab04::sort_shared(k, m, lab04::Order::ascending); };
  const SortFn step5 = [](float* k, std::size_t m) { lab04::sort_fused(k, m, lab04::Order::ascending); };
  const SortFn thrust = [](float* k, std::size_t m) { lab04::baseline::thrust_sort(k, m); };
  auto compare = [&](const char* bname, const SortFn& b, const char* cname, const SortFn& c) {
    const auto cmp = labkit::compare_speed([&](int) { restore(), b(work.data(), n); },
                                           [&](int) { restore(), c(work.data(), n); }, timing_opts());
    std::printf("  n = %10zu  %-12s %9.3f ms %7.2f Gkeys/s | %-12s %9.3f ms %7.2f Gkeys/s | ratio %.3f\n", n, bname,
                cmp.baseline.median_ms, n / (cmp.baseline.median_ms * 1e6), cname, cmp.candidate.median_ms,
                n / (cmp.candidate.median_ms * 1e6), cmp.ratio);
    return cmp.ratio;
  };
  if (g_gate_like) {
    // The gate's TimedCase: the same fresh keys in both arrays before every call (the baseline sorts its own copy),
    // then compare_speed's L2 scrub. Nothing to verify here: correctness() checked the sort at these sizes.
    labkit::DeviceBuffer<float> base(n);
    labkit::TimedCase tc;
    tc.refresh = [&](int rep) {
      labkit::fill_random_device(work.data(), n, 777 + rep, -1.f, 1.f);
      labkit::fill_random_device(base.data(), n, 777 + rep, -1.f, 1.f);
    };
    tc.verify = [] {};
    // Descending is the same network on keys XOR-ed with all ones: it should time the same.
    const SortFn step5_desc = [](float* k, std::size_t m) { lab04::sort_fused(k, m, lab04::Order::descending); };
    for (const auto& [name, sort] : {std::pair{"ascending", step5}, std::pair{"descending", step5_desc}}) {
      const SortFn& fn = sort;  // a plain reference for the lambda (C++17 lambdas cannot capture a binding)
      const auto cmp = labkit::compare_speed([&](int) { thrust(base.data(), n); }, [&](int) { fn(work.data(), n); },
                                             tc, timing_opts());
      std::printf("  n = %10zu  thrust %9.3f ms | step 5 %-10s %9.3f ms | gate-like ratio %.4f\n", n,
                  cmp.baseline.median_ms, name, cmp.candidate.median_ms, cmp.ratio);
    }
    return;
  }
  const double copy_ms = labkit::time_gpu([&](int) { restore(); }, timing_opts()).median_ms;
  std::printf("  n = %10zu  restore copy alone: %.3f ms (included in every figure below)\n", n, copy_ms);
  if (g_step5_only) {
    std::printf("  -> step5 vs thrust = %.3f (gate step5.speed)\n", compare("thrust", thrust, "step 5", step5));
    return;
  }
  if (pow2) std::printf("  -> step3/step1 = %.3f (gate step3.speed)\n", compare("step 1", step1, "step 3", step3));
  std::printf("  -> step3 vs thrust = %.3f (gate step3.speed_thrust)\n", compare("thrust", thrust, "step 3", step3));
  std::printf("  -> step5 vs thrust = %.3f (gate step5.speed)\n", compare("thrust", thrust, "step 5", step5));
  std::printf("  -> step5/step3 = %.3f\n", compare("step 3", step3, "step 5", step5));
}

// Per-kernel times at n = 2^24 (each launch on random data restored first; the copy is subtracted). The restore
// copy walks the array forward and leaves the part it wrote last in L2, as a kernel of the sort leaves it to the next:
// each kernel is timed walking forward (starting on what the L2 no longer holds) and backward (starting on the tail
// the copy left, which is how step 5's alternating walk meets every kernel after the first).
void breakdown() {
  using namespace lab04;
  const std::size_t n = std::size_t(1) << 24;
  const u32 N = u32(n);
  const std::vector<float> in = labkit::random_floats(n, 4242, -1.f, 1.f);
  labkit::DeviceBuffer<float> src(in), work(n);
  auto restore = [&] {
    LABKIT_CUDA(cudaMemcpyAsync(work.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice));
  };
  const double copy_ms = labkit::time_gpu([&](int) { restore(); }, timing_opts()).median_ms;
  auto us = [&](const std::function<void()>& launch) {
    return (labkit::time_gpu([&](int) { restore(), launch(); }, timing_opts()).median_ms - copy_ms) * 1e3;
  };
  auto gbs = [&](double t_us) { return 2.0 * n * 4 / (t_us * 1e3); };
  auto kernel = [&](const char* name, const std::function<void()>& launch) {
    const double t = us(launch);
    std::printf("  %-58s %8.1f us  (%6.0f GB/s for one read + one write of 64 MB)\n", name, t, gbs(t));
  };
  auto walked = [&](const char* name, const std::function<void(bool)>& launch) {
    const double fwd = us([&] { launch(false); }), back = us([&] { launch(true); });
    std::printf("  %-50s forward %7.1f us (%5.0f GB/s), backward %7.1f us (%5.0f GB/s)\n", name, fwd, gbs(fwd),
                back, gbs(back));
  };
  int dev = 0, optin = 0;
  LABKIT_CUDA(cudaGetDevice(&dev));
  LABKIT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  std::printf("breakdown at n = 2^24 (restore copy %.1f us subtracted; memcpy %.0f GB/s)\n", copy_ms * 1e3,
              labkit::memcpy_bandwidth_gbs());
  if (!g_step5_only) tune04::breakdown_step3(work.data(), N, kernel);  // step 3's kernels (tune04_step3.cu)
  // Step 5's kernels, walking forward and backward (walk_block).
  {
    const int lc = fused_log_chunk(N, optin);
    const u32 chunk = 1u << lc;
    const std::size_t smem = std::size_t(chunk) / 32 * 33 * sizeof(u32);
    const ChunkKernels k = chunk_kernels(lc);
    LABKIT_CUDA(cudaFuncSetAttribute(k.sort, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    LABKIT_CUDA(cudaFuncSetAttribute(k.merge, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    walked("step 5 kernel A (sort chunks, in registers)",
           [&](bool b) { k.sort<<<N / chunk, chunk / 32, smem>>>(work.data(), N, 0, b); });
    walked("step 5 kernel B (merge chunks, in registers)",
           [&](bool b) { k.merge<<<N / chunk, chunk / 32, smem>>>(work.data(), N, 0, b); });
    walked("step 5 fused global pass r = 1 (lj = 15)",
           [&](bool b) { fused_global_pass<1>(work.data(), N, N, 15, false, 0, b); });
    walked("step 5 fused global pass r = 2", [&](bool b) { fused_global_pass<2>(work.data(), N, N, 15, false, 0, b); });
    walked("step 5 fused global pass r = 3", [&](bool b) { fused_global_pass<3>(work.data(), N, N, 15, false, 0, b); });
    walked("step 5 fused global pass r = 4", [&](bool b) { fused_global_pass<4>(work.data(), N, N, 15, false, 0, b); });
    walked("step 5 fused global pass r = 5", [&](bool b) { fused_global_pass<5>(work.data(), N, N, 15, false, 0, b); });
    walked("step 5 fused global pass r = 5, mirror (lj = 19)",
           [&](bool b) { fused_global_pass<5>(work.data(), N, N, 19, true, 0, b); });
    int g = 0, m = 0, by_r[6] = {};
    for (const auto& p : fused_plan(N, lc)) (p.r ? g : m)++, by_r[p.r]++;
    std::printf("  step 5 plan at 2^24: 1 chunk sort + %d fused global passes (r = 1..5: %d %d %d %d %d) + %d merge "
                "kernels (FUSE_GLOBAL=%d, balanced passes %d, alternate walk %d)\n", g, by_r[1], by_r[2], by_r[3],
                by_r[4], by_r[5], m, kFuseGlobal, int(kBalancedPasses), int(kAlternateWalk));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--step5")) g_step5_only = true;
    else if (!std::strcmp(argv[i], "--gate-like")) g_gate_like = g_step5_only = true;
  }
  if (!labkit::has_device()) {
    std::printf("%s\n", labkit::no_device_reason().c_str());
    return 1;
  }
  std::printf("lab04 tune on %s\n", labkit::describe(labkit::device_info()).c_str());
  std::vector<std::size_t> sizes = {std::size_t(1) << 24, (std::size_t(1) << 24) - 3};
  if (!quick) sizes.push_back(std::size_t(1) << 26);
  std::printf("correctness (against std::sort)\n");
  for (std::size_t n : sizes) correctness(n);
  if (g_step5_only) {
    for (std::size_t n : {std::size_t(1000), std::size_t(4097), std::size_t(40000), std::size_t(300001)})
      correctness(n);  // one block (n <= 2^15), and a few chunks
    // The chunks of GPUs with less shared memory per block (2^10 .. 2^14 keys), whose merge kernels this GPU never
    // runs otherwise: the same sort with the opt-in limit it would see there.
    for (int optin : {70 * 1024, 40 * 1024, 20 * 1024, 9 * 1024, 5 * 1024})
      for (std::size_t n : {std::size_t(1) << 20, (std::size_t(1) << 20) - 5}) {
        const std::vector<float> in = specials(n, 5 + n + optin);
        for (bool desc : {false, true}) {
          labkit::DeviceBuffer<float> d(in);
          lab04::sort_fused_keys(d.data(), n, desc ? lab04::Order::descending : lab04::Order::ascending, optin);
          LABKIT_CUDA(cudaDeviceSynchronize());
          const std::string what = "step 5, chunk 2^" + std::to_string(lab04::fused_log_chunk(u32(n), optin));
          check_against_std_sort(d.download(), in, desc, what.c_str());
        }
      }
  }
  std::printf("speed (median of interleaved runs, restore copy included)\n");
  if (g_step5_only) speed(std::size_t(1) << 20);
  for (std::size_t n : sizes) speed(n);
  breakdown();
  std::printf("%s\n", g_failures ? "SOME CHECKS FAILED" : "all checks passed");
  return g_failures ? 1 : 0;
}
