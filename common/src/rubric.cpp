#include "labkit/rubric.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

namespace labkit {

const RubricGate* Rubric::find(const std::string& id) const {
  for (const auto& g : gates)
    if (g.id == id) return &g;
  return nullptr;
}

double Rubric::max_points() const {
  double sum = 0;
  for (const auto& g : gates) sum += g.points;
  return sum;
}

namespace {
[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw RubricError(source + ": " + what);
}
std::string where(const toml::node& n) {
  std::ostringstream os;
  os << "line " << n.source().begin.line;
  return os.str();
}
// A non-empty list of strings, each of which `valid` accepts; anything else calls `bad` (which throws).
template <class Valid, class Bad>
std::vector<std::string> string_list(const toml::node& n, Valid valid, Bad bad) {
  const toml::array* a = n.as_array();
  if (!a || a->empty()) bad();
  std::vector<std::string> out;
  for (const toml::node& e : *a) {
    const auto* v = e.as_string();
    if (!v || !valid(v->get())) bad();
    out.push_back(v->get());
  }
  return out;
}
}  // namespace

Rubric parse_rubric(const std::string& text, const std::string& source) {
  toml::table t;
  try {
    t = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "line " << e.source().begin.line << ", column " << e.source().begin.column << ": " << e.description();
    fail(source, os.str());
  }
  Rubric r;
  r.path = source;
  r.lab = t["lab"].value_or(std::string{});
  if (r.lab.empty()) fail(source, "missing `lab = \"NN\"`");
  r.title = t["title"].value_or(std::string{});
  r.time_limit_s = t["time_limit_s"].value_or(r.time_limit_s);
  r.gate_time_limit_s = t["gate_time_limit_s"].value_or(r.gate_time_limit_s);
  r.sanitizer_time_limit_s = t["sanitizer_time_limit_s"].value_or(r.sanitizer_time_limit_s);
  r.expected_run_s = t["expected_run_s"].value_or(r.expected_run_s);
  if (!(r.expected_run_s >= 0) || !std::isfinite(r.expected_run_s))
    fail(source, "expected_run_s must be a number of seconds, 0 or more");
  if (const toml::node* g = t.get("gpus")) {
    const toml::value<std::int64_t>* n = g->as_integer();
    if (!n || n->get() < 1 || n->get() > 64) fail(source, "gpus must be a whole number from 1 to 64");
    r.gpus = static_cast<int>(n->get());
  }
  if (auto lb = t["leaderboard"].as_table()) {
    r.leaderboard_gate = (*lb)["gate"].value_or(std::string{});
    r.leaderboard_metric = (*lb)["metric"].value_or(std::string{});
    r.leaderboard_order = (*lb)["order"].value_or(std::string("desc"));
  }
  auto* arr = t["gate"].as_array();
  if (!arr || arr->empty()) fail(source, "no [[gate]] entries");
  std::set<std::string> seen;
  for (auto& node : *arr) {
    auto* g = node.as_table();
    if (!g) fail(source, where(node) + ": [[gate]] must be a table");
    RubricGate gate;
    gate.id = (*g)["id"].value_or(std::string{});
    if (gate.id.empty()) fail(source, where(node) + ": a gate without `id`");
    if (!seen.insert(gate.id).second) fail(source, where(node) + ": duplicate gate id `" + gate.id + "`");
    gate.title = (*g)["title"].value_or(gate.id);
    gate.kind = (*g)["kind"].value_or(std::string("correctness"));
    if (gate.kind != "cpu" && gate.kind != "correctness" && gate.kind != "speed")
      fail(source, where(node) + ": gate `" + gate.id + "`: kind must be cpu, correctness or speed");
    gate.points = (*g)["points"].value_or(0.0);
    if (gate.points < 0) fail(source, where(node) + ": gate `" + gate.id + "`: negative points");
    gate.metric = (*g)["metric"].value_or(std::string{});
    if (auto th = (*g)["threshold"].value<double>()) gate.threshold = *th;
    if (auto ref = (*g)["reference"].value<double>()) gate.reference = *ref;
    if (auto f = (*g)["floor"].value<double>()) gate.floor = *f;
    if (auto m = (*g)["max_ratio"].value<double>()) gate.max_ratio = *m;
    if (auto* libs = (*g)["allow_libraries"].as_array())
      for (auto& l : *libs) {
        auto name = l.value<std::string>();
        if (!name) fail(source, where(node) + ": gate `" + gate.id + "`: allow_libraries takes strings");
        // A misspelt name would silently allow nothing and fail a healthy step: refuse it here.
        if (*name != "cublas" && *name != "cusparse" && *name != "cub" && *name != "thrust" && *name != "nccl")
          fail(source, where(node) + ": gate `" + gate.id + "`: allow_libraries: unknown library `" + *name +
                           "` (cublas, cusparse, cub, thrust or nccl)");
        gate.allow_libraries.push_back(*name);
      }
    if (const toml::node* n = g->get("gpus")) {
      const toml::value<std::int64_t>* v = n->as_integer();
      if (!v || v->get() < 1 || v->get() > r.gpus)
        fail(source, where(node) + ": gate `" + gate.id +
                         "`: gpus must be a whole number from 1 to the lab's `gpus` (" + std::to_string(r.gpus) + ")");
      gate.gpus = static_cast<int>(v->get());
    }
    if (const toml::node* n = g->get("needs_shared_memory")) {
      if (!n->is_boolean())
        fail(source, where(node) + ": gate `" + gate.id + "`: needs_shared_memory takes true or false");
      gate.needs_shared_memory = n->as_boolean()->get();
      if (gate.needs_shared_memory && gate.kind != "correctness")
        fail(source, where(node) + ": gate `" + gate.id + "`: needs_shared_memory is for correctness gates");
    }
    const auto opcode = [](const std::string& v) {  // capitals and digits: "DMMA", not "DMMA.884" or "dmma"
      return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      });
    };
    for (const char* key : {"needs_instructions", "forbid_instructions"})
      if (const toml::node* n = g->get(key)) {
        (std::string(key) == "needs_instructions" ? gate.needs_instructions : gate.forbid_instructions) =
            string_list(*n, opcode, [&] {
              fail(source, where(node) + ": gate `" + gate.id + "`: " + key +
                               " takes a list of SASS opcodes in capitals (\"DMMA\")");
            });
        if (gate.kind != "correctness")
          fail(source, where(node) + ": gate `" + gate.id + "`: " + key + " is for correctness gates");
      }
    if (const toml::node* n = g->get("instruction_archs")) {
      const auto arch = [](const std::string& v) {  // "sm_" and digits
        return v.size() > 3 && v.rfind("sm_", 0) == 0 &&
               std::all_of(v.begin() + 3, v.end(), [](char c) { return c >= '0' && c <= '9'; });
      };
      const auto bad = [&] {
        fail(source, where(node) + ": gate `" + gate.id +
                         "`: instruction_archs takes a list of architectures such as \"sm_90\" (with "
                         "needs_instructions)");
      };
      if (gate.needs_instructions.empty()) bad();
      gate.instruction_archs = string_list(*n, arch, bad);
    }
    gate.hidden = (*g)["hidden"].value_or(false);
    gate.hint = (*g)["hint"].value_or(std::string{});
    if (gate.kind == "speed" && (!gate.threshold || gate.metric.empty()))
      fail(source, where(node) + ": speed gate `" + gate.id + "` needs `metric` and `threshold`");
    if (gate.floor && (!gate.threshold || *gate.floor >= *gate.threshold))
      fail(source, where(node) + ": gate `" + gate.id + "`: floor needs a threshold above it");
    if (gate.max_ratio && gate.threshold && *gate.max_ratio <= *gate.threshold)
      fail(source, where(node) + ": gate `" + gate.id + "`: max_ratio must be above the threshold");
    r.gates.push_back(std::move(gate));
  }
  if (!r.leaderboard_gate.empty() && !r.find(r.leaderboard_gate))
    fail(source, "[leaderboard] names gate `" + r.leaderboard_gate + "`, which the rubric does not have");
  return r;
}

Rubric load_rubric(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw RubricError(path + ": cannot open the rubric");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_rubric(ss.str(), path);
}

}  // namespace labkit
