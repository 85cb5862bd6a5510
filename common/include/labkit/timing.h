// Timing with CUDA events: warm-up, then repeats until both a minimum count and a time budget are reached, and
// the median reported. compare_speed() times a baseline and a candidate in the same process, interleaving them
// so that clock or thermal drift affects both alike, and reports the ratio (> 1: the candidate is faster).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

namespace labkit {

struct TimingOptions {
  int warmup = 2;
  int min_repeats = 5;
  int max_repeats = 200;
  double budget_ms = 300;  // stop after this much measured time once min_repeats are done
};

struct TimingStats {
  double median_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0;
  int repeats = 0;
};

// fn(rep) enqueues the work on the default stream; rep counts from 0 so that fn can rotate among input sets.
TimingStats time_gpu(const std::function<void(int)>& fn, const TimingOptions& opt = {});

struct SpeedComparison {
  TimingStats baseline, candidate;
  double ratio = 0;  // baseline median / candidate median
};
SpeedComparison compare_speed(const std::function<void(int)>& baseline, const std::function<void(int)>& candidate,
                              const TimingOptions& opt = {});

// How many distinct input sets of `bytes_per_set` to rotate through so that repeats cannot be served from L2.
int rotation_sets(std::size_t bytes_per_set);

// Device-to-device cudaMemcpy bandwidth in GB/s, counting bytes read plus bytes written (the bandwidth ceiling
// every memory-bound gate compares with).
double memcpy_bandwidth_gbs(std::size_t bytes = std::size_t(1) << 30, const TimingOptions& opt = {});

// Event pair for ad-hoc timing.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t s = 0);
  void stop(cudaStream_t s = 0);
  double elapsed_ms();  // synchronizes on the stop event

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace labkit
