#include "progress.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "util.h"

namespace labgrade {

namespace {

bool read_small(const std::string& path, char* buf, std::size_t cap, std::size_t* len) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return false;
  *len = std::fread(buf, 1, cap - 1, f);
  std::fclose(f);
  buf[*len] = '\0';
  return *len > 0;
}

struct ProcStat {
  pid_t ppid = 0;
  unsigned long long cpu_ticks = 0;  // utime + stime + cutime + cstime
};

// /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses, so parse after the last ')'.
bool read_stat(pid_t pid, ProcStat* out) {
  char buf[1024];
  std::size_t n = 0;
  if (!read_small("/proc/" + std::to_string(pid) + "/stat", buf, sizeof buf, &n)) return false;
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  // Fields after ')': 3 state, 4 ppid, ..., 14 utime, 15 stime, 16 cutime, 17 cstime.
  char state = 0;
  long long f[15] = {};
  int got = std::sscanf(p + 1, " %c %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &state,
                        &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12],
                        &f[13]);
  if (got < 15) return false;
  out->ppid = static_cast<pid_t>(f[0]);
  out->cpu_ticks = static_cast<unsigned long long>(std::max(0LL, f[10]) + std::max(0LL, f[11]) +
                                                   std::max(0LL, f[12]) + std::max(0LL, f[13]));
  return true;
}

// Adds the run-queue wait (ns, schedstat's second field) of every thread of `pid` to `out`, by thread id; false
// when schedstat cannot be read.
bool thread_waits(pid_t pid, std::unordered_map<pid_t, unsigned long long>& out) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (!d) return false;
  bool any = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char buf[128];
    std::size_t n = 0;
    if (!read_small(task + "/" + e->d_name + "/schedstat", buf, sizeof buf, &n)) continue;
    unsigned long long on_cpu = 0, waited = 0;
    if (std::sscanf(buf, "%llu %llu", &on_cpu, &waited) == 2) {
      out[static_cast<pid_t>(std::atol(e->d_name))] = waited;
      any = true;
    }
  }
  closedir(d);
  return any;
}

}  // namespace

bool descends_from(pid_t pid, pid_t ancestor) {
  // A chain of parents ends at pid 1 (or 0 above it); 4096 links bound a loop that a reused pid could close.
  for (int links = 0; pid > 1 && links < 4096; ++links) {
    if (pid == ancestor) return true;
    ProcStat st;
    if (!read_stat(pid, &st)) return false;
    pid = st.ppid;
  }
  return pid == ancestor;
}

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

int usable_cpus() {
  if (const auto cpus = allowed_cpus(); !cpus.empty()) return static_cast<int>(cpus.size());
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<int> core_siblings(int cpu) {
  // "0,16" or "0-1" (a list of ranges)
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  std::string text;
  std::vector<int> out;
  if (std::getline(in, text))
    for (const auto& part : split(text, ',')) {
      const auto dash = part.find('-');
      try {
        const int a = std::stoi(part.substr(0, dash)), b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
        for (int c = a; c <= b && c - a < 4096; ++c) out.push_back(c);
      } catch (...) {
        return {cpu};
      }
    }
  if (std::find(out.begin(), out.end(), cpu) == out.end()) return {cpu};
  return out;
}

ProgressClock::ProgressClock(pid_t root) : root_(root), start_(Clock::now()), last_sample_(start_) {}

void ProgressClock::sample(std::chrono::milliseconds min_interval) {
  const auto now = Clock::now();
  if (sampled_ && now - last_sample_ < min_interval) return;
  sampled_ = true;
  const auto previous = last_sample_;
  last_sample_ = now;

  // Every process, with its parent: the tree under root_ is found from the parent links.
  std::unordered_map<pid_t, ProcStat> all;
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
      ProcStat st;
      if (!read_stat(pid, &st)) continue;
      all[pid] = st;
      children[st.ppid].push_back(pid);
    }
    closedir(d);
  }
  static const double tick = [] {
    long t = sysconf(_SC_CLK_TCK);
    return t > 0 ? 1.0 / static_cast<double>(t) : 0.01;
  }();
  unsigned long long ticks = 0;
  std::unordered_map<pid_t, unsigned long long> waits;
  std::vector<pid_t> todo{root_};
  for (std::size_t i = 0; i < todo.size() && i < 100000; ++i) {
    pid_t pid = todo[i];
    auto it = all.find(pid);
    if (it == all.end()) continue;
    ticks += it->second.cpu_ticks;
    if (thread_waits(pid, waits)) schedstat_ok_ = true;
    auto c = children.find(pid);
    if (c != children.end()) todo.insert(todo.end(), c->second.begin(), c->second.end());
  }
  // The wait the machine imposed on the tree since the last sample: that of its most-delayed thread over this
  // interval (a thread first seen now waited all its wait within it), at most the interval itself. Interval by
  // interval, not the largest total of any one thread: a tree whose waiting moves from thread to thread (a sandbox
  // that waited while it started, then the gate binary; short-lived workers) would otherwise be forgiven only the
  // single largest total, and a healthy binary on a busy machine would run out of its time.
  const double interval = std::chrono::duration<double>(now - previous).count();
  unsigned long long most = 0;
  for (const auto& [tid, w] : waits) {
    auto before = last_waits_.find(tid);
    const unsigned long long since = before == last_waits_.end() || before->second > w ? w : w - before->second;
    most = std::max(most, since);
  }
  last_waits_ = std::move(waits);
  waited_s_ += std::min(interval, static_cast<double>(most) * 1e-9);
  // CPU time only grows: a process that exits (or is reparented away) takes its figures with it, but the CPU it used
  // was still used.
  cpu_s_ = std::max(cpu_s_, static_cast<double>(ticks) * tick);
}

double ProgressClock::wall_seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

double ProgressClock::progress_seconds() const {
  // Between samples the clock runs at full speed; the next sample may take back some of it: clamp, progress never
  // runs backwards.
  progress_s_ = std::max(progress_s_, wall_seconds() - waited_s_);
  return progress_s_;
}

double ProgressClock::cpu_seconds() const { return cpu_s_; }

double ProgressClock::waited_seconds() const { return waited_s_; }

}  // namespace labgrade
