#include "labkit/report.h"

#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>

namespace labkit::report {
namespace {
struct Channel {
  std::mutex mu;
  std::FILE* out = nullptr;
  std::string gate;
};
Channel& channel() {
  static Channel c;
  return c;
}
}  // namespace

void detail::open(const std::string& path) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.out) std::fclose(c.out);
  c.out = nullptr;
  if (path.empty() || path == "-") return;
  c.out = std::fopen(path.c_str(), "a");
  if (!c.out) throw std::runtime_error("cannot open the result channel " + path);
}

bool detail::is_open() { return channel().out != nullptr; }

void detail::write_line(const std::string& json_object) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.out) return;
  std::fputs(json_object.c_str(), c.out);
  std::fputc('\n', c.out);
  std::fflush(c.out);  // a crash right after still leaves every finished line behind
}

void detail::set_current_gate(std::string_view gate) {
  auto& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  c.gate = gate;
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

}  // namespace labkit::report
