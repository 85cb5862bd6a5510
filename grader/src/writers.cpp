#include "writers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include "util.h"

namespace labgrade {

namespace {

std::string num(double v) { return fmt::format("{:.4g}", v); }
std::string points(double v) { return format_points(v); }

// "ratio 1.42 < 2 (reference 6.1)"
std::string measured_text(const GateResult& g) {
  if (!g.threshold || g.metric_name.empty()) return "";
  std::string ref = g.reference ? " (reference " + num(*g.reference) + ")" : "";
  if (!g.measured) return "needs " + g.metric_name + " >= " + num(*g.threshold) + ref;
  bool ok = *g.measured >= *g.threshold;
  return g.metric_name + " " + num(*g.measured) + (ok ? " >= " : " < ") + num(*g.threshold) + ref;
}

std::string gate_details(const GateResult& g, bool with_hint) {
  std::string out;
  if (!g.message.empty()) out += g.message;
  // Hints help with a wrong or slow answer, not with a skipped or unimplemented step.
  bool helps = g.status == Status::failed || g.status == Status::timeout || g.status == Status::crashed;
  if (with_hint && helps && !g.hint.empty() && !contains(g.message, g.hint))
    out += (out.empty() ? "" : "\n") + std::string("hint: ") + g.hint;
  if (!g.sanitizer.empty()) out += (out.empty() ? "" : "\n") + std::string("compute-sanitizer: ") + g.sanitizer;
  return out;
}

const char* color_of(Status s) {
  switch (s) {
    case Status::passed:
      return "\033[32m";
    case Status::skipped:
      return "\033[33m";
    case Status::not_implemented:
      return "\033[36m";
    default:
      return "\033[31m";
  }
}

std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  for (const auto& l : split_lines(text)) out += pad + l + "\n";
  return out;
}

// indent() for the console: student text (a gate's message, a crash's what()) through printable(), so that its
// escape sequences do not reach the terminal.
std::string indent_printable(const std::string& text, const std::string& pad) {
  std::string out;
  for (const auto& l : split_lines(text)) out += pad + printable(l, true) + "\n";
  return out;
}

// The entity of a markup character, or nullptr: & < > always, and the quotes where XML attribute values need them.
const char* markup_entity(char c, bool quotes) {
  switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return quotes ? "&quot;" : nullptr;
    case '\'': return quotes ? "&apos;" : nullptr;
    default: return nullptr;
  }
}

// A Markdown table cell, heading or list line of text a student may control (a folder name, a message): valid
// UTF-8 without control characters, HTML's < > & as entities and Markdown's \ ` * _ [ ] escaped, so that it stays
// text (no live HTML, image, link or emphasis); | escaped so it stays one cell; line breaks as <br>. GitHub's
// renderer also turns bare "scheme://..." and "www...." into links: a zero-width space (an entity) after the
// scheme's colon and after "www" keeps them text, so a message printed by the student's code cannot put a link to
// click in the instructor's report.
std::string md_cell(const std::string& raw) {
  const std::string s = sanitize_utf8(raw);
  std::string out;
  const auto alnum = [&](std::size_t i) { return i < s.size() && std::isalnum(static_cast<unsigned char>(s[i])); };
  const auto www_at = [&](std::size_t i) {
    if (i + 4 > s.size() || (i > 0 && alnum(i - 1))) return false;
    for (std::size_t k = 0; k < 3; ++k)
      if (std::tolower(static_cast<unsigned char>(s[i + k])) != 'w') return false;
    return s[i + 3] == '.';
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ':' && s.compare(i + 1, 2, "//") == 0) {
      out += ":&#8203;";
      continue;
    }
    if (www_at(i)) {
      out += s.substr(i, 3) + "&#8203;";
      i += 2;
      continue;
    }
    // An underscore inside a word never starts or ends emphasis: "smith_john" stays as it is.
    if (c == '_' && i > 0 && alnum(i - 1) && alnum(i + 1)) {
      out += c;
      continue;
    }
    if (const char* entity = markup_entity(c, false)) {
      out += entity;
      continue;
    }
    switch (c) {
      case '\n':
        out += "<br>";
        break;
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '|':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The fence of a code block that holds `text`: backticks, more of them than the longest run of backticks or tildes
// in it (at least 3), so that no line of the text can close the block and turn the rest into live Markdown.
std::string code_fence(const std::string& text) {
  std::size_t longest = 0, run = 0;
  char prev = 0;
  for (char c : text) {
    run = (c == '`' || c == '~') ? (c == prev ? run + 1 : 1) : 0;
    prev = c;
    longest = std::max(longest, run);
  }
  return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

std::string suite_name(const SubmissionResult& r, const LabResult& l) {
  return (r.student.empty() ? "" : r.student + "/") + "lab" + l.lab;
}

std::string isolation_text(const std::string& isolation) {
  if (isolation == "bwrap")
    return "bwrap (bubblewrap: read-only system, solutions and hidden gates masked, no network)";
  if (isolation == "uid-only")
    return "uid-only (no bubblewrap: a dedicated uid and no network; solutions/ and the hidden gates were readable)";
  if (isolation == "none") return "none (the submission ran as the grader's user, unisolated)";
  if (isolation == "local") return "local (your own tree, run as you)";
  return isolation.empty() ? "unknown (a result from a labgrade that did not record it)" : isolation;
}

// A submission's name in the class outputs: a local run has none.
std::string student_name(const SubmissionResult& r) { return r.student.empty() ? "local" : r.student; }

}  // namespace

SubmissionResult student_view(const SubmissionResult& r) {
  SubmissionResult v = r;
  for (auto& l : v.labs) {
    for (auto& g : l.gates) {
      if (!g.hidden) continue;
      g.title.clear();
      g.hint.clear();
      g.sanitizer.clear();
      g.metrics.clear();
      g.measured.reset();
      g.message = g.status == Status::passed ? "" : "(a hidden gate: its diagnosis is in the instructor's report)";
    }
    std::vector<std::string> notes;
    for (auto& n : l.notes)
      if (!starts_with(n, kHiddenRunNote)) notes.push_back(n);
    l.notes = std::move(notes);
    // A leaderboard taken from a hidden gate's figure would publish it (a rubric may name one; the batch keeps it).
    for (const auto& g : l.gates)
      if (g.hidden && g.id == l.leaderboard_gate) l.leaderboard_value.reset();
  }
  return v;
}

void print_table(std::ostream& out, const SubmissionResult& r, bool color) {
  const char* reset = color ? "\033[0m" : "";
  const char* bold = color ? "\033[1m" : "";
  std::size_t w = 14;
  for (const auto& l : r.labs)
    for (const auto& g : l.gates) w = std::max(w, g.id.size());
  // Student text (the folder name, messages, what() of a crash) goes through printable(): it reaches the terminal.
  if (!r.student.empty()) out << bold << "student " << printable(r.student) << reset << "\n";
  if (!r.error.empty()) out << "  grader error: " << printable(r.error, true) << "\n";
  int passed = 0, total = 0, skipped = 0;
  for (const auto& l : r.labs) {
    out << bold << fmt::format("lab {}  {}", l.lab, l.title) << reset
        << fmt::format("   {}/{}   (compile {}, run {})\n", points(l.score()), points(l.max_score()),
                       format_seconds(l.compile_seconds), format_seconds(l.run_seconds));
    out << fmt::format("  {:<4} {:<{}} {:<16} {:>9}  {}\n", "lab", "gate", w, "status", "points",
                       "measured vs threshold");
    std::string last_shown;
    for (const auto& g : l.gates) {
      ++total;
      passed += g.status == Status::passed;
      skipped += g.status == Status::skipped;
      std::string status = to_string(g.status);
      std::string pad(16 > status.size() ? 16 - status.size() : 0, ' ');
      out << fmt::format("  {:<4} {:<{}} ", l.lab, g.id + (g.hidden ? "*" : ""), w) << (color ? color_of(g.status) : "")
          << status << reset << pad
          << fmt::format(" {:>9}  {}\n", points(g.points) + "/" + points(g.max_points), printable(measured_text(g)));
      if (g.status == Status::passed && g.sanitizer.empty()) continue;
      std::string details = gate_details(g, true);
      if (details.empty()) continue;
      // The same reason under every gate (no CUDA device, a build failure) is shown once.
      if (details == last_shown) continue;
      last_shown = details;
      bool long_text = g.status == Status::build_failed || g.status == Status::refused;
      out << indent_printable(trim_message(details, long_text ? 14 : 8, 1200), "        ");
    }
    for (const auto& f : l.sanitizer)
      out << fmt::format("  compute-sanitizer {}: {} error(s)\n", f.tool, f.errors)
          << (f.excerpt.empty() ? "" : indent_printable(trim_message(f.excerpt, 6, 800), "        "));
    for (const auto& n : l.notes) out << "  note: " << printable(n, true) << "\n";
  }
  out << bold
      << fmt::format("total {}/{}: {} of {} gates passed", points(r.score()), points(r.max_score()), passed, total)
      << (skipped ? fmt::format(", {} skipped", skipped) : std::string()) << reset
      << fmt::format("   (compile {}, run {})\n", format_seconds(r.compile_seconds), format_seconds(r.run_seconds));
  bool any_hidden = false;
  for (const auto& l : r.labs)
    for (const auto& g : l.gates) any_hidden = any_hidden || g.hidden;
  if (any_hidden) out << "  (* hidden gate: visible to students after the due date)\n";
  if (!r.isolation.empty()) out << "  isolation: " << isolation_text(r.isolation) << "\n";
}

nlohmann::json gradescope_json(const SubmissionResult& full) {
  const SubmissionResult r = student_view(full);
  nlohmann::json tests = nlohmann::json::array();
  nlohmann::json leaderboard = nlohmann::json::array();
  std::string summary;
  for (const auto& l : r.labs) {
    summary += fmt::format("Lab {} ({}): {}/{}\n", l.lab, l.title, points(l.score()), points(l.max_score()));
    for (const auto& g : l.gates) {
      std::string output = "status: " + to_string(g.status);
      std::string m = measured_text(g);
      if (!m.empty()) output += "\nmeasured: " + m;
      std::string details = gate_details(g, true);
      if (!details.empty()) output += "\n\n" + trim_message(details, 60, 8000);
      std::string name = g.title.empty() ? fmt::format("lab{} {}", l.lab, g.id)
                                         : fmt::format("lab{} {}: {}", l.lab, g.id, g.title);
      nlohmann::json t = {{"name", name},
                          {"score", g.points},
                          {"max_score", g.max_points},
                          {"status", g.status == Status::passed ? "passed" : "failed"},
                          {"output", sanitize_utf8(output)},
                          {"visibility", g.hidden ? "after_due_date" : "visible"},
                          {"tags", {"lab" + l.lab, g.kind}}};
      tests.push_back(std::move(t));
    }
    if (l.leaderboard_value)
      leaderboard.push_back({{"name", fmt::format("lab{} {}", l.lab, l.leaderboard_metric)},
                             {"value", *l.leaderboard_value},
                             {"order", l.leaderboard_order == "asc" ? "asc" : "desc"}});
    for (const auto& n : l.notes) summary += "  note: " + n + "\n";
  }
  if (!r.error.empty()) summary += "grader error: " + r.error + "\n";
  if (!r.isolation.empty()) summary += "Isolation: " + isolation_text(r.isolation) + "\n";
  summary += fmt::format("Total: {}/{} (compile {}, run {})", points(r.score()), points(r.max_score()),
                         format_seconds(r.compile_seconds), format_seconds(r.run_seconds));
  nlohmann::json j = {{"score", r.score()},
                      {"max_score", r.max_score()},
                      {"execution_time", static_cast<int>(r.compile_seconds + r.run_seconds + 0.5)},
                      {"output", sanitize_utf8(summary)},
                      {"tests", tests}};
  if (!leaderboard.empty()) j["leaderboard"] = leaderboard;
  return j;
}

std::string json_text(const nlohmann::json& j) {
  std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  // dump() escapes C0 controls but writes C1 ones raw (U+009B is a CSI to some terminals, for `cat result.json`):
  // as \u00XX they mean the same. In valid UTF-8, C2 80-9F is always such a character, inside a string.
  std::string out;
  out.reserve(text.size() + 1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (static_cast<unsigned char>(text[i]) == 0xC2 && next >= 0x80 && next <= 0x9F) {
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += text[i];
    }
  }
  return out + "\n";
}

std::string xml_escape(const std::string& raw) {
  // sanitize_utf8 also replaces control characters and surrogates, which XML 1.0's Char production excludes; U+FFFE
  // and U+FFFF (valid UTF-8, EF BF BE and EF BF BF) are excluded too: one of them made the whole class file invalid.
  std::string s = replace_all(replace_all(sanitize_utf8(raw), "\xEF\xBF\xBE", "\xEF\xBF\xBD"), "\xEF\xBF\xBF",
                              "\xEF\xBF\xBD");
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const char* entity = markup_entity(c, true);
    if (entity) out += entity;
    else out += c;
  }
  return out;
}

std::string junit_xml(const std::vector<SubmissionResult>& results) {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  std::ostringstream suites;
  for (const auto& r : results) {
    for (const auto& l : r.labs) {
      int t = 0, f = 0, e = 0, s = 0;
      std::ostringstream cases;
      std::string suite = suite_name(r, l);
      for (const auto& g : l.gates) {
        ++t;
        cases << fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\">\n", xml_escape(suite),
                             xml_escape(g.id), g.seconds);
        std::string body = gate_details(g, true);
        std::string m = measured_text(g);
        if (!m.empty()) body = "measured: " + m + (body.empty() ? "" : "\n" + body);
        std::string first = trim_message(body, 1, 300);
        switch (g.status) {
          case Status::passed:
            break;
          case Status::skipped:
            ++s;
            cases << fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(first));
            break;
          case Status::crashed:
          case Status::timeout:
          case Status::build_failed:
          case Status::refused:
            ++e;
            cases << fmt::format("      <error type=\"{}\" message=\"{}\">{}</error>\n", to_string(g.status),
                                 xml_escape(first), xml_escape(body));
            break;
          default:
            ++f;
            cases << fmt::format("      <failure type=\"{}\" message=\"{}\">{}</failure>\n", to_string(g.status),
                                 xml_escape(first), xml_escape(body));
        }
        cases << fmt::format(
            "      <properties><property name=\"points\" value=\"{}\"/>"
            "<property name=\"max_points\" value=\"{}\"/></properties>\n",
            points(g.points), points(g.max_points));
        cases << "    </testcase>\n";
      }
      suites << fmt::format(
          "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
          xml_escape(suite), t, f, e, s, l.compile_seconds + l.run_seconds);
      if (!r.isolation.empty())
        suites << fmt::format("    <properties><property name=\"isolation\" value=\"{}\"/></properties>\n",
                              xml_escape(r.isolation));
      suites << cases.str() << "  </testsuite>\n";
      tests += t;
      failures += f;
      errors += e;
      skipped += s;
    }
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"labgrade\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n{}"
      "</testsuites>\n",
      tests, failures, errors, skipped, suites.str());
}

std::string csv_field(const std::string& raw, bool text) {
  // A cell starting with = + - @ is a formula to a spreadsheet: a student folder named "=HYPERLINK(...)" must
  // stay text. A leading tab or carriage return can hide one too (OWASP's CSV injection list); checked on the raw
  // text, since sanitize_utf8 drops the \r.
  const bool formula = text && !raw.empty() && std::string("=+-@\t\r").find(raw[0]) != std::string::npos;
  std::string s = sanitize_utf8(raw);
  if (formula || (text && !s.empty() && std::string("=+-@\t").find(s[0]) != std::string::npos)) s = "'" + s;
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  return "\"" + replace_all(s, "\"", "\"\"") + "\"";
}

std::string gradebook_csv(const std::vector<SubmissionResult>& results) {
  std::string out = "student,lab,gate,status,points,max_points,metric,value,threshold,isolation\n";
  for (const auto& r : results) {
    const std::string student = student_name(r);
    for (const auto& l : r.labs)
      for (const auto& g : l.gates) {
        out += csv_field(student, true) + "," + csv_field(l.lab, true) + "," + csv_field(g.id, true) + "," +
               to_string(g.status) + "," + points(g.points) + "," + points(g.max_points) + "," +
               csv_field(g.metric_name, true) + "," + (g.measured ? num(*g.measured) : "") + "," +
               (g.threshold ? num(*g.threshold) : "") + "," + csv_field(r.isolation, true) + "\n";
      }
  }
  return out;
}

namespace {

// A passed gate listed for review, with the figure it is listed for (its multiple of the threshold that lists it).
struct ReviewRow {
  std::string student, gate;
  double figure, reference;  // reference: what the figure is a multiple of (1 where the figure is one already)
};

// The rows most above first, as "| student | gate | <columns> |" lines.
void review_table(std::ostream& md, std::vector<ReviewRow> rows, bool with_reference) {
  std::stable_sort(rows.begin(), rows.end(), [](const ReviewRow& a, const ReviewRow& b) {
    return a.figure / a.reference > b.figure / b.reference;
  });
  for (const auto& row : rows) {
    md << "| " << md_cell(row.student) << " | " << md_cell(row.gate) << " | ";
    if (with_reference) md << num(row.figure) << " | " << num(row.reference) << " | ";
    md << fmt::format("{:.2f}", row.figure / row.reference) << " |\n";
  }
  md << "\n";
}

// A class-report section of one row per finding: "### heading", the text, and a table of student and `column`.
// Nothing when there are no rows.
void student_rows_section(std::ostream& md, const std::string& heading, const std::string& text,
                          const std::string& column, const std::vector<std::pair<std::string, std::string>>& rows) {
  if (rows.empty()) return;
  md << "### " << heading << "\n\n" << text << "\n\n| student | " << column << " |\n|---|---|\n";
  for (const auto& [student, cell] : rows) md << "| " << md_cell(student) << " | " << md_cell(cell) << " |\n";
  md << "\n";
}

// Students whose speed gates shared their GPU with another process (batch.cpp's kSharedGpuNote): the first list to
// act on, since their speed verdicts may be the machine's.
void shared_gpu_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<std::pair<std::string, std::string>> shared;  // student, what was seen
  for (const auto& r : results)
    for (const auto& l : r.labs) {
      const auto it = std::find_if(l.notes.begin(), l.notes.end(),
                                   [](const std::string& n) { return starts_with(n, kSharedGpuNote); });
      if (it != l.notes.end()) {
        shared.emplace_back(student_name(r), it->substr(std::string(kSharedGpuNote).size()));
        break;
      }
    }
  student_rows_section(md, "Speed gates timed beside other GPU processes",
                       "Another process computed on the student's GPU when its speed gates were timed: grade these "
                       "students again (remove their result.json from the output folder and run the same batch "
                       "command).",
                       "seen", shared);
}

// Speed gates timed a second time with the machine quiet after an unsteady first timing (grade.cpp's kRetimedNote,
// hidden gates' too): both figures, for an instructor who wonders why a gate took twice as long or whether the
// machine was busy.
void timed_again_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<std::pair<std::string, std::string>> rows;  // student, lab and note
  for (const auto& r : results)
    for (const auto& l : r.labs)
      for (const auto& n : l.notes) {
        const std::string body = without_hidden_mark(n);
        if (starts_with(body, kRetimedNote))
          rows.emplace_back(student_name(r), "lab" + l.lab + " " + body.substr(std::string(kRetimedNote).size()));
      }
  student_rows_section(md, "Speed gates timed again on a quiet machine",
                       "Their first timing would have cost points and was unsteady, or was taken while other workers "
                       "of the batch ran (`--busy-retimes`), so the grader timed them once more with no other gate "
                       "process on the machine; the second timing decides. Nothing to do unless a gate below is "
                       "still unsteady.",
                       "gate", rows);
}

// Speed gates that lost points while their timing was unsteady: the gate reported `stalled` (labkit's
// stalled_median), a median still more than 10 % above its side's lower quartile after the extra rounds, and that
// after the grader's second timing on a quiet machine (timed_again_section). The student's own code varies that much
// from call to call, or something outside the batch used the machine.
void unsteady_timing_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<std::pair<std::string, std::string>> rows;  // student, gate and figure
  for (const auto& r : results)
    for (const auto& l : r.labs)
      for (const auto& g : l.gates)
        if (g.metrics.count("stalled") && g.points < g.max_points && g.status != Status::skipped)
          rows.emplace_back(student_name(r), "lab" + l.lab + " " + g.id +
                                                 (g.measured ? ", " + g.metric_name + " " + num(*g.measured) : ""));
  student_rows_section(md, "Speed gates that lost points on unsteady timing",
                       "The calls' times still varied by more than 10 % after the extra rounds the gate takes for "
                       "that and after a second timing with no other gate process on the machine (or the student's "
                       "second timings, `--unsteady-retimes`, were used up: the gate's message says so): the "
                       "student's code "
                       "varies that much from call to call (read it: allocations, host waits), or something outside "
                       "the batch used the machine (grade the student again: remove their result.json from the "
                       "output folder and run the same batch command).",
                       "gate", rows);
}

// Student files whose object holds what the object check does not refuse but asks to read (kObjectReviewNote):
// the bytes of a system-call instruction inside another instruction.
void object_review_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<std::pair<std::string, std::string>> rows;  // student, the note
  for (const auto& r : results)
    for (const auto& l : r.labs)
      for (const auto& note : l.notes) {
        const std::string n = without_hidden_mark(note);  // the hidden gates' pass's notes carry the mark first
        if (starts_with(n, kObjectReviewNote))
          rows.emplace_back(student_name(r), "lab" + l.lab + ", " + n.substr(std::string(kObjectReviewNote).size()));
      }
  student_rows_section(md, "Object code to read",
                       "What the object check does not refuse, since a healthy file can hold it too, but a cheat "
                       "would look like: read these files' host code (inline `asm`, jumps into other instructions).",
                       "where", rows);
}

void above_reference_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<ReviewRow> rows;
  for (const auto& r : results)
    for (const auto& l : r.labs)
      for (const auto& g : l.gates)
        if (g.status == Status::passed && g.measured && g.reference && *g.reference > 0 &&
            *g.measured >= kReviewAboveReference * *g.reference)
          rows.push_back({student_name(r), "lab" + l.lab + " " + g.id, *g.measured, *g.reference});
  const int margin = static_cast<int>(std::lround((kReviewAboveReference - 1) * 100));
  md << "### Speed well above the reference solution\n\n";
  if (rows.empty()) {
    md << "No passed speed gate measured " << margin << " % or more above the rubric's reference.\n\n";
    return;
  }
  md << "Passed speed gates that measured " << margin << " % or more above the rubric's reference (the reference "
     << "solution's figure, on the GPU the rubric names): a better kernel than the reference, a faster GPU, or a gate "
     << "gamed in a way its checks missed. Not scored; worth a look (the instructor guide: re-run the student alone, "
     << "with another --rng-seed, or read the step).\n\n"
     << "| student | gate | measured | reference | x reference |\n|---|---|---:|---:|---:|\n";
  review_table(md, std::move(rows), true);
}

// The speed gates that record two of the step's calls (labkit::RecordedCalls::two_calls) report how much slower the
// faster of those ran than the counted median. A step that told the recorded calls apart and ran a faster library
// on the others shows as a recorded call far slower than its median. No section where no gate reported it.
void recorded_slower_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<ReviewRow> rows;
  bool any = false;
  for (const auto& r : results)
    for (const auto& l : r.labs)
      for (const auto& g : l.gates) {
        const auto it = g.metrics.find("recorded_over_counted");
        if (it == g.metrics.end()) continue;
        any = true;
        const auto counted = g.metrics.find("candidate_ms");
        const double cutoff = recorded_review_cutoff(counted == g.metrics.end() ? 0.0 : counted->second.value);
        if (g.status == Status::passed && it->second.value >= cutoff)
          rows.push_back({student_name(r), "lab" + l.lab + " " + g.id, it->second.value, 1.0});
      }
  if (!any) return;
  const int slower = static_cast<int>(std::lround((kReviewRecordedSlower - 1) * 100));
  const int allowance_us = static_cast<int>(std::lround(kReviewRecordedAllowanceMs * 1000));
  const std::string by = std::to_string(slower) + " % and " + std::to_string(allowance_us) + " us";
  md << "### Recorded calls slower than the counted ones\n\n";
  if (rows.empty()) {
    md << "No passed speed gate's recorded calls ran " << by << " or more slower than its counted calls.\n\n";
    return;
  }
  md << "Passed speed gates that record two of the step's calls, the faster of which ran " << by
     << " or more slower than the median of the counted calls: a step may run its own kernels only when the launch "
     << "recorder watches and a library otherwise (the recorder itself slows healthy steps' recorded calls by "
     << "a few microseconds to tens of them, up to 28 % of a call of 45 us). Not scored; read the step.\n\n"
     << "| student | gate | recorded / counted |\n|---|---|---:|\n";
  review_table(md, std::move(rows), false);
}

}  // namespace

double recorded_review_cutoff(double counted_ms) {
  return counted_ms > 0 ? kReviewRecordedSlower + kReviewRecordedAllowanceMs / counted_ms : kReviewRecordedSlower;
}

// Passed gates that left a case out for want of device memory (the metric huge_case_left_out: lab 04's 2^30 + 1 keys
// need 40 GB free, which a GPU shared with the lab's neighbours may lack now and then). A step that keeps device memory
// can cause it, and the case is what catches an index kept in 32 bits: grade such a student again alone.
void left_out_section(std::ostream& md, const std::vector<SubmissionResult>& results) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& r : results)
    for (const auto& l : r.labs)
      for (const auto& g : l.gates) {
        const auto it = g.metrics.find("huge_case_left_out");
        if (g.status == Status::passed && it != g.metrics.end() && it->second.value > 0)
          rows.emplace_back(student_name(r), "lab" + l.lab + " " + g.id);
      }
  student_rows_section(md, "Cases left out for want of device memory",
                       "These gates passed without their largest case (lab 04: 2^30 + 1 keys, which need 40 GB of free "
                       "device memory), the one that catches an index kept in 32 bits. A step that keeps device "
                       "memory can cause it: grade these students again alone (`labgrade batch` with their folders).",
                       "gate", rows);
}

std::string speed_review(const std::vector<SubmissionResult>& results) {
  std::ostringstream md;
  shared_gpu_section(md, results);
  timed_again_section(md, results);
  unsteady_timing_section(md, results);
  object_review_section(md, results);
  left_out_section(md, results);
  above_reference_section(md, results);
  recorded_slower_section(md, results);
  return md.str();
}

std::string markdown_report(const std::vector<SubmissionResult>& results, const std::string& title,
                            const std::vector<std::string>& not_graded) {
  std::ostringstream md;
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  md << "# " << md_cell(title) << "\n\nGenerated by labgrade on " << date << ".\n\n";
  if (!not_graded.empty()) {
    md << "## Not graded\n\nEntries of the submissions folder that were not graded (no result, no row in the "
          "gradebook):\n\n";
    for (const auto& n : not_graded) md << "- " << md_cell(n) << "\n";
    md << "\n";
  }

  std::vector<std::string> labs;
  for (const auto& r : results)
    for (const auto& l : r.labs)
      if (std::find(labs.begin(), labs.end(), l.lab) == labs.end()) labs.push_back(l.lab);
  std::sort(labs.begin(), labs.end());

  if (results.size() > 1 || (!results.empty() && !results[0].student.empty())) {
    std::map<std::string, int> isolations;
    for (const auto& r : results) ++isolations[r.isolation];
    md << "## Summary\n\nIsolation:";
    for (const auto& [iso, n] : isolations) md << " " << md_cell(isolation_text(iso)) << " (" << n << " students);";
    md << "\n\n| student |";
    for (const auto& lab : labs) md << " lab " << lab << " |";
    md << " total | compile | run |\n|---|";
    for (std::size_t i = 0; i < labs.size(); ++i) md << "---:|";
    md << "---:|---:|---:|\n";
    for (const auto& r : results) {
      md << "| " << md_cell(student_name(r)) << " |";
      for (const auto& lab : labs) {
        auto it = std::find_if(r.labs.begin(), r.labs.end(), [&](const LabResult& l) { return l.lab == lab; });
        md << " " << (it == r.labs.end() ? "-" : points(it->score()) + "/" + points(it->max_score())) << " |";
      }
      md << " " << points(r.score()) << "/" << points(r.max_score()) << " | " << format_seconds(r.compile_seconds)
         << " | " << format_seconds(r.run_seconds) << " |\n";
    }
    // Which gates the class struggles with.
    std::map<std::string, std::pair<int, int>> pass;  // "lab/gate" -> passed, total
    std::vector<std::string> order;
    for (const auto& r : results)
      for (const auto& l : r.labs)
        for (const auto& g : l.gates) {
          std::string key = "lab" + l.lab + " " + g.id;
          if (!pass.count(key)) order.push_back(key);
          pass[key].first += g.status == Status::passed;
          pass[key].second += 1;
        }
    md << "\n### Pass rate per gate\n\n| gate | passed |\n|---|---:|\n";
    for (const auto& k : order) md << "| " << md_cell(k) << " | " << pass[k].first << "/" << pass[k].second << " |\n";
    md << "\n";
    md << speed_review(results);
  }

  for (const auto& r : results) {
    md << "## " << md_cell(r.student.empty() ? "Results" : r.student) << " — " << points(r.score()) << "/"
       << points(r.max_score()) << "\n\n";
    if (!r.error.empty()) md << "**Grader error:** " << md_cell(r.error) << "\n\n";
    if (!r.isolation.empty()) md << "Isolation: " << md_cell(isolation_text(r.isolation)) << ".\n\n";
    for (const auto& l : r.labs) {
      md << "### Lab " << l.lab << ": " << md_cell(l.title) << " — " << points(l.score()) << "/"
         << points(l.max_score()) << "\n\n";
      md << "Compile " << format_seconds(l.compile_seconds) << ", run " << format_seconds(l.run_seconds)
         << (l.device.empty() ? "" : ", device: " + md_cell(l.device)) << ".\n\n";
      md << "| gate | status | points | measured vs threshold |\n|---|---|---:|---|\n";
      for (const auto& g : l.gates)
        md << "| `" << g.id << "`" << (g.hidden ? " (hidden)" : "") << " | " << to_string(g.status) << " | "
           << points(g.points) << "/" << points(g.max_points) << " | " << md_cell(measured_text(g)) << " |\n";
      md << "\n";
      std::string last;
      for (const auto& g : l.gates) {
        if (g.status == Status::passed && g.sanitizer.empty()) continue;
        // Sanitized before the fence is chosen: sanitize_utf8 drops \r, which turned "``\r`" into a closing ```.
        std::string details = sanitize_utf8(trim_message(gate_details(g, true), 20, 3000));
        if (details.empty() || details == last) continue;
        last = details;
        const std::string fence = code_fence(details);
        md << "- **" << g.id << "** (" << to_string(g.status) << ")\n\n  " << fence << "\n"
           << indent(details, "  ") << "  " << fence << "\n\n";
      }
      for (const auto& f : l.sanitizer) md << "- compute-sanitizer " << f.tool << ": " << f.errors << " error(s)\n";
      for (const auto& n : l.notes) md << "- note: " << md_cell(n) << "\n";
      if (!l.notes.empty() || !l.sanitizer.empty()) md << "\n";
    }
  }
  return md.str();
}

}  // namespace labgrade
