// The result channel parser and the rubric scoring.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>

#include "scoring.h"
#include "util.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

const char* kRubric = R"(
lab = "98"
title = "scoring test"
[leaderboard]
gate = "s.speed"
metric = "candidate_rate"
order = "desc"
[[gate]]
id = "a"
kind = "cpu"
points = 2
[[gate]]
id = "s.speed"
kind = "speed"
points = 5
metric = "ratio"
threshold = 2.0
reference = 6.0
[[gate]]
id = "h"
kind = "cpu"
points = 1
hidden = true
)";

std::string line(const std::string& s) { return s + "\n"; }
const std::string kRunStart = line(R"({"event":"run_start","lab":"98","seed":42,"device":"none","rubric":"r"})");

}  // namespace

TEST_CASE("the channel parser reads events split at any byte", "[channel]") {
  std::string all = kRunStart + line(R"({"event":"gate_start","gate":"a"})") +
                    line(R"({"event":"metric","gate":"a","name":"ratio","value":1.5,"unit":"x"})") +
                    line(R"({"event":"gate_end","gate":"a","status":"passed","message":"","seconds":0.5})") +
                    line(R"({"event":"run_end","passed":1,"failed":0,"skipped":0})");
  for (std::size_t chunk : {1u, 3u, 7u, 64u, 10000u}) {
    ChannelParser p;
    for (std::size_t i = 0; i < all.size(); i += chunk) p.feed(all.substr(i, chunk));
    p.finish();
    REQUIRE(p.run_started());
    REQUIRE(p.run_ended());
    REQUIRE(p.seed() == 42u);
    REQUIRE(p.ended().count("a") == 1);
    CHECK(p.ended().at("a").status == Status::passed);
    CHECK(p.ended().at("a").metrics.at("ratio").value == 1.5);
    CHECK_FALSE(p.ended().at("a").tainted);
    CHECK(p.anomalies().empty());
  }
}

TEST_CASE("the channel parser keeps a gate's last list of names and refuses one outside its gate", "[channel]") {
  ChannelParser p;
  p.feed(kRunStart + line(R"({"event":"gate_start","gate":"a"})") +
         line(R"({"event":"names","gate":"a","name":"shared_memory_kernels","values":["_Z1kPf"]})") +
         line(R"({"event":"names","gate":"a","name":"shared_memory_kernels","values":["_Z1kPf","_Z1gPd"]})") +
         line(R"({"event":"gate_end","gate":"a","status":"passed","message":"","seconds":0})") +
         line(R"({"event":"gate_start","gate":"b"})") +
         line(R"({"event":"names","gate":"a","name":"shared_memory_kernels","values":["_Z1xPf"]})") +
         line(R"({"event":"names","gate":"b","name":"shared_memory_kernels","values":"_Z1xPf"})") +
         line(R"({"event":"gate_end","gate":"b","status":"passed","message":"","seconds":0})"));
  REQUIRE(p.ended().count("a"));
  CHECK(p.ended().at("a").names.at("shared_memory_kernels") == std::vector<std::string>{"_Z1kPf", "_Z1gPd"});
  REQUIRE(p.ended().count("b"));
  CHECK(p.ended().at("b").names.empty());  // one list for another gate, one that is not a list
  CHECK(p.anomalies().size() == 2);
}

TEST_CASE("the channel parser: a gate_start without gate_end is the open gate", "[channel]") {
  ChannelParser p;
  p.feed(kRunStart + line(R"({"event":"gate_start","gate":"a"})") + R"({"event":"gate_end","gate":"a","sta)");
  p.finish();  // the writer died mid-line
  CHECK(p.open_gate() == "a");
  CHECK(p.ended().empty());
}

TEST_CASE("the channel parser ignores lines before run_start and taints out-of-protocol lines", "[channel]") {
  ChannelParser p;
  // A global constructor forging a pass before the run starts: ignored.
  p.feed(line(R"({"event":"gate_end","gate":"a","status":"passed"})") + kRunStart);
  CHECK(p.ended().empty());
  CHECK(p.anomalies().size() == 1);
  // Inside gate a: garbage, then the real end.
  p.feed(line(R"({"event":"gate_start","gate":"a"})") + line("All tests passed") +
         line(R"({"event":"gate_end","gate":"a","status":"passed","message":"","seconds":0})"));
  REQUIRE(p.ended().count("a"));
  CHECK(p.ended().at("a").tainted);
  // A forged second end of a gate that already ended taints it too.
  ChannelParser q;
  q.feed(kRunStart + line(R"({"event":"gate_start","gate":"a"})") +
         line(R"({"event":"gate_end","gate":"a","status":"passed","message":"","seconds":0})") +
         line(R"({"event":"gate_end","gate":"a","status":"failed","message":"","seconds":0})"));
  CHECK(q.ended().at("a").tainted);
  // Statuses only the grader may give are not accepted from the binary.
  ChannelParser r;
  r.feed(kRunStart + line(R"({"event":"gate_start","gate":"a"})") +
         line(R"({"event":"gate_end","gate":"a","status":"missing","message":"","seconds":0})"));
  CHECK(r.ended().at("a").status == Status::failed);
}

TEST_CASE("with the run's key, only lines the gate binary signed count; forged and replayed lines taint", "[channel]") {
  labkit::report::auth::Key key{};
  key[0] = 42;
  std::uint64_t seq = 0;
  auto gate = [&](const std::string& obj) { return labkit::report::auth::sign(key, seq++, obj) + "\n"; };
  ChannelParser p;
  p.require_key(key);
  p.feed(gate(R"({"event":"run_start","lab":"98","seed":1,"device":"none","rubric":"r"})"));
  p.feed(gate(R"({"event":"gate_start","gate":"a"})"));
  const std::string ok = gate(R"({"event":"gate_end","gate":"a","status":"passed","message":"","seconds":0})");
  p.feed(ok);
  p.feed(gate(R"({"event":"gate_start","gate":"b"})"));
  // The submission's code, during gate b: an unsigned end of b, the rest of the run, and a signed line replayed.
  p.feed(R"({"event":"gate_end","gate":"b","status":"passed","message":"","seconds":0})" "\n");
  p.feed(R"({"event":"run_end","passed":2,"failed":0,"skipped":0})" "\n");
  p.feed(ok);
  CHECK(p.open_gate() == "b");
  CHECK_FALSE(p.run_ended());
  CHECK_THAT(p.open_taint(), ContainsSubstring("did not write"));
  CHECK(p.anomalies().size() == 3);
  // The gate binary's own lines still count, in their order.
  p.feed(gate(R"({"event":"gate_end","gate":"b","status":"failed","message":"wrong","seconds":0})"));
  p.feed(gate(R"({"event":"run_end","passed":1,"failed":1,"skipped":0})"));
  CHECK(p.run_ended());
  REQUIRE(p.ended().count("b"));
  CHECK(p.ended().at("b").status == Status::failed);
  CHECK(p.ended().at("b").tainted);
  CHECK(p.ended().at("a").status == Status::passed);
  CHECK_FALSE(p.ended().at("a").tainted);
}

TEST_CASE("make_lab_result keeps hidden gates only for the instructor's tree", "[rubric]") {
  auto rubric = labkit::parse_rubric(kRubric, "test.toml");
  CHECK(make_lab_result(rubric, "98_x", true).gates.size() == 3);
  auto lab = make_lab_result(rubric, "98_x", false);
  REQUIRE(lab.gates.size() == 2);
  CHECK(lab.max_score() == 7);
}

TEST_CASE("a gate that needs more GPUs than the lab sees is skipped without running, and says why", "[rubric]") {
  auto rubric = labkit::parse_rubric(R"(
lab = "98"
gpus = 2
[[gate]]
id = "a.correct"
[[gate]]
id = "b.multi"
gpus = 2
[[gate]]
id = "c.speed"
kind = "speed"
gpus = 2
metric = "ratio"
threshold = 1.0
[[gate]]
id = "d.speed"
kind = "speed"
gpus = 2
metric = "ratio"
threshold = 1.0
)",
                                     "r.toml");
  auto lab = make_lab_result(rubric, "98_x", false);
  lab.gates[3].status = Status::build_failed;  // an outcome already given stays
  skip_gates_needing_more_gpus(lab, 1);
  CHECK(lab.gates[0].status == Status::missing);
  for (int k : {1, 2}) {
    CHECK(lab.gates[std::size_t(k)].status == Status::skipped);
    // The fixture check knows a skip for want of GPUs by these words.
    CHECK_THAT(lab.gates[std::size_t(k)].message, ContainsSubstring("this gate needs 2 GPUs and the lab sees 1"));
  }
  CHECK(lab.gates[3].status == Status::build_failed);
  // Enough GPUs, or none (the binary says "no CUDA device" itself), or not known: nothing changes.
  for (int visible : {2, 4, 0, -1}) {
    auto again = make_lab_result(rubric, "98_x", false);
    skip_gates_needing_more_gpus(again, visible);
    for (const auto& g : again.gates) CHECK(g.status == Status::missing);
  }
}

TEST_CASE("a speed gate passes only when the reported metric reaches the threshold", "[rubric]") {
  auto rubric = labkit::parse_rubric(kRubric, "test.toml");
  auto run = [&](Status status, std::optional<double> ratio) {
    LabResult lab = make_lab_result(rubric, "98_x", true);
    for (auto& g : lab.gates) g.status = Status::passed;
    lab.gates[1].status = status;
    if (ratio) lab.gates[1].metrics["ratio"] = {*ratio, "x"};
    lab.gates[1].metrics["candidate_rate"] = {1234.0, "GFLOP/s"};
    apply_rubric(lab);
    return lab;
  };
  auto ok = run(Status::passed, 2.5);
  CHECK(ok.gates[1].status == Status::passed);
  CHECK(ok.gates[1].points == 5);
  CHECK(ok.gates[1].measured == 2.5);
  CHECK(ok.score() == 8);
  CHECK(ok.leaderboard_value == 1234.0);

  // The binary says passed, the figure says otherwise: the grader's re-check wins.
  auto lying = run(Status::passed, 1.2);
  CHECK(lying.gates[1].status == Status::failed);
  CHECK(lying.gates[1].points == 0);
  CHECK_THAT(lying.gates[1].message, ContainsSubstring("below the threshold"));
  CHECK_FALSE(lying.leaderboard_value.has_value());

  auto no_metric = run(Status::passed, std::nullopt);
  CHECK(no_metric.gates[1].status == Status::failed);
  CHECK_THAT(no_metric.gates[1].message, ContainsSubstring("reported no `ratio`"));

  auto failed = run(Status::failed, 1.2);
  CHECK(failed.gates[1].status == Status::failed);
  CHECK(failed.gates[1].measured == 1.2);  // still shown
}

TEST_CASE("a speed gate whose ratio is beyond the rubric's max_ratio fails whatever the binary said", "[rubric]") {
  std::string toml = kRubric;
  const std::string at = "threshold = 2.0";
  REQUIRE(toml.find(at) != std::string::npos);
  toml.replace(toml.find(at), at.size(), at + "\nmax_ratio = 30");
  auto rubric = labkit::parse_rubric(toml, "test.toml");
  auto run = [&](double ratio) {
    LabResult lab = make_lab_result(rubric, "98_x", true);
    for (auto& g : lab.gates) g.status = Status::passed;
    lab.gates[1].metrics["ratio"] = {ratio, "x"};
    apply_rubric(lab);
    return lab.gates[1];
  };
  CHECK(run(29.0).status == Status::passed);
  const GateResult replayed = run(1000.0);  // a step that skipped its work, with the binary's verdict reached into
  CHECK(replayed.status == Status::failed);
  CHECK(replayed.points == 0);
  CHECK_THAT(replayed.message, ContainsSubstring("beyond what the hardware allows"));
}

TEST_CASE("results survive a JSON round trip", "[results]") {
  auto rubric = labkit::parse_rubric(kRubric, "test.toml");
  SubmissionResult r;
  r.student = "alice";
  r.compile_seconds = 1.5;
  LabResult lab = make_lab_result(rubric, "98_x", true);
  lab.gates[0].status = Status::passed;
  lab.gates[1].status = Status::timeout;
  lab.gates[1].message = "killed";
  lab.gates[1].metrics["ratio"] = {1.0, "x"};
  lab.seed = 77;
  lab.notes = {"restarted"};
  apply_rubric(lab);
  r.labs.push_back(lab);
  SubmissionResult back = submission_from_json(nlohmann::json::parse(to_json(r).dump()));
  CHECK(back.student == "alice");
  CHECK(back.score() == r.score());
  CHECK(back.max_score() == r.max_score());
  REQUIRE(back.labs.size() == 1);
  CHECK(back.labs[0].gates[1].status == Status::timeout);
  CHECK(back.labs[0].gates[1].metrics.at("ratio").value == 1.0);
  CHECK(back.labs[0].gates[1].threshold == 2.0);
  CHECK(back.labs[0].seed == 77u);
  CHECK(back.labs[0].notes == std::vector<std::string>{"restarted"});
}

namespace {
const char* kCurveRubric = R"(
lab = "98"
title = "partial credit"
[[gate]]
id = "s.curve"
kind = "speed"
points = 10
metric = "ratio"
threshold = 3.0
floor = 1.0
[[gate]]
id = "s.flat"
kind = "speed"
points = 4
metric = "ratio"
threshold = 3.0
[[gate]]
id = "h"
title = "secret shapes 7919 x 13"
kind = "speed"
points = 1
metric = "ratio"
threshold = 2.0
floor = 1.5
hidden = true
hint = "tile by 13"
)";

// One speed gate of kCurveRubric as the binary reported it.
GateResult scored(const std::string& id, Status status, std::optional<double> ratio) {
  auto rubric = labkit::parse_rubric(kCurveRubric, "curve.toml");
  LabResult lab = make_lab_result(rubric, "98_x", true);
  for (auto& g : lab.gates) {
    g.status = status;
    if (ratio) g.metrics["ratio"] = {*ratio, "x"};
  }
  apply_rubric(lab);
  for (auto& g : lab.gates)
    if (g.id == id) return g;
  FAIL("no gate " << id);
  return {};
}
}  // namespace

TEST_CASE("a speed gate with a floor earns points linearly between floor and threshold", "[rubric]") {
  // Full credit at and above the threshold.
  CHECK(scored("s.curve", Status::passed, 3.0).points == 10);
  CHECK(scored("s.curve", Status::passed, 4.5).points == 10);
  CHECK(scored("s.curve", Status::passed, 4.5).status == Status::passed);
  // Linear in between: (2 - 1) / (3 - 1) of 10 points; the gate is not passed and says why.
  GateResult half = scored("s.curve", Status::passed, 2.0);
  CHECK(half.points == 5);
  CHECK(half.status == Status::failed);
  CHECK_THAT(half.message, ContainsSubstring("partial credit"));
  CHECK(scored("s.curve", Status::passed, 2.5).points == 7.5);
  CHECK(scored("s.curve", Status::passed, 1.0).points == 0);  // at the floor: nothing yet
  // Below the floor, or failed by the binary for any reason (a wrong answer at the timed size): nothing.
  GateResult below = scored("s.curve", Status::passed, 0.8);
  CHECK(below.points == 0);
  CHECK_THAT(below.message, ContainsSubstring("below the floor"));
  CHECK(scored("s.curve", Status::failed, 2.0).points == 0);
  CHECK(scored("s.curve", Status::crashed, 2.0).points == 0);
  CHECK(scored("s.curve", Status::passed, std::nan("")).points == 0);
  CHECK(scored("s.curve", Status::passed, std::nullopt).points == 0);
}

TEST_CASE("a speed gate without a floor stays all or nothing", "[rubric]") {
  CHECK(scored("s.flat", Status::passed, 3.0).points == 4);
  CHECK(scored("s.flat", Status::passed, 2.9).points == 0);
  CHECK(scored("s.flat", Status::passed, 2.9).status == Status::failed);
  CHECK_THAT(scored("s.flat", Status::passed, 2.9).message, ContainsSubstring("below the threshold"));
}

TEST_CASE("the gate binary's rubric: floors become thresholds, hidden gates lose title and hint", "[rubric]") {
  std::string text = gate_rubric_text(kCurveRubric, true);
  auto gate_view = labkit::parse_rubric(text, "gate.toml");  // still a valid rubric
  REQUIRE(gate_view.gates.size() == 3);
  const auto* curve = gate_view.find("s.curve");
  REQUIRE(curve);
  CHECK(curve->threshold == 1.0);  // the binary passes what earns partial credit; apply_rubric applies the curve
  CHECK_FALSE(curve->floor.has_value());
  CHECK(gate_view.find("s.flat")->threshold == 3.0);
  const auto* h = gate_view.find("h");
  REQUIRE(h);
  CHECK(h->threshold == 1.5);  // the gates need the figures
  CHECK(h->points == 1);
  CHECK(h->hidden);
  CHECK(h->hint.empty());
  CHECK_FALSE(contains(text, "7919"));
  CHECK_FALSE(contains(text, "tile by 13"));
  // Without redaction the hidden gate keeps its text.
  CHECK(contains(gate_rubric_text(kCurveRubric, false), "tile by 13"));
}

TEST_CASE("statuses only the grader gives are not taken from the channel; new statuses round-trip", "[channel]") {
  for (const char* forged : {"not_submitted", "refused", "build_failed"}) {
    ChannelParser p;
    p.feed(kRunStart + line(R"({"event":"gate_start","gate":"a"})") +
           line(std::string(R"({"event":"gate_end","gate":"a","status":")") + forged + R"(","seconds":0})"));
    REQUIRE(p.ended().count("a"));
    CHECK(p.ended().at("a").status == Status::failed);
  }
  for (Status s : {Status::not_submitted, Status::refused, Status::build_failed, Status::passed})
    CHECK(status_from_string(to_string(s)) == s);
  CHECK(to_string(Status::not_submitted) == "not_submitted");
  CHECK(to_string(Status::refused) == "refused");
}
