#include "labkit/report.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "labkit/channel_auth.h"

namespace labkit::report {
namespace {
struct Channel {
  std::mutex mu;
  std::FILE* out = nullptr;
  std::optional<auth::Key> key;  // the grader's, when it gave one (labkit/channel_auth.h)
  std::uint64_t seq = 0;         // lines written since the channel was opened
  std::string gate;
  std::string lab;                                    // for the trace only (set_lab)
  std::chrono::steady_clock::time_point checkpoint;  // gate start or the last trace_checkpoint
};
Channel& channel() {
  static Channel c;
  return c;
}
}  // namespace

namespace {
// The key take_key_early found: plain data, zero-initialised before any constructor runs.
struct EarlyKey {
  int fd;
  bool taken;
  unsigned char bytes[sizeof(auth::Key)];
};
EarlyKey g_early_key;
}  // namespace

void detail::take_key_early(int fd) noexcept {
  if (g_early_key.taken || fd < 0) return;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  const ssize_t want = static_cast<ssize_t>(sizeof g_early_key.bytes);
  if (recv(fd, g_early_key.bytes, sizeof g_early_key.bytes, MSG_DONTWAIT) == want) {
    g_early_key.fd = fd;
    g_early_key.taken = true;
  }
}

void detail::open(const std::string& path) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.out) std::fclose(c.out);
  c.out = nullptr;
  c.key.reset();
  c.seq = 0;
  if (path.empty() || path == "-") return;
  // "/dev/fd/N": the descriptor the grader handed down, used as it is. The grader's is a socket, which cannot be
  // opened again by path (that is the point: see grader/src/runner.cpp, open_channel).
  if (path.rfind("/dev/fd/", 0) == 0 && path.size() > 8 &&
      path.find_first_not_of("0123456789", 8) == std::string::npos) {
    const int fd = std::stoi(path.substr(8));
    // The grader put the key of this run into the socket before starting the process: the gate binary's first
    // constructor took it, and otherwise it is taken now (the read does not wait). Fewer bytes (a socket of someone
    // else's) leave the lines unsigned, and the grader then takes none of them.
    take_key_early(fd);
    if (g_early_key.taken && g_early_key.fd == fd) {
      auth::Key k{};
      std::memcpy(k.data(), g_early_key.bytes, k.size());
      c.key = k;
    }
    c.out = fdopen(fd, "w");
  } else {
    c.out = std::fopen(path.c_str(), "a");
  }
  if (!c.out) throw std::runtime_error("cannot open the result channel " + path);
}

bool detail::is_open() { return channel().out != nullptr; }

void detail::write_line(const std::string& json_object) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.out) return;
  std::fputs(c.key ? auth::sign(*c.key, c.seq++, json_object).c_str() : json_object.c_str(), c.out);
  std::fputc('\n', c.out);
  std::fflush(c.out);  // a crash right after still leaves every finished line behind
}

void detail::set_current_gate(std::string_view gate) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  c.gate = gate;
  c.checkpoint = std::chrono::steady_clock::now();
}

void detail::set_lab(std::string_view lab) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  c.lab = lab;
}

// LABKIT_GATE_TRACE=FILE: where a gate's time goes, without a profiler and under compute-sanitizer too. Every
// gate::require (one per checked shape or case) appends the time since the previous one, or since the gate began,
// with its context. Off unless the variable is set; the file is opened per line so that processes can share it.
void detail::trace_checkpoint(std::string_view context, bool ok) {
  const char* path = std::getenv("LABKIT_GATE_TRACE");  // per call: a few per checked case, and tests can set it
  if (!path || !*path) return;
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - c.checkpoint).count();
  c.checkpoint = now;
  if (std::FILE* f = std::fopen(path, "a")) {
    const char* tool = std::getenv("LABKIT_SANITIZER");
    // "t", the wall clock in seconds: the lines of every process of a run on one time line (which labs' gates and
    // checks ran at the same time).
    const double t = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::fputs(nlohmann::json{{"lab", c.lab}, {"pid", static_cast<long>(getpid())}, {"gate", c.gate},
                              {"context", context}, {"ok", ok}, {"ms", ms}, {"sanitizer", tool ? tool : ""}, {"t", t}}
                   .dump()
                   .c_str(),
               f);
    std::fputc('\n', f);
    std::fclose(f);
  }
}

std::string current_gate() {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.gate;
}

void metric(std::string_view name, double value, std::string_view unit) {
  std::cout << "  [metric] " << name << " = " << value << (unit.empty() ? "" : " ") << unit << std::endl;
  nlohmann::json j{{"event", "metric"}, {"gate", current_gate()}, {"name", name}, {"value", value}, {"unit", unit}};
  detail::write_line(j.dump());
}

void names(std::string_view name, const std::vector<std::string>& values) {
  nlohmann::json j{{"event", "names"}, {"gate", current_gate()}, {"name", name}, {"values", values}};
  detail::write_line(j.dump());
}

}  // namespace labkit::report
