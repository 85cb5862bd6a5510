#include "labkit/timing.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "labkit/buffer.h"
#include "labkit/check.h"
#include "labkit/device.h"

namespace labkit {

EventTimer::EventTimer() {
  LABKIT_CUDA(cudaEventCreate(&start_));
  LABKIT_CUDA(cudaEventCreate(&stop_));
}
EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}
void EventTimer::start(cudaStream_t s) { LABKIT_CUDA(cudaEventRecord(start_, s)); }
void EventTimer::stop(cudaStream_t s) { LABKIT_CUDA(cudaEventRecord(stop_, s)); }
double EventTimer::elapsed_ms() {
  LABKIT_CUDA(cudaEventSynchronize(stop_));
  float ms = 0;
  LABKIT_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

namespace {
TimingStats summarize(std::vector<double> t) {
  TimingStats s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.repeats = static_cast<int>(t.size());
  s.min_ms = t.front();
  s.max_ms = t.back();
  s.median_ms = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  s.mean_ms = std::accumulate(t.begin(), t.end(), 0.0) / t.size();
  return s;
}

double time_once(const std::function<void(int)>& fn, int rep, EventTimer& timer) {
  timer.start();
  fn(rep);
  timer.stop();
  LABKIT_CHECK_LAUNCH();
  return timer.elapsed_ms();
}
}  // namespace

TimingStats time_gpu(const std::function<void(int)>& fn, const TimingOptions& opt) {
  EventTimer timer;
  int rep = 0;
  for (int i = 0; i < opt.warmup; ++i) time_once(fn, rep++, timer);
  LABKIT_CUDA(cudaDeviceSynchronize());
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < opt.max_repeats &&
         (static_cast<int>(times.size()) < opt.min_repeats || total < opt.budget_ms)) {
    times.push_back(time_once(fn, rep++, timer));
    total += times.back();
  }
  return summarize(times);
}

SpeedComparison compare_speed(const std::function<void(int)>& baseline, const std::function<void(int)>& candidate,
                              const TimingOptions& opt) {
  EventTimer timer;
  int rep = 0;
  for (int i = 0; i < opt.warmup; ++i) {
    time_once(baseline, rep, timer);
    time_once(candidate, rep++, timer);
  }
  LABKIT_CUDA(cudaDeviceSynchronize());
  std::vector<double> tb, tc;
  double total = 0;
  // Alternate baseline and candidate so that both see the same clocks and temperature.
  while (static_cast<int>(tb.size()) < opt.max_repeats &&
         (static_cast<int>(tb.size()) < opt.min_repeats || total < 2 * opt.budget_ms)) {
    tb.push_back(time_once(baseline, rep, timer));
    tc.push_back(time_once(candidate, rep++, timer));
    total += tb.back() + tc.back();
  }
  SpeedComparison c;
  c.baseline = summarize(tb);
  c.candidate = summarize(tc);
  c.ratio = c.candidate.median_ms > 0 ? c.baseline.median_ms / c.candidate.median_ms : 0;
  return c;
}

int rotation_sets(std::size_t bytes_per_set) {
  std::size_t l2 = has_device() ? device_info().l2_bytes : (std::size_t(50) << 20);
  if (bytes_per_set == 0) return 1;
  std::size_t sets = (3 * l2) / bytes_per_set + 1;  // > 3x L2 between two uses of one set: it has been evicted
  return static_cast<int>(std::min<std::size_t>(sets, 64));
}

double memcpy_bandwidth_gbs(std::size_t bytes, const TimingOptions& opt) {
  DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  src.fill_bytes(1);
  TimingStats t = time_gpu(
      [&](int) { LABKIT_CUDA(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice)); }, opt);
  return 2.0 * bytes / (t.median_ms * 1e-3) / 1e9;
}

}  // namespace labkit
