// Everything labgrade writes for people and other programs: the console table, Gradescope results.json, JUnit
// XML, the CSV gradebook and the Markdown report. All of them take the same SubmissionResult records.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "scoring.h"

namespace labgrade {

// The table: lab, gate, status, points/max, measured figure vs threshold, and under each failure its diagnosis.
void print_table(std::ostream& out, const SubmissionResult& r, bool color);

// Gradescope's autograder schema: score, max_score, output, tests[], leaderboard[]. Hidden gates get
// visibility "after_due_date". Students read it, so it is written from student_view(r).
nlohmann::json gradescope_json(const SubmissionResult& r);

// What a student may read: hidden gates keep their id, status and points but lose their title, message, hint,
// sanitizer findings and measured figures (all of which can carry the hidden inputs, or text the submission
// printed while it had them), and the notes about the hidden gates' run (kHiddenRunNote) are left out.
// Instructor outputs (result.json, JUnit, CSV, Markdown, the console) keep everything.
SubmissionResult student_view(const SubmissionResult& r);

// One testsuite per (student,) lab, one testcase per gate; failure / error / skipped elements carry the diagnosis.
std::string junit_xml(const std::vector<SubmissionResult>& results);

// One row per student per gate: student,lab,gate,status,points,max_points,metric,value,threshold,isolation.
std::string gradebook_csv(const std::vector<SubmissionResult>& results);

// not_graded: what a batch found in the submissions folder and did not grade (a loose file, a dot folder, a folder
// name it refused), one line each, listed first.
std::string markdown_report(const std::vector<SubmissionResult>& results, const std::string& title,
                            const std::vector<std::string>& not_graded = {});

// The class report's list of passed speed gates whose figure is kReviewAboveReference times the rubric's reference
// or more (the reference solution measures within a few per cent of it on the GPU the rubric names), most above
// first: not a verdict, a list of what an instructor may want to re-run or read. Part of markdown_report's summary.
inline constexpr double kReviewAboveReference = 1.15;
// Then the passed speed gates whose recorded calls (the metric recorded_over_counted: the faster of a gate's two
// recorded calls over the counted median, candidate_ms) ran kReviewRecordedSlower times the counted median plus
// kReviewRecordedAllowanceMs or slower. A step that ran a library only on the calls it believed unwatched is slower
// on the watched ones by what the library gained it. The recorder costs a healthy step's recorded call a few
// microseconds to tens of them, which is a large part of the shortest calls: the reference's 14 such gates lost
// 6-41 us, up to 1.22x of lab 07 step 1's 45-100 us call on H100s and 1.28x on H200s (2026-11-27, -28), where a
// cutoff of 1.3 alone left it a margin of 1.5 %. With the allowance, a recorded call must be slower by 30 % and
// 25 us (lab 07 step 1 on the H200: 1.85x; lab 05 step 5b's 0.22 ms call, 41 us slower when healthy: 1.41x).
inline constexpr double kReviewRecordedSlower = 1.3;
inline constexpr double kReviewRecordedAllowanceMs = 0.025;
// The recorded-over-counted figure from which a gate is listed: kReviewRecordedSlower, plus the allowance over the
// counted median where the gate reported it (candidate_ms > 0).
double recorded_review_cutoff(double counted_ms);
std::string speed_review(const std::vector<SubmissionResult>& results);

// The text of a JSON file (indented, ending in a newline). A string that is not valid UTF-8 has its bad bytes
// replaced with U+FFFD instead of making dump() throw: a student's binary output must not cost them their result.
std::string json_text(const nlohmann::json& j);

// Escaping, exposed for the tests.
std::string xml_escape(const std::string& s);
std::string csv_field(const std::string& s, bool text);  // text fields are also guarded against spreadsheet formulas

}  // namespace labgrade
