// LABKIT_GATE_TRACE: every gate::require appends one JSON line (lab, process, gate, context, verdict, milliseconds
// since the gate began or the previous line, the sanitizer) to the named file, and nothing without the variable.
#include <catch2/catch_test_macros.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "labkit/compare.h"
#include "labkit/gate.h"
#include "labkit/report.h"

namespace {
std::vector<nlohmann::json> read_lines(const std::filesystem::path& p) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}
}  // namespace

TEST_CASE("the gate trace records each checked case with its time and only when asked", "[gate]") {
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  const auto file = std::filesystem::temp_directory_path() / ("labkit_gate_trace_" + std::to_string(stamp));
  std::filesystem::remove(file);
  unsetenv("LABKIT_SANITIZER");
  unsetenv("LABKIT_GATE_TRACE");
  labkit::report::detail::set_current_gate("step9.correct");
  labkit::gate::require(labkit::Verdict{}, "not traced");
  CHECK(!std::filesystem::exists(file));

  setenv("LABKIT_GATE_TRACE", file.c_str(), 1);
  labkit::report::detail::set_lab("99");
  labkit::report::detail::set_current_gate("step9.correct");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  labkit::gate::require(labkit::Verdict{}, "n = 33");
  setenv("LABKIT_SANITIZER", "racecheck", 1);
  labkit::gate::require(labkit::Verdict{}, "n = 1025");
  unsetenv("LABKIT_SANITIZER");
  unsetenv("LABKIT_GATE_TRACE");
  labkit::report::detail::set_current_gate("");

  const auto lines = read_lines(file);
  std::filesystem::remove(file);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["lab"] == "99");
  CHECK(lines[0]["pid"] == static_cast<long>(getpid()));
  CHECK(lines[0]["gate"] == "step9.correct");
  CHECK(lines[0]["context"] == "n = 33");
  CHECK(lines[0]["ok"] == true);
  CHECK(lines[0]["sanitizer"] == "");
  CHECK(lines[0]["ms"].get<double>() >= 19.0);  // from the gate's start, the sleep included
  CHECK(lines[1]["context"] == "n = 1025");
  CHECK(lines[1]["sanitizer"] == "racecheck");
  CHECK(lines[1]["ms"].get<double>() < lines[0]["ms"].get<double>());  // from the previous line, not the start
}
