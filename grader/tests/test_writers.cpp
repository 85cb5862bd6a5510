// Console table, Gradescope JSON, JUnit XML, CSV and Markdown: schema and escaping.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <random>
#include <sstream>

#include "util.h"
#include "writers.h"

using namespace labgrade;
using Catch::Matchers::ContainsSubstring;

namespace {

SubmissionResult sample(const std::string& student) {
  SubmissionResult r;
  r.student = student;
  r.compile_seconds = 3.2;
  r.run_seconds = 7.5;
  LabResult lab;
  lab.lab = "01";
  lab.name = "01_matmul";
  lab.title = "Matrix <multiply> & friends";
  lab.leaderboard_gate = "step2.speed";
  lab.leaderboard_metric = "ratio";
  GateResult ok;
  ok.id = "step1.correct";
  ok.kind = "correctness";
  ok.max_points = 10;
  ok.status = Status::passed;
  GateResult slow;
  slow.id = "step2.speed";
  slow.kind = "speed";
  slow.max_points = 5;
  slow.status = Status::passed;
  slow.metric_name = "ratio";
  slow.threshold = 2.0;
  slow.metrics["ratio"] = {1.42, "x"};
  slow.hint = "coalesce";
  GateResult hidden;
  hidden.id = "step3.hidden";
  hidden.kind = "correctness";
  hidden.max_points = 3;
  hidden.hidden = true;
  hidden.status = Status::crashed;
  hidden.message = "died: \"bad\" <access> & \x01 more\nline 2";
  GateResult skip;
  skip.id = "step4.correct";
  skip.kind = "correctness";
  skip.max_points = 2;
  skip.status = Status::skipped;
  skip.message = "no CUDA device";
  lab.gates = {ok, slow, hidden, skip};
  apply_rubric(lab);
  r.labs.push_back(lab);
  return r;
}

}  // namespace

TEST_CASE("Gradescope results.json follows the autograder schema", "[writers]") {
  auto j = gradescope_json(sample("alice"));
  CHECK(j["score"] == 10.0);
  CHECK(j["max_score"] == 20.0);
  CHECK(j["output"].is_string());
  REQUIRE(j["tests"].size() == 4);
  for (const auto& t : j["tests"]) {
    CHECK(t.contains("name"));
    CHECK(t.contains("score"));
    CHECK(t.contains("max_score"));
    CHECK((t["status"] == "passed" || t["status"] == "failed"));
    CHECK((t["visibility"] == "visible" || t["visibility"] == "after_due_date"));
  }
  CHECK(j["tests"][1]["status"] == "failed");  // the re-check failed it
  CHECK_THAT(j["tests"][1]["output"].get<std::string>(), ContainsSubstring("ratio 1.42 < 2"));
  CHECK(j["tests"][2]["visibility"] == "after_due_date");
  CHECK_FALSE(j.contains("leaderboard"));  // the leaderboard gate failed: no figure
}

TEST_CASE("JUnit XML escapes everything and classifies outcomes", "[writers]") {
  std::string xml = junit_xml({sample("alice"), sample("bob & co")});
  CHECK_THAT(xml,
             ContainsSubstring("<testsuites name=\"labgrade\" tests=\"8\" failures=\"2\" errors=\"2\" skipped=\"2\">"));
  CHECK_THAT(xml, ContainsSubstring("testsuite name=\"bob &amp; co/lab01\""));
  CHECK_THAT(xml, ContainsSubstring("&quot;bad&quot; &lt;access&gt; &amp;"));
  CHECK(xml.find('\x01') == std::string::npos);
  CHECK(xml.find("<access>") == std::string::npos);
}

TEST_CASE("the CSV gradebook quotes and defuses its cells", "[writers]") {
  CHECK(csv_field("plain", true) == "plain");
  CHECK(csv_field("a,b", true) == "\"a,b\"");
  CHECK(csv_field("say \"hi\"", true) == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("=HYPERLINK(1)", true) == "'=HYPERLINK(1)");
  CHECK(csv_field("-1.5", false) == "-1.5");
  std::string csv = gradebook_csv({sample("=cmd")});
  CHECK(csv.rfind("student,lab,gate,status,points,max_points,metric,value,threshold,isolation\n", 0) == 0);
  CHECK_THAT(csv, ContainsSubstring("'=cmd,01,step2.speed,failed,0,5,ratio,1.42,2,\n"));
  CHECK_THAT(csv, ContainsSubstring("'=cmd,01,step1.correct,passed,10,10,,,,\n"));
}

TEST_CASE("the console table shows figures and diagnoses", "[writers]") {
  std::ostringstream os;
  print_table(os, sample("alice"), false);
  std::string out = os.str();
  CHECK_THAT(out, ContainsSubstring("step2.speed"));
  CHECK_THAT(out, ContainsSubstring("ratio 1.42 < 2"));
  CHECK_THAT(out, ContainsSubstring("hint: coalesce"));
  CHECK_THAT(out, ContainsSubstring("        died:"));  // indented under the gate
  CHECK_THAT(out, ContainsSubstring("total 10/20"));
  CHECK_THAT(out, ContainsSubstring("compile 3.2 s"));
}

TEST_CASE("the Markdown report has a summary and per-student tables", "[writers]") {
  std::string md = markdown_report({sample("alice"), sample("bob|x")}, "Class");
  CHECK_THAT(md, ContainsSubstring("# Class"));
  CHECK_THAT(md, ContainsSubstring("| alice | 10/20 | 10/20 |"));
  CHECK_THAT(md, ContainsSubstring("bob\\|x"));
  CHECK_THAT(md, ContainsSubstring("| `step2.speed` | failed | 0/5 | ratio 1.42 &lt; 2 |"));  // HTML as entities
  CHECK_THAT(md, ContainsSubstring("Pass rate per gate"));
}

TEST_CASE("the class report lists passed speed figures well above the reference, most above first", "[writers]") {
  auto with_ratio = [](const std::string& student, double ratio, double threshold) {
    SubmissionResult r = sample(student);
    GateResult& g = r.labs[0].gates[1];
    g.threshold = threshold;
    g.reference = 1.0;
    g.metrics["ratio"] = {ratio, "x"};
    g.status = Status::passed;  // as the gate binary reported it; apply_rubric re-checks the figure
    g.message.clear();
    apply_rubric(r.labs[0]);
    return r;
  };
  const std::string md = markdown_report({with_ratio("near", 1.1, 0.8), with_ratio("far", 1.6, 0.8),
                                          with_ratio("farther", 2.5, 0.8), with_ratio("failed", 1.5, 2.0)},
                                         "Class");
  CHECK_THAT(md, ContainsSubstring("### Speed well above the reference solution"));
  CHECK_THAT(md, ContainsSubstring("| farther | lab01 step2.speed | 2.5 | 1 | 2.50 |\n"
                                   "| far | lab01 step2.speed | 1.6 | 1 | 1.60 |"));
  CHECK_FALSE(contains(md, "| near | lab01 step2.speed"));    // within the margin: the reference's own spread
  CHECK_FALSE(contains(md, "| failed | lab01 step2.speed"));  // a failed gate is in the tables already
  // A student whose speed gates shared the GPU with another process (the batch's note) heads the review.
  SubmissionResult shared = with_ratio("shared", 0.9, 0.8);
  shared.labs[0].notes.push_back(std::string(kSharedGpuNote) + "other processes computed on this student's GPU when "
                                 "its speed gates were timed (before the speed gates: pid 4242 (python3) on GPU 0)");
  const std::string with_shared = markdown_report({with_ratio("a", 1.0, 0.8), shared}, "Class");
  CHECK_THAT(with_shared, ContainsSubstring("### Speed gates timed beside other GPU processes"));
  CHECK_THAT(with_shared, ContainsSubstring("| shared | other processes computed on this student's GPU"));
  CHECK_THAT(with_shared, ContainsSubstring("pid 4242 (python3) on GPU 0"));
  CHECK_FALSE(contains(markdown_report({with_ratio("a", 1.0, 0.8)}, "Class"), "beside other GPU processes"));
  // A file whose object holds system-call bytes inside another instruction (the object check's note): listed to read.
  SubmissionResult hidden = with_ratio("hides", 0.9, 0.8);
  hidden.labs[0].notes.push_back(std::string(kObjectReviewNote) +
                                 "student/step5f_tuned.cu, lab01::hidden(long): holds the bytes of a system-call "
                                 "instruction (syscall) inside another instruction, 6 bytes in");
  const std::string with_hidden = markdown_report({with_ratio("a", 1.0, 0.8), hidden}, "Class");
  CHECK_THAT(with_hidden, ContainsSubstring("### Object code to read"));
  CHECK_THAT(with_hidden, ContainsSubstring("| hides | lab01, student/step5f_tuned.cu, lab01::hidden(long): holds"));
  CHECK_FALSE(contains(markdown_report({with_ratio("a", 1.0, 0.8)}, "Class"), "Object code to read"));
  // Nobody above: one line that says so.
  CHECK_THAT(markdown_report({with_ratio("a", 1.0, 0.8), with_ratio("b", 0.9, 0.8)}, "Class"),
             ContainsSubstring("No passed speed gate measured 15 % or more above the rubric's reference."));
}

TEST_CASE("the class report lists speed gates that lost points on unsteady timing", "[writers]") {
  auto speed = [](const std::string& student, double ratio, bool stalled) {
    SubmissionResult r = sample(student);
    GateResult& g = r.labs[0].gates[1];
    g.threshold = 0.85;
    g.reference = 1.02;
    g.metrics["ratio"] = {ratio, "x"};
    if (stalled) g.metrics["stalled"] = {1, ""};
    g.status = ratio >= 0.85 ? Status::passed : Status::failed;
    apply_rubric(r.labs[0]);
    return r;
  };
  // Lab 07 step 4's reference beside another worker: 0.42 with its calls stalled by the driver.
  const std::string md = markdown_report({speed("stalled", 0.42, true), speed("slow", 0.5, false),
                                          speed("passed anyway", 1.0, true)},
                                         "Class");
  CHECK_THAT(md, ContainsSubstring("### Speed gates that lost points on unsteady timing"));
  CHECK_THAT(md, ContainsSubstring("| stalled | lab01 step2.speed, ratio 0.42 |"));
  CHECK_FALSE(contains(md, "| slow | lab01 step2.speed"));           // slow on steady timing: its own verdict
  CHECK_FALSE(contains(md, "| passed anyway | lab01 step2.speed"));  // full points: nothing to redo
  CHECK_FALSE(contains(markdown_report({speed("slow", 0.5, false)}, "Class"), "unsteady timing"));
}

TEST_CASE("the class report lists speed gates timed again on a quiet machine, the hidden ones' too", "[writers]") {
  SubmissionResult r = sample("retimed");
  r.labs[0].notes.push_back(std::string(kRetimedNote) +
                            "step2.speed: its first timing was unsteady (ratio 0.4189, `stalled`); timed again with "
                            "the machine quiet (no other gate process on any GPU): ratio 1.02, which decides");
  r.labs[0].notes.push_back(std::string(kHiddenRunNote) + kRetimedNote + "hidden.speed: its first timing was unsteady");
  const std::string md = markdown_report({r, sample("quiet")}, "Class");
  CHECK_THAT(md, ContainsSubstring("### Speed gates timed again on a quiet machine"));
  CHECK_THAT(md, ContainsSubstring("| retimed | lab01 step2.speed: its first timing was unsteady (ratio 0.4189"));
  CHECK_THAT(md, ContainsSubstring("| retimed | lab01 hidden.speed: its first timing was unsteady |"));
  CHECK_FALSE(contains(md, "| quiet | lab01"));
  CHECK_FALSE(contains(markdown_report({sample("quiet")}, "Class"), "timed again on a quiet machine"));
}

TEST_CASE("the class report lists gates whose recorded calls ran far slower than the counted ones", "[writers]") {
  auto with_recorded = [](const std::string& student, double factor, bool passed = true, double counted_ms = 0) {
    SubmissionResult r = sample(student);
    GateResult& g = r.labs[0].gates[1];
    g.threshold = 0.8;
    g.reference = 1.0;
    g.metrics["ratio"] = {passed ? 0.9 : 0.5, "x"};
    g.metrics["recorded_over_counted"] = {factor, "x"};
    if (counted_ms > 0) g.metrics["candidate_ms"] = {counted_ms, "ms"};
    g.status = Status::passed;
    g.message.clear();
    apply_rubric(r.labs[0]);
    return r;
  };
  const std::string md = markdown_report({with_recorded("healthy", 1.05), with_recorded("swapped", 1.8),
                                          with_recorded("swapped_more", 3.2), with_recorded("edge", 1.3),
                                          with_recorded("failed", 2.0, false)},
                                         "Class");
  CHECK_THAT(md, ContainsSubstring("### Recorded calls slower than the counted ones"));
  CHECK_THAT(md, ContainsSubstring("| swapped_more | lab01 step2.speed | 3.20 |\n"
                                   "| swapped | lab01 step2.speed | 1.80 |\n"
                                   "| edge | lab01 step2.speed | 1.30 |"));
  CHECK_FALSE(contains(md, "| healthy | lab01 step2.speed | 1.05"));  // the recorder's own cost
  CHECK_FALSE(contains(md, "| failed | lab01 step2.speed"));          // lost its points already
  // With the counted median known, a recorded call must also be 25 us slower: a healthy 45 us call that the recorder
  // slowed 1.28x (lab 07 step 1 on an H200) is not listed; the same call 1.9x slower is (cutoff 1.3 + 0.025 / 0.045).
  const std::string short_calls =
      markdown_report({with_recorded("short_healthy", 1.28, true, 0.045),
                       with_recorded("short_swapped", 1.9, true, 0.045),
                       with_recorded("long_swapped", 1.32, true, 3.6)},
                      "Class");
  CHECK_FALSE(contains(short_calls, "| short_healthy | lab01 step2.speed"));
  CHECK_THAT(short_calls, ContainsSubstring("| short_swapped | lab01 step2.speed | 1.90 |"));
  CHECK_THAT(short_calls, ContainsSubstring("| long_swapped | lab01 step2.speed | 1.32 |"));
  CHECK(recorded_review_cutoff(0) == kReviewRecordedSlower);
  CHECK(recorded_review_cutoff(0.05) == Catch::Approx(1.8));
  // Every recorded call near its median: one line that says so; no gate with the metric: no section.
  CHECK_THAT(markdown_report({with_recorded("a", 1.0), with_recorded("b", 1.1)}, "Class"),
             ContainsSubstring("No passed speed gate's recorded calls ran 30 % and 25 us or more slower than "
                               "its counted calls."));
  CHECK_FALSE(contains(markdown_report({sample("plain")}, "Class"), "Recorded calls slower"));
}

TEST_CASE("student-visible output carries nothing of a hidden gate but its id, status and points", "[writers]") {
  SubmissionResult r = sample("alice");
  LabResult& lab = r.labs[0];
  GateResult& h = lab.gates[2];
  h.title = "shapes 7919 x 13";
  h.hint = "tile by 13";
  h.message = "wrong at n = 7919\n--- last lines of its console output ---\nsecret 7919";
  h.sanitizer = "out of bounds at 7919";
  h.metrics["ratio"] = {7919, "x"};
  lab.notes = {"restarted the gate binary after signal 11 in step1.correct",
               std::string(kHiddenRunNote) + "result channel: gate_start `7919` while `step3.hidden` was running"};
  auto j = gradescope_json(r);
  std::string text = j.dump();
  CHECK_FALSE(contains(text, "7919"));
  CHECK_FALSE(contains(text, "tile by 13"));
  CHECK_THAT(text, ContainsSubstring("step3.hidden"));                      // the gate is listed...
  CHECK(j["tests"][2]["visibility"] == "after_due_date");                   // ...for later
  CHECK_THAT(j["output"].get<std::string>(), ContainsSubstring("signal 11"));  // visible notes stay
  // The instructor's outputs keep everything.
  CHECK_THAT(junit_xml({r}), ContainsSubstring("wrong at n = 7919"));
  CHECK_THAT(markdown_report({r}, "Class"), ContainsSubstring("wrong at n = 7919"));
  CHECK_THAT(to_json(r).dump(), ContainsSubstring("tile by 13"));
  std::ostringstream os;
  print_table(os, r, false);
  CHECK_THAT(os.str(), ContainsSubstring("wrong at n = 7919"));
}

TEST_CASE("every report states the isolation the submission ran under", "[writers]") {
  SubmissionResult r = sample("alice");
  r.isolation = "uid-only";
  CHECK_THAT(gradescope_json(r)["output"].get<std::string>(), ContainsSubstring("Isolation: uid-only"));
  CHECK_THAT(to_json(r).dump(), ContainsSubstring("\"isolation\":\"uid-only\""));
  CHECK_THAT(gradebook_csv({r}), ContainsSubstring("alice,01,step1.correct,passed,10,10,,,,uid-only\n"));
  CHECK_THAT(junit_xml({r}), ContainsSubstring("<property name=\"isolation\" value=\"uid-only\"/>"));
  std::string md = markdown_report({r, sample("bob")}, "Class");
  CHECK_THAT(md, ContainsSubstring("Isolation: uid-only"));
  CHECK_THAT(md, ContainsSubstring("(1 students)"));
  std::ostringstream os;
  print_table(os, r, false);
  CHECK_THAT(os.str(), ContainsSubstring("isolation: uid-only"));
}

TEST_CASE("not submitted and refused labs are their own statuses in every writer", "[writers]") {
  SubmissionResult r = sample("alice");
  set_all(r.labs[0], Status::not_submitted, "not submitted: the submission has no labs/01_matmul/student/matmul.cu");
  apply_rubric(r.labs[0]);
  CHECK(r.score() == 0);
  CHECK_THAT(gradebook_csv({r}), ContainsSubstring("alice,01,step1.correct,not_submitted,0,10"));
  CHECK_THAT(junit_xml({r}), ContainsSubstring("type=\"not_submitted\""));
  CHECK_THAT(markdown_report({r}, "Class"), ContainsSubstring("| not_submitted |"));
  CHECK_THAT(gradescope_json(r)["tests"][0]["output"].get<std::string>(), ContainsSubstring("status: not_submitted"));
  std::ostringstream os;
  print_table(os, r, false);
  CHECK_THAT(os.str(), ContainsSubstring("not_submitted"));
  CHECK_THAT(os.str(), ContainsSubstring("not submitted: the submission has no"));

  set_all(r.labs[0], Status::refused, "refused: student/matmul.cu defines or uses symbols...");
  apply_rubric(r.labs[0]);
  CHECK(r.score() == 0);
  CHECK_THAT(gradebook_csv({r}), ContainsSubstring("alice,01,step1.correct,refused,0,10"));
  CHECK_THAT(junit_xml({r}), ContainsSubstring("<error type=\"refused\""));
}

// ---- student text that is not clean: invalid UTF-8, controls, Markdown and HTML, terminal escapes -------------

namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

// True when `inside` is in the code block of the student's step3.hidden, before any line that would close it.
bool inside_fence(const std::string& md, const std::string& student, const std::string& inside) {
  const auto lines = split_lines(md);
  std::size_t k = 0;
  while (k < lines.size() && !starts_with(lines[k], "## " + student)) ++k;
  while (k < lines.size() && !starts_with(lines[k], "- **step3.hidden**")) ++k;
  if (k + 2 >= lines.size()) return false;
  const std::string fence = trim(lines[k + 2]);  // "- **id** (status)", "", "  ```"
  if (fence.size() < 3 || fence.find_first_not_of(fence[0]) != std::string::npos) return false;
  for (std::size_t i = k + 3; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    // CommonMark: a line of the fence's character, at least as long, closes the block.
    if (t.size() >= fence.size() && t.find_first_not_of(fence[0]) == std::string::npos) return false;
    if (contains(lines[i], inside)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("sanitize_utf8 keeps strictly valid UTF-8 only, so JSON accepts whatever a student printed", "[writers]") {
  CHECK(sanitize_utf8("plain é € \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\ttab\nline") ==
        "plain é € \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\ttab\nline");           // up to U+10FFFF
  CHECK(sanitize_utf8("a\xC0\x80z") == "a" + kFFFD + kFFFD + "z");                // overlong
  CHECK(sanitize_utf8("\xE0\x80\xAF") == kFFFD + kFFFD + kFFFD);                 // overlong
  CHECK(sanitize_utf8("\xF0\x80\x80\xAF") == kFFFD + kFFFD + kFFFD + kFFFD);     // overlong
  CHECK(sanitize_utf8("\xED\xA0\x80") == kFFFD + kFFFD + kFFFD);                 // UTF-16 surrogate
  CHECK(sanitize_utf8("\xF4\x90\x80\x80") == kFFFD + kFFFD + kFFFD + kFFFD);     // above U+10FFFF
  CHECK(sanitize_utf8("\xF5\xFF") == kFFFD + kFFFD);
  CHECK(sanitize_utf8("cut \xC3") == "cut " + kFFFD);                             // truncated
  CHECK(sanitize_utf8("cut \xE2\x82 x") == "cut " + kFFFD + kFFFD + " x");
  CHECK(sanitize_utf8("esc\x1b[2J del\x7F c1\xC2\x9B cr\r") ==
        "esc" + kFFFD + "[2J del" + kFFFD + " c1" + kFFFD + " cr");  // controls, also C1's CSI; \r dropped
  // Whatever the bytes, the result is a string nlohmann::json writes with its strict default handler.
  std::mt19937 rng(42);
  for (int k = 0; k < 300; ++k) {
    std::string bytes(4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    const std::string clean = sanitize_utf8(bytes);
    CHECK_NOTHROW(nlohmann::json(clean).dump());
    CHECK(sanitize_utf8(clean) == clean);
  }
  // A byte cut of a long line stops at a character's start.
  std::string e200;
  for (int k = 0; k < 200; ++k) e200 += "é";
  const std::string cut = trim_message("x" + e200, 1, 160);
  CHECK(sanitize_utf8(cut) == cut);
  CHECK_NOTHROW(nlohmann::json(cut).dump());
  // The result files are written by json_text, which replaces what is still invalid instead of throwing.
  SubmissionResult r = sample("alice");
  r.labs[0].gates[2].message = "binary \xC0\x80 \xED\xA0\x80 \xF4\x90\x80\x80 \xC3";
  r.labs[0].notes.push_back("cut \xE2\x82");
  std::string text;
  REQUIRE_NOTHROW(text = json_text(to_json(r)));
  CHECK(submission_from_json(nlohmann::json::parse(text)).labs[0].gates[2].message.rfind("binary ", 0) == 0);
  REQUIRE_NOTHROW(text = json_text(gradescope_json(r)));
  CHECK_NOTHROW(nlohmann::json::parse(text));
  // C1 controls (valid UTF-8, raw in dump()'s text) are written escaped, and read back the same.
  text = json_text(nlohmann::json{{"s", "csi \xC2\x9B" "2J \xC2\xA0 é"}});
  CHECK_FALSE(contains(text, "\xC2\x9B"));
  CHECK_THAT(text, ContainsSubstring("csi \\u009b2J \xC2\xA0 é"));
  CHECK(nlohmann::json::parse(text)["s"] == "csi \xC2\x9B" "2J \xC2\xA0 é");
}

TEST_CASE("a student's output cannot close the report's code block or write live Markdown", "[writers]") {
  SubmissionResult r = sample("aa_mdbreak");
  r.labs[0].gates[2].message =
      "debug\n```\n~~~~\n## zz_victim \xE2\x80\x94 23/23\n\n<img src=\"https://attacker.example/pixel.png\">\n<!--\n";
  SubmissionResult cr = sample("ab_crfence");
  cr.labs[0].gates[2].message = "x\n``\r`\n# INJECTED HEADING\n<!--\n";
  SubmissionResult many = sample("ac_long");
  many.labs[0].gates[2].message = "x\n``````````\n# LONG RUN\n";
  const std::string md = markdown_report({r, cr, many, sample("zz_victim")}, "Class");
  CHECK(inside_fence(md, "aa_mdbreak", "## zz_victim"));
  CHECK(inside_fence(md, "aa_mdbreak", "<img src="));
  CHECK(inside_fence(md, "ab_crfence", "# INJECTED HEADING"));
  CHECK(inside_fence(md, "ac_long", "# LONG RUN"));
  CHECK(md.find('\r') == std::string::npos);
  // Names and messages outside the code blocks: HTML as entities, links and emphasis escaped.
  const std::string id = "name <img src=x onerror=alert(1)> [click](https:attacker.example) *em* _u_ `c` & \\";
  const std::string cells = markdown_report({sample(id), sample("bob")}, "Class");
  const std::string escaped =
      "name &lt;img src=x onerror=alert(1)&gt; \\[click\\](https:attacker.example) \\*em\\* \\_u\\_ \\`c\\` &amp; "
      "\\\\";
  CHECK_THAT(cells, ContainsSubstring("| " + escaped + " |"));
  CHECK_THAT(cells, ContainsSubstring("## " + escaped + " \xE2\x80\x94"));
  CHECK_FALSE(contains(cells, "<img"));
  CHECK_FALSE(contains(cells, "[click]"));
  // Bare URLs, which GitHub's renderer would turn into links, stay text.
  const std::string urls =
      markdown_report({sample("see http://evil.example/x, WWW.evil.example and www.b.example"), sample("bob")}, "C");
  CHECK_THAT(urls, ContainsSubstring("see http:&#8203;//evil.example/x, WWW&#8203;.evil.example and www&#8203;.b"));
  CHECK_FALSE(contains(urls, "http://evil"));
  CHECK_FALSE(contains(urls, "www.b.example"));
  CHECK_THAT(markdown_report({sample("awww.example"), sample("bob")}, "C"), ContainsSubstring("awww.example"));
  // Names with controls: nothing of them reaches the file raw.
  const std::string ctl = markdown_report({sample("\x1b[2Jesc\xC2\x9B"), sample("bob")}, "Class");
  CHECK(ctl.find('\x1b') == std::string::npos);
  CHECK_FALSE(contains(ctl, "\xC2\x9B"));
  // The batch's list of what it did not grade comes first.
  CHECK_THAT(markdown_report({sample("a"), sample("b")}, "Class", {"not a submission folder: carol.zip (a file)"}),
             ContainsSubstring("## Not graded\n\nEntries of the submissions folder"));
}

TEST_CASE("JUnit XML holds only characters XML 1.0 allows", "[writers]") {
  SubmissionResult r = sample("ad_xmlnonchar\xC2\x9B");
  r.labs[0].gates[2].message = "bad xml char: \xEF\xBF\xBF \xEF\xBF\xBE end \xED\xA0\x80 \xC2\x9B \x1b \x0b";
  const std::string xml = junit_xml({r});
  CHECK_THAT(xml, ContainsSubstring("bad xml char: " + kFFFD + " " + kFFFD + " end"));
  for (const char* bad : {"\xEF\xBF\xBF", "\xEF\xBF\xBE", "\xED\xA0\x80", "\xC2\x9B", "\x1b", "\x0b"})
    CHECK_FALSE(contains(xml, bad));
}

TEST_CASE("the CSV formula guard also covers a leading tab or carriage return", "[writers]") {
  CHECK(csv_field("\t=1+2", true) == "'\t=1+2");
  CHECK(csv_field("\r=1+2", true) == "'=1+2");  // the \r is dropped, the guard stays
  CHECK(csv_field("\t=1+2", false) == "\t=1+2");
}

TEST_CASE("student text reaches the console without its escape sequences", "[writers]") {
  CHECK(printable("a\x1b[31m\xC2\x9B\xE9\x07\n\tb") == "a\\x1b[31m\\xc2\\x9b\\xe9\\x07\\x0a\\x09b");
  CHECK(printable("x\ny\tz\x1b", true) == "x\ny\tz\\x1b");
  CHECK(printable("é € ok") == "é € ok");
  SubmissionResult r = sample("\x1b[2J\x1b[1;1Hesc_name");
  r.error = "";
  r.labs[0].gates[2].message = "\x1b]0;pwned-title\x07\x1b[2J\x1b[H\x1b[32mALL GATES PASSED\x1b[0m \xC2\x9B" "31m";
  r.labs[0].notes.push_back("note \x1b[2J");
  r.labs[0].sanitizer.push_back({"memcheck", 1, "excerpt \x1b[2J"});
  std::ostringstream os;
  print_table(os, r, false);
  const std::string out = os.str();
  CHECK(out.find('\x1b') == std::string::npos);
  CHECK(out.find('\x07') == std::string::npos);
  CHECK_FALSE(contains(out, "\xC2\x9B"));
  CHECK_THAT(out, ContainsSubstring("student \\x1b[2J\\x1b[1;1Hesc_name"));
  CHECK_THAT(out, ContainsSubstring("\\x1b[32mALL GATES PASSED"));
}

TEST_CASE("the class report lists the passed gates that left a case out for want of device memory", "[writers]") {
  SubmissionResult r = sample("alice");
  GateResult& g = r.labs[0].gates[0];
  REQUIRE(g.status == Status::passed);
  CHECK_FALSE(contains(markdown_report({r}, "Class"), "Cases left out for want of device memory"));
  g.metrics["huge_case_left_out"] = {1, "cases"};
  const std::string md = markdown_report({r}, "Class");
  CHECK_THAT(md, ContainsSubstring("Cases left out for want of device memory"));
  CHECK_THAT(md, ContainsSubstring("| alice | lab" + r.labs[0].lab + " " + g.id + " |"));
}

TEST_CASE("a leaderboard taken from a hidden gate's figure is not in the student's results", "[writers]") {
  SubmissionResult r = sample("alice");
  LabResult& lab = r.labs[0];
  lab.leaderboard_gate = lab.gates[2].id;
  lab.leaderboard_metric = "ratio";
  lab.leaderboard_value = 7.919;
  REQUIRE(lab.gates[2].hidden);
  CHECK_FALSE(gradescope_json(r).contains("leaderboard"));
  lab.gates[2].hidden = false;
  CHECK(gradescope_json(r)["leaderboard"][0]["value"] == 7.919);
}
