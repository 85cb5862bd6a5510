#include "scoring.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <toml++/toml.h>

namespace labgrade {

namespace {
constexpr const char* kStatusNames[] = {"passed",  "failed",  "skipped",      "not_implemented",
                                        "crashed", "timeout", "missing",      "build_failed",
                                        "not_submitted", "refused"};
constexpr int kStatusCount = static_cast<int>(sizeof kStatusNames / sizeof kStatusNames[0]);
static_assert(kStatusCount == static_cast<int>(Status::refused) + 1, "a name for every status");
// A gate binary writes a few KiB per gate; anything far beyond that is a submission flooding the channel.
constexpr std::size_t kMaxChannelBytes = 32u << 20;
constexpr std::size_t kMaxLineBytes = 1u << 20;

}  // namespace

std::string fmt_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string to_string(Status s) { return kStatusNames[static_cast<int>(s)]; }

Status status_from_string(const std::string& s) {
  for (int i = 0; i < kStatusCount; ++i)
    if (s == kStatusNames[i]) return static_cast<Status>(i);
  return Status::failed;
}

double LabResult::score() const {
  double s = 0;
  for (const auto& g : gates) s += g.points;
  return s;
}
double LabResult::max_score() const {
  double s = 0;
  for (const auto& g : gates) s += g.max_points;
  return s;
}
bool LabResult::all_passed() const {
  for (const auto& g : gates)
    if (g.status != Status::passed) return false;
  return true;
}
double SubmissionResult::score() const {
  double s = 0;
  for (const auto& l : labs) s += l.score();
  return s;
}
double SubmissionResult::max_score() const {
  double s = 0;
  for (const auto& l : labs) s += l.max_score();
  return s;
}
bool SubmissionResult::all_passed() const {
  if (!error.empty()) return false;
  for (const auto& l : labs)
    if (!l.all_passed()) return false;
  return true;
}

// ---- JSON --------------------------------------------------------------------------------------------------

namespace {
nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
std::optional<double> opt_double(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}
}  // namespace

nlohmann::json to_json(const SubmissionResult& r) {
  nlohmann::json labs = nlohmann::json::array();
  for (const auto& l : r.labs) {
    nlohmann::json gates = nlohmann::json::array();
    for (const auto& g : l.gates) {
      nlohmann::json metrics = nlohmann::json::object();
      for (const auto& [name, m] : g.metrics) metrics[name] = {{"value", m.value}, {"unit", m.unit}};
      gates.push_back({{"id", g.id},
                       {"title", g.title},
                       {"kind", g.kind},
                       {"hidden", g.hidden},
                       {"points", g.points},
                       {"max_points", g.max_points},
                       {"status", to_string(g.status)},
                       {"message", g.message},
                       {"seconds", g.seconds},
                       {"metrics", metrics},
                       {"metric", g.metric_name},
                       {"threshold", opt(g.threshold)},
                       {"reference", opt(g.reference)},
                       {"floor", opt(g.floor)},
                       {"measured", opt(g.measured)},
                       {"hint", g.hint},
                       {"sanitizer", g.sanitizer}});
    }
    nlohmann::json san = nlohmann::json::array();
    for (const auto& f : l.sanitizer) san.push_back({{"tool", f.tool}, {"errors", f.errors}, {"excerpt", f.excerpt}});
    labs.push_back({{"lab", l.lab},
                    {"name", l.name},
                    {"title", l.title},
                    {"score", l.score()},
                    {"max_score", l.max_score()},
                    {"compile_seconds", l.compile_seconds},
                    {"run_seconds", l.run_seconds},
                    {"device", l.device},
                    {"seed", l.seed ? nlohmann::json(*l.seed) : nlohmann::json(nullptr)},
                    {"notes", l.notes},
                    {"sanitizer", san},
                    {"leaderboard",
                     {{"gate", l.leaderboard_gate},
                      {"metric", l.leaderboard_metric},
                      {"order", l.leaderboard_order},
                      {"value", opt(l.leaderboard_value)}}},
                    {"gates", gates}});
  }
  return {{"student", r.student},
          {"score", r.score()},
          {"max_score", r.max_score()},
          {"compile_seconds", r.compile_seconds},
          {"run_seconds", r.run_seconds},
          {"error", r.error},
          {"isolation", r.isolation},
          {"labs", labs}};
}

SubmissionResult submission_from_json(const nlohmann::json& j) {
  SubmissionResult r;
  r.student = j.value("student", "");
  r.compile_seconds = j.value("compile_seconds", 0.0);
  r.run_seconds = j.value("run_seconds", 0.0);
  r.error = j.value("error", "");
  r.isolation = j.value("isolation", "");
  for (const auto& jl : j.value("labs", nlohmann::json::array())) {
    LabResult l;
    l.lab = jl.value("lab", "");
    l.name = jl.value("name", "");
    l.title = jl.value("title", "");
    l.compile_seconds = jl.value("compile_seconds", 0.0);
    l.run_seconds = jl.value("run_seconds", 0.0);
    l.device = jl.value("device", "");
    if (jl.contains("seed") && jl["seed"].is_number_unsigned()) l.seed = jl["seed"].get<std::uint64_t>();
    l.notes = jl.value("notes", std::vector<std::string>{});
    for (const auto& f : jl.value("sanitizer", nlohmann::json::array()))
      l.sanitizer.push_back({f.value("tool", ""), f.value("errors", 0), f.value("excerpt", "")});
    if (jl.contains("leaderboard")) {
      const auto& lb = jl["leaderboard"];
      l.leaderboard_gate = lb.value("gate", "");
      l.leaderboard_metric = lb.value("metric", "");
      l.leaderboard_order = lb.value("order", "desc");
      l.leaderboard_value = opt_double(lb, "value");
    }
    for (const auto& jg : jl.value("gates", nlohmann::json::array())) {
      GateResult g;
      g.id = jg.value("id", "");
      g.title = jg.value("title", "");
      g.kind = jg.value("kind", "");
      g.hidden = jg.value("hidden", false);
      g.points = jg.value("points", 0.0);
      g.max_points = jg.value("max_points", 0.0);
      g.status = status_from_string(jg.value("status", "failed"));
      g.message = jg.value("message", "");
      g.seconds = jg.value("seconds", 0.0);
      const nlohmann::json metrics = jg.value("metrics", nlohmann::json::object());
      for (const auto& [name, m] : metrics.items()) g.metrics[name] = {m.value("value", 0.0), m.value("unit", "")};
      g.metric_name = jg.value("metric", "");
      g.threshold = opt_double(jg, "threshold");
      g.reference = opt_double(jg, "reference");
      g.floor = opt_double(jg, "floor");
      g.measured = opt_double(jg, "measured");
      g.hint = jg.value("hint", "");
      g.sanitizer = jg.value("sanitizer", "");
      l.gates.push_back(std::move(g));
    }
    r.labs.push_back(std::move(l));
  }
  return r;
}

// ---- the rubric --------------------------------------------------------------------------------------------

std::vector<const labkit::RubricGate*> graded_gates(const labkit::Rubric& rubric, bool include_hidden) {
  std::vector<const labkit::RubricGate*> out;
  for (const auto& g : rubric.gates)
    if (include_hidden || !g.hidden) out.push_back(&g);
  return out;
}

LabResult make_lab_result(const labkit::Rubric& rubric, const std::string& lab_name, bool include_hidden) {
  LabResult lab;
  lab.lab = rubric.lab;
  lab.name = lab_name;
  lab.title = rubric.title;
  lab.leaderboard_gate = rubric.leaderboard_gate;
  lab.leaderboard_metric = rubric.leaderboard_metric;
  lab.leaderboard_order = rubric.leaderboard_order;
  for (const auto* rg : graded_gates(rubric, include_hidden)) {
    GateResult g;
    g.id = rg->id;
    g.title = rg->title;
    g.kind = rg->kind;
    g.hidden = rg->hidden;
    g.max_points = rg->points;
    g.metric_name = rg->metric;
    g.threshold = rg->threshold;
    g.reference = rg->reference;
    g.floor = rg->floor;
    g.max_ratio = rg->max_ratio;
    g.hint = rg->hint;
    g.gpus = rg->gpus;
    g.needs_shared_memory = rg->needs_shared_memory;
    g.needs_instructions = rg->needs_instructions;
    g.instruction_archs = rg->instruction_archs;
    g.forbid_instructions = rg->forbid_instructions;
    g.status = Status::missing;
    lab.gates.push_back(std::move(g));
  }
  if (!lab.leaderboard_gate.empty() && !include_hidden) {
    const auto* lg = rubric.find(lab.leaderboard_gate);
    if (lg && lg->hidden) lab.leaderboard_gate.clear();  // don't reveal a hidden gate's figure
  }
  return lab;
}

void skip_gates_needing_more_gpus(LabResult& lab, int visible) {
  if (visible <= 0) return;
  for (auto& g : lab.gates) {
    if (g.status != Status::missing || g.gpus <= visible) continue;
    g.status = Status::skipped;
    // "this gate needs": the words the fixture check (fixtures.cpp) and the binaries' own skips use. (A batch whose
    // workers see too few GPUs has said before it started how to give a worker more: multi_gpu_warnings.)
    g.message = "this gate needs " + std::to_string(g.gpus) + " GPUs and the lab sees " + std::to_string(visible) +
                " here, so it was not run";
  }
}

void set_all(LabResult& lab, Status status, const std::string& message) {
  for (auto& g : lab.gates) {
    g.status = status;
    g.message = message;
  }
}

namespace {
// "" or why a speed gate's reported figures cannot be right: a ratio above the rubric's max_ratio. (The escaped-work
// verdict stays the binary's alone: labs 07 and 08 report per-iteration times, against which a whole call's wait
// cannot be judged from the outside.)
std::string beyond_hardware(const GateResult& g) {
  const auto ratio = g.metrics.find("ratio");
  if (g.max_ratio && ratio != g.metrics.end() && !(ratio->second.value <= *g.max_ratio))
    return "measured ratio = " + fmt_number(ratio->second.value) + ", above " + fmt_number(*g.max_ratio) +
           ", beyond what the hardware allows (replayed results, or work the timer did not see)";
  return "";
}
}  // namespace

bool lost_points_with_timing(const GateResult& g) {
  if (g.kind != "speed" || g.metric_name.empty() || !g.threshold) return false;
  if (g.status != Status::failed && g.status != Status::passed) return false;
  const auto it = g.metrics.find(g.metric_name);
  return it != g.metrics.end() && !(it->second.value >= *g.threshold);
}


void apply_rubric(LabResult& lab) {
  for (auto& g : lab.gates) {
    if (g.kind == "speed" && g.threshold && !g.metric_name.empty()) {
      auto it = g.metrics.find(g.metric_name);
      if (it != g.metrics.end()) g.measured = it->second.value;
      if (g.status == Status::passed) {
        // The binary fails this itself (labkit::gate::require_speedup); the grader checks it again from the figures
        // the gate reported, so that a verdict the step's code reached into is not the last word.
        const std::string beyond = beyond_hardware(g);
        if (!beyond.empty()) {
          g.status = Status::failed;
          g.message = beyond + " (the gate binary said passed; the grader's re-check decides)" +
                      (g.message.empty() ? "" : "\n" + g.message);
        } else if (!g.measured) {
          g.status = Status::failed;
          g.message = "the gate reported no `" + g.metric_name + "` figure, so its threshold (" +
                      fmt_number(*g.threshold) + ") cannot be checked" + (g.message.empty() ? "" : "\n" + g.message);
        } else if (!(std::isfinite(*g.measured) && *g.measured >= *g.threshold)) {
          const bool curve = g.floor && std::isfinite(*g.measured) && *g.measured >= *g.floor;
          g.status = Status::failed;
          if (curve) {
            // The binary judged against the floor (gate_rubric_text): between floor and threshold, linear credit.
            double share = (*g.measured - *g.floor) / (*g.threshold - *g.floor);
            g.points = g.max_points * std::min(1.0, std::max(0.0, share));
            g.message = "partial credit: measured " + g.metric_name + " = " + fmt_number(*g.measured) +
                        ", between the floor " + fmt_number(*g.floor) + " (0 points) and the threshold " +
                        fmt_number(*g.threshold) + " (full points): " + fmt_number(g.points) + " of " +
                        fmt_number(g.max_points) + (g.message.empty() ? "" : "\n" + g.message);
            continue;
          }
          g.message = "measured " + g.metric_name + " = " + fmt_number(*g.measured) + ", below the " +
                      (g.floor ? "floor " + fmt_number(*g.floor) + " of the partial credit (threshold " +
                                     fmt_number(*g.threshold) + ")"
                               : "threshold " + fmt_number(*g.threshold)) +
                      " (the gate binary said passed; the grader's re-check decides)" +
                      (g.message.empty() ? "" : "\n" + g.message);
        }
      }
    }
    g.points = g.status == Status::passed ? g.max_points : 0.0;
  }
  lab.leaderboard_value.reset();
  if (!lab.leaderboard_gate.empty() && !lab.leaderboard_metric.empty()) {
    for (const auto& g : lab.gates) {
      if (g.id != lab.leaderboard_gate || g.status != Status::passed) continue;
      auto it = g.metrics.find(lab.leaderboard_metric);
      if (it != g.metrics.end() && std::isfinite(it->second.value)) lab.leaderboard_value = it->second.value;
    }
  }
}

std::string gate_rubric_text(const std::string& rubric_toml, bool redact_hidden) {
  toml::table t = toml::parse(rubric_toml);  // the caller has validated it with labkit::load_rubric
  if (auto* gates = t["gate"].as_array())
    for (auto& node : *gates) {
      auto* g = node.as_table();
      if (!g) continue;
      if (auto floor = (*g)["floor"].value<double>()) {
        g->insert_or_assign("threshold", *floor);
        g->erase("floor");  // the rubric loader requires floor < threshold
      }
      if (redact_hidden && (*g)["hidden"].value_or(false)) {
        g->erase("title");
        g->erase("hint");
      }
    }
  std::ostringstream out;
  out << "# written by labgrade for the gate binary: floors as thresholds, hidden gates without title and hint\n"
      << t << "\n";
  return out.str();
}

// ---- the result channel ------------------------------------------------------------------------------------

void ChannelParser::feed(std::string_view bytes) {
  if (bytes_ >= kMaxChannelBytes) return;
  if (bytes_ + bytes.size() > kMaxChannelBytes) {
    bytes = bytes.substr(0, kMaxChannelBytes - bytes_);
    anomaly("the result channel exceeded " + std::to_string(kMaxChannelBytes >> 20) + " MiB; the rest was ignored");
  }
  bytes_ += bytes.size();
  pending_.append(bytes);
  std::size_t start = 0;
  for (;;) {
    std::size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    line(std::string_view(pending_).substr(start, nl - start));
    start = nl + 1;
  }
  pending_.erase(0, start);
  if (pending_.size() > kMaxLineBytes) {
    anomaly("a result line longer than 1 MiB");
    pending_.clear();
  }
}

void ChannelParser::finish() { pending_.clear(); }

void ChannelParser::anomaly(const std::string& what) {
  anomalies_.push_back(what);
  if (!open_gate_.empty() && open_taint_.empty()) open_taint_ = what;
}

void ChannelParser::line(std::string_view l) {
  if (l.empty()) return;
  std::string object;
  if (key_) {
    if (!labkit::report::auth::verify(*key_, next_seq_, l, &object)) {
      ++unsigned_lines_;
      anomaly("a line on the result channel that the gate binary did not write (its tag does not match the run's "
              "key: written by the submission's code, or the key was taken from the channel at start-up)");
      return;
    }
    ++next_seq_;
    l = object;
  }
  auto j = nlohmann::json::parse(l, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_string()) {
    anomaly("a line on the result channel that is not a result event");
    return;
  }
  const std::string ev = j["event"].get<std::string>();
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto taint_ended = [&](const std::string& gate, const std::string& why) {
    auto it = ended_.find(gate);
    if (it != ended_.end()) {
      it->second.tainted = true;
      it->second.taint_reason = why;
    }
  };

  if (run_ended_) {
    anomaly("result events after run_end");
    return;
  }
  if (ev == "run_start") {
    if (run_started_) {
      anomaly("a second run_start");
      return;
    }
    run_started_ = true;
    device_ = str("device");
    proc_writes_ = str("proc_writes");
    if (j.contains("seed") && j["seed"].is_number_unsigned()) seed_ = j["seed"].get<std::uint64_t>();
    return;
  }
  if (!run_started_) {
    anomaly("result events before run_start (written by a global constructor?)");
    return;
  }
  if (ev == "gate_start") {
    std::string gate = str("gate");
    ++gate_events_;
    if (!open_gate_.empty()) anomaly("gate_start `" + gate + "` while `" + open_gate_ + "` was running");
    if (started_.count(gate)) {
      taint_ended(gate, "the gate was started twice");
      anomaly("gate `" + gate + "` started twice");
    }
    started_.insert(gate);
    open_gate_ = gate;
    open_metrics_.clear();
    open_names_.clear();
    open_taint_.clear();
    return;
  }
  if (ev == "names") {
    std::string gate = str("gate"), name = str("name");
    if (open_gate_.empty() || gate != open_gate_ || name.empty() || !j.contains("values") ||
        !j["values"].is_array()) {
      anomaly("a list of names for `" + gate + "` outside that gate");
      return;
    }
    std::vector<std::string> values;
    for (const auto& v : j["values"])
      if (v.is_string()) values.push_back(v.get<std::string>());
    open_names_[name] = std::move(values);
    return;
  }
  if (ev == "metric") {
    std::string gate = str("gate"), name = str("name");
    if (open_gate_.empty() || gate != open_gate_ || name.empty() || !j.contains("value")) {
      anomaly("a metric for `" + gate + "` outside that gate");
      return;
    }
    double v = j["value"].is_number() ? j["value"].get<double>() : std::nan("");
    open_metrics_[name] = {v, str("unit")};
    return;
  }
  if (ev == "gate_end") {
    std::string gate = str("gate");
    ++gate_events_;
    if (gate != open_gate_) {
      taint_ended(gate, "a second gate_end");
      anomaly("gate_end `" + gate + "` but the running gate is `" + open_gate_ + "`");
      return;
    }
    GateOutcome o;
    o.status = status_from_string(str("status"));
    if (str("status") == "timeout" || str("status") == "missing" || str("status") == "build_failed" ||
        str("status") == "not_submitted" || str("status") == "refused")
      o.status = Status::failed;  // statuses only the grader may give
    o.message = str("message");
    o.seconds = j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>() : 0.0;
    if (!open_taint_.empty()) {
      o.tainted = true;
      o.taint_reason = open_taint_;
    }
    o.metrics = open_metrics_;
    o.names = open_names_;
    if (ended_.count(gate)) {
      o.tainted = true;
      o.taint_reason = "the gate ended twice";
    }
    ended_[gate] = o;
    ended_order_.push_back(gate);
    open_gate_.clear();
    open_metrics_.clear();
    open_names_.clear();
    open_taint_.clear();
    return;
  }
  if (ev == "run_end") {
    if (!open_gate_.empty()) anomaly("run_end while `" + open_gate_ + "` was running");
    run_ended_ = true;
    return;
  }
  anomaly("unknown result event `" + ev + "`");
}

}  // namespace labgrade
