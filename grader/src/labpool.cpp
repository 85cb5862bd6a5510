#include "labpool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

namespace labgrade {

void GpuTurns::lock_shared() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !exclusive_ && exclusive_waiting_ == 0; });
  ++shared_;
}

void GpuTurns::unlock_shared() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--shared_ == 0) cv_.notify_all();
}

void GpuTurns::lock() {
  std::unique_lock<std::mutex> lock(mu_);
  ++exclusive_waiting_;
  cv_.wait(lock, [&] { return !exclusive_ && shared_ == 0; });
  --exclusive_waiting_;
  exclusive_ = true;
}

void GpuTurns::unlock() {
  std::lock_guard<std::mutex> lock(mu_);
  exclusive_ = false;
  cv_.notify_all();
}

int GpuTurns::exclusive_waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return exclusive_waiting_;
}

GpuTurns::Turn::Turn(GpuTurns* turns, bool exclusive, bool quiet)
    : turns_(turns), exclusive_(exclusive || quiet), quiet_(quiet) {
  if (!turns_) return;
  if (exclusive_)
    turns_->lock();
  else
    turns_->lock_shared();
  if (GpuTurns* m = turns_->machine_) {
    if (quiet_)
      m->lock();
    else
      m->lock_shared();
  }
}

GpuTurns::Turn::~Turn() {
  if (!turns_) return;
  if (GpuTurns* m = turns_->machine_) {
    if (quiet_)
      m->unlock();
    else
      m->unlock_shared();
  }
  if (exclusive_)
    turns_->unlock();
  else
    turns_->unlock_shared();
}

void JobTokens::acquire(std::size_t order) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto me = waiting_.insert(order);
  cv_.wait(lock, [&] { return free_ > 0 && *waiting_.begin() == order; });
  waiting_.erase(me);
  // Another token may be free for the next order in line, which the notification that woke this thread did not
  // choose.
  if (--free_ > 0 && !waiting_.empty()) cv_.notify_all();
}

void JobTokens::release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_;
  }
  // All: notify_one could wake a later order, which would go back to waiting with the token still free.
  cv_.notify_all();
}

std::vector<std::size_t> compile_ranks(const std::vector<std::size_t>& files_per_lab) {
  std::vector<std::size_t> by(files_per_lab.size()), rank(files_per_lab.size());
  for (std::size_t i = 0; i < by.size(); ++i) by[i] = i;
  std::stable_sort(by.begin(), by.end(),
                   [&](std::size_t a, std::size_t b) { return files_per_lab[a] < files_per_lab[b]; });
  for (std::size_t r = 0; r < by.size(); ++r) rank[by[r]] = r;
  return rank;
}

void ReadyQueue::push(std::size_t lab) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(lab);
  }
  cv_.notify_all();
}

void ReadyQueue::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
  }
  cv_.notify_all();
}

void ReadyQueue::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::move(error);
  }
  cv_.notify_all();
}

std::optional<std::size_t> ReadyQueue::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || finished_ || error_; });
  return pop_locked();
}

std::optional<std::size_t> ReadyQueue::ready_now() {
  std::lock_guard<std::mutex> lock(mu_);
  return pop_locked();
}

std::optional<std::size_t> ReadyQueue::pop_locked() {
  if (error_ || ready_.empty()) return std::nullopt;
  const std::size_t lab = ready_.front();
  ready_.pop_front();
  return lab;
}

void ReadyQueue::wait_finished() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return finished_; });
}

bool ReadyQueue::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_ != nullptr;
}

void ReadyQueue::rethrow() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

int JobTokens::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiting_.size());
}

void for_each_concurrently(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn) {
  if (jobs <= 1 || n <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex mu;
  auto worker = [&] {
    for (std::size_t i; !failed && (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  const std::size_t t = std::min(n, static_cast<std::size_t>(jobs));
  for (std::size_t k = 0; k < t; ++k) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  if (first) std::rethrow_exception(first);
}

int default_lab_jobs(double gpu_memory_gib, int cpus_per_worker, std::size_t labs) {
  if (gpu_memory_gib <= 0 || labs == 0) return 1;
  const int by_memory = static_cast<int>(gpu_memory_gib / 12);
  const int by_cpu = cpus_per_worker * 2 / 5;
  return std::max(1, std::min({by_memory, by_cpu, static_cast<int>(labs)}));
}

std::vector<std::size_t> longest_first(const std::vector<double>& expected_seconds) {
  std::vector<std::size_t> order(expected_seconds.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](std::size_t i) {
    const double e = expected_seconds[i];
    return e > 0 ? e : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
  return order;
}

std::vector<std::size_t> untimed_order(const std::vector<double>& measured_seconds,
                                       const std::vector<double>& rubric_seconds) {
  std::vector<double> expected(measured_seconds.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = measured_seconds[i] > 0 || i >= rubric_seconds.size() ? measured_seconds[i] : rubric_seconds[i];
  return longest_first(expected);
}

}  // namespace labgrade
