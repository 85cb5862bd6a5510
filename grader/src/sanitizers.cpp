// The memory and race checks: `--sanitize` (run_sanitizer, one process per gate) and the default checks of every
// graded run (check_with_sanitizers, memcheck and racecheck at the same time), both through the graded run's attempt
// loop (runner.cpp, reached through runner_internal.h) with compute-sanitizer as the gate binary's prefix.
#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <cstring>
#include <string_view>
#include <optional>
#include <set>
#include <thread>

#include "runner.h"
#include "runner_internal.h"

namespace labgrade {

using detail::add_note;
using detail::Clock;
using detail::limit_text;
using detail::secs;

namespace {

// Calls f(line) for each line of `text` as a view (no copy per line: a log is up to 96 MiB of the student's output,
// and a vector of its lines, one string each, took 2 GiB for 64 MiB of bare newlines); stops when f returns false.
template <class F>
void for_each_line(const std::string& text, F f) {
  const std::string_view all(text);
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t end = std::min(all.find('\n', at), all.size());
    if (!f(all.substr(at, end - at))) return;
    at = end + 1;
  }
}

std::string excerpt(const std::string& text, std::size_t max_lines) {
  std::vector<std::string> out;
  for_each_line(text, [&](std::string_view l) {
    if (l.substr(0, 9) != "=========") return true;
    std::string s = trim(std::string(l.substr(9, 2000)));
    if (s.empty() || starts_with(s, "ERROR SUMMARY") || starts_with(s, "COMPUTE-SANITIZER")) return true;
    out.push_back(s);
    return out.size() < max_lines;
  });
  return sanitize_utf8(join(out, "\n"));
}

}  // namespace

void run_sanitizer(LabResult& lab, const GateRunSpec& spec, const std::string& tool, bool strict,
                   std::optional<bool> hidden) {
  std::vector<std::string> ids;
  bool any_of_these = false;  // the lab has gates of the visibility asked for
  for (const auto& g : lab.gates) {
    if (hidden && g.hidden != *hidden) continue;
    any_of_these = true;
    bool kind_ok = tool == "racecheck" ? g.kind == "correctness" : (g.kind == "correctness" || g.kind == "cpu");
    bool ran = g.status == Status::passed || g.status == Status::failed || g.status == Status::crashed;
    if (kind_ok && ran) ids.push_back(g.id);
  }
  const std::string which = hidden && *hidden ? " hidden" : "";
  if (ids.empty()) {
    if (any_of_these)
      add_note(lab, "compute-sanitizer " + tool + ": no" + which + " gate to check (nothing ran, e.g. no CUDA device)");
    return;
  }
  auto sanitizer = find_program("compute-sanitizer", {"/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer"});
  if (!sanitizer) {
    add_note(lab, "compute-sanitizer not found on PATH: --sanitize skipped (it comes with the CUDA toolkit)");
    return;
  }
  // One process per gate: the sanitizer's log has no gate markers, so this is what makes every report belong
  // to exactly one gate. Its reports go to the console log (a file only the grader can reach), not to
  // --log-file in the submission's writable folder, where the submission could rewrite them.
  GateRunSpec s = spec;
  s.prefix = {sanitizer->string(), "--tool", tool, "--print-limit", "20", "--target-processes", "all"};
  s.gate_time_limit_s = spec.gate_time_limit_s * 10;  // instrumented kernels run 10-100x slower
  s.time_limit_s = spec.gate_time_limit_s * 10 + 60;
  // ... or far slower (racecheck on a 2048^3 tiled matmul: many minutes): with LABKIT_SANITIZER set, the gates
  // leave out their largest cases (labkit::gate::under_sanitizer); the small and odd ones check bounds and races.
  set_env(s.process, "LABKIT_SANITIZER", tool);
  int total = 0;
  std::string first_reports;
  for (const auto& id : ids) {
    s.log_tag = tool + "-" + safe_file_name(id) + "-";
    LabResult scratch = lab;  // the sanitized run's own verdicts do not replace the graded ones
    const auto attempts = detail::run_gates_logged(scratch, s, {id});
    int errors = 0;
    std::string reports;
    for (const auto& a : attempts) {
      std::string text = read_sanitizer_log(a.log);
      errors += sanitizer_error_count(text);
      if (reports.empty()) reports = excerpt(text, 6);
    }
    if (errors == 0) continue;
    total += errors;
    if (first_reports.empty()) first_reports = reports;
    for (auto& g : lab.gates) {
      if (g.id != id) continue;
      std::string finding =
          tool + ": " + std::to_string(errors) + " error(s)" + (reports.empty() ? "" : "\n" + reports);
      g.sanitizer += (g.sanitizer.empty() ? "" : "\n") + finding;
      if (strict && g.status == Status::passed) {
        g.status = Status::failed;
        g.message = "compute-sanitizer " + finding;
      }
    }
  }
  // One entry per tool: the hidden gates' pass adds to the visible gates' one.
  auto same = std::find_if(lab.sanitizer.begin(), lab.sanitizer.end(), [&](const auto& f) { return f.tool == tool; });
  if (same == lab.sanitizer.end()) {
    lab.sanitizer.push_back({tool, total, first_reports});
  } else {
    same->errors += total;
    if (same->excerpt.empty()) same->excerpt = first_reports;
  }
  add_note(lab, "compute-sanitizer " + tool + ": " + std::to_string(total) + " error(s) over " +
                    std::to_string(ids.size()) + which + " gate(s), one process per gate");
}

namespace {
// The decimal number at `at` and where it ends, nullopt when no digit is there. Saturated at a million, so that sums
// over gates stay far from int's limit: the log is the student's output too, and a run of a million digits once
// overflowed std::regex's recursion (then std::stoi's range).
std::optional<std::pair<int, std::size_t>> count_at(const std::string& s, std::size_t at) {
  std::size_t k = at;
  long long v = 0;
  while (k < s.size() && s[k] >= '0' && s[k] <= '9') v = std::min<long long>(v * 10 + (s[k++] - '0'), 1000000);
  if (k == at) return std::nullopt;
  return std::make_pair(static_cast<int>(v), k);
}
}  // namespace

std::string read_sanitizer_log(const fs::path& log) {
  // The log holds the student's output as well as the tool's: a process that printed more than a fixed window pushed
  // the tool's reports and summary past it (17 MiB of output hid every finding when 16 MiB were read). Batch runs
  // stop at 64 MiB (the file-size limit), so the whole log is read; a longer one (local grading has no such limit)
  // is read at both ends, where the first reports and the summary are.
  constexpr std::size_t kHalf = std::size_t(48) << 20;
  std::error_code ec;
  const auto size = fs::file_size(log, ec);
  if (ec || size <= 2 * kHalf) return read_file_limited(log, 2 * kHalf, false);
  return read_file_limited(log, kHalf, false) + "\n" + read_file_limited(log, kHalf, true);
}

int sanitizer_error_count(const std::string& log) {
  // "ERROR SUMMARY: N error(s)" (memcheck and racecheck) and "RACECHECK SUMMARY: H hazard(s) displayed (N error(s)",
  // read by hand: no regex over a log whose contents the student controls.
  int from_summary = 0;
  const auto followed_by = [&](std::size_t at, const char* text) {
    return log.compare(at, std::strlen(text), text) == 0;
  };
  for (std::size_t at = log.find("ERROR SUMMARY: "); at != std::string::npos;
       at = log.find("ERROR SUMMARY: ", at + 1)) {
    const auto n = count_at(log, at + 15);
    if (n && followed_by(n->second, " error")) from_summary = std::max(from_summary, n->first);
  }
  for (std::size_t at = log.find("RACECHECK SUMMARY: "); at != std::string::npos;
       at = log.find("RACECHECK SUMMARY: ", at + 1)) {
    const auto hazards = count_at(log, at + 19);
    if (!hazards) continue;
    std::size_t k = hazards->second;
    if (!followed_by(k, " hazard")) continue;
    k += 7;
    if (followed_by(k, "s")) ++k;
    if (!followed_by(k, " displayed (")) continue;
    const auto n = count_at(log, k + 12);
    if (n && followed_by(n->second, " error")) from_summary = std::max(from_summary, n->first);
  }
  // The reports themselves: memcheck's "Invalid __global__ write of size 4 bytes", "Misaligned ...", "Out-of-range
  // ...", racecheck's "Error: Race reported between ...". "Error: process didn't terminate successfully" is the
  // gate binary's own exit code (a failed gate), not a finding.
  int reports = 0;
  for_each_line(log, [&](std::string_view line) {
    if (line.substr(0, 10) != "========= ") return true;
    const std::string_view s = line.substr(10);
    for (const std::string_view start : {"Invalid ", "Misaligned ", "Out-of-range ", "Error: Race reported"})
      if (s.substr(0, start.size()) == start) {
        reports = std::min(reports + 1, 1000000);
        break;
      }
    return true;
  });
  return std::max(from_summary, reports);
}

namespace {

struct ToolOutcome {
  int errors = 0;
  std::string excerpt;
  bool finished = true;  // every gate of the run reached its end within the time limit
  bool started = false;  // a GPU gate ran to its end under the sanitizer (a cpu gate alone checks no kernel)
  std::string why_not;   // when none did: what the first gate's outcome said
  int checked = 0;       // gates that ran to their end (passed or failed: their verdicts are thrown away)
  std::vector<std::string> unchecked;  // "id (status: why)" for gates that were skipped, crashed or missing
  double seconds = 0;
};

// The kernels a tool needs to instrument for `ids`, from the lists the graded run's gates wrote
// (GateResult::names, from labkit::gate::own_kernels, which sees every kernel a step's call runs and knows a kernel as
// the student's by where it was compiled, not by its name):
//   - racecheck, "shared_memory_kernels": the steps' own kernels with shared memory, all it can check;
//   - memcheck, "step_kernels": every kernel the steps ran, the libraries' they called included (a wrong size passed
//     to cuBLAS shows as cuBLAS's kernel reading out of bounds).
// Left to themselves the tools also instrument the gates' own fills, guard checks and comparisons and the library
// references, trusted code that runs on every case: on an H200 that was half of racecheck's time (lab 07 alone: 11.5 s
// with every kernel, 5.5-6.4 s with the lab's own; lab 01 7.4 s and 3.5 s). The checks run a subset of the graded run's
// cases (SanitizerCap), so the graded run has seen each kernel they run. A cpu gate without a list runs no step on the
// GPU and adds nothing. Empty, which instruments every kernel, when a GPU gate has no list (it opened no recorder
// scope), a name cannot be passed on or no step ran a kernel; `why` then says which.
std::vector<std::string> kernels_to_check(const LabResult& lab, const std::vector<std::string>& ids,
                                          const std::string& list, std::string* why = nullptr) {
  std::set<std::string> names;
  auto none = [&](const std::string& reason) {
    if (why) *why = reason;
    return std::vector<std::string>{};
  };
  for (const auto& id : ids) {
    const auto g = std::find_if(lab.gates.begin(), lab.gates.end(), [&](const GateResult& r) { return r.id == id; });
    if (g == lab.gates.end()) return none(id + " is not a gate of the lab");
    const auto it = g->names.find(list);
    if (it == g->names.end()) {
      if (g->kind == "cpu") continue;
      return none(id + " did not list its kernels");
    }
    for (const auto& n : it->second) {
      // compute-sanitizer splits a filter at ',' and '='; mangled names have neither
      if (n.empty() || n.find_first_of(",= ") != std::string::npos)
        return none(id + " ran a kernel whose name cannot be passed on (" + trim_message(n, 1, 80) + ")");
      names.insert(n);
    }
  }
  if (names.empty()) return none("no step ran a kernel");
  return {names.begin(), names.end()};
}

// The list each tool instruments (kernels_to_check).
std::string kernel_list_of(const std::string& tool) {
  return tool == "racecheck" ? "shared_memory_kernels" : "step_kernels";
}

// One process under `tool` for `ids`, with the gates' own verdicts thrown away (the graded run decided those).
// `kernels`, when not empty: only these kernels are instrumented and checked (exact mangled names).
ToolOutcome sanitize_once(const LabResult& lab, const GateRunSpec& base, const std::string& tool,
                          const std::vector<std::string>& ids, const std::string& tag, double time_limit_s,
                          const std::vector<std::string>& kernels = {}) {
  GateRunSpec s = base;
  s.prefix = {base.prefix.empty() ? "compute-sanitizer" : base.prefix.front(), "--tool", tool, "--print-limit", "20",
              "--target-processes", "all",
              // API errors (cudaErrorNotReady from a polling query...) are the gates' business, not a finding.
              "--report-api-errors", "no"};
  for (const auto& k : kernels) {
    s.prefix.push_back("--kernel-name");
    s.prefix.push_back("kne=" + k);
  }
  s.gate_time_limit_s = base.gate_time_limit_s * 10;  // instrumented kernels run 10-100x slower
  s.time_limit_s = time_limit_s;
  s.log_tag = tag;
  if (base.on_gate_start)
    s.on_gate_start = [show = base.on_gate_start, tool](const std::string& gate) { show(gate + " (" + tool + ")"); };
  set_env(s.process, "LABKIT_SANITIZER", tool);
  set_env(s.process, "LABKIT_SANITIZER_SMALL", "1");  // labkit::gate::SanitizerCap keeps a sixteenth of its cap
  LabResult scratch = lab;
  const auto attempts = detail::run_gates_logged(scratch, s, ids);
  ToolOutcome out;
  for (const auto& a : attempts) {
    out.seconds += a.seconds;
    std::string text = read_sanitizer_log(a.log);
    out.errors += sanitizer_error_count(text);
    if (out.excerpt.empty()) out.excerpt = excerpt(text, 6);
  }
  bool any_gpu = false, gpu_ran = false;
  for (const auto& g : scratch.gates) {
    if (std::find(ids.begin(), ids.end(), g.id) == ids.end()) continue;
    const bool ran = g.status == Status::passed || g.status == Status::failed;
    const bool gpu = g.kind != "cpu";
    any_gpu = any_gpu || gpu;
    gpu_ran = gpu_ran || (gpu && ran);
    out.checked += ran;
    if (g.status == Status::timeout) out.finished = false;  // said once for the run, not per gate
    else if (!ran)
      out.unchecked.push_back(g.id + " (" + to_string(g.status) + ": " + trim_message(g.message, 1, 160) + ")");
    if (!ran && out.why_not.empty()) out.why_not = trim_message(g.message, 3, 300);
  }
  // A run in which only cpu gates got to their end checked no kernel: that is not a clean check.
  out.started = out.checked > 0 && (gpu_ran || !any_gpu);
  return out;
}

}  // namespace

namespace {

// What one tool found over a lab, gathered on its own thread and merged into the lab afterwards.
struct ToolReport {
  std::string tool;
  std::vector<std::string> notes;
  std::map<std::string, std::string> findings;  // gate id -> "memcheck: 2 error(s)\n<excerpt>"
  std::vector<SanitizerFinding> summary;        // lab.sanitizer entries
};

// racecheck finds hazards in shared memory only, and costs seconds per gate (it is the larger part of the checks'
// time): a gate whose graded run saw only kernels without shared memory (labkit's metric shared_memory_kernels,
// counted from CUPTI's kernel records in labkit::gate::own_kernels) has nothing for it to check. A gate without the
// metric (it opened no recorder scope) is checked.
bool uses_shared_memory(const GateResult& g) {
  auto it = g.metrics.find("shared_memory_kernels");
  return it == g.metrics.end() || !(it->second.value == 0);
}

ToolReport check_with_tool(const LabResult& lab, const GateRunSpec& base, const std::string& tool,
                           double time_limit_s, std::optional<bool> only_hidden) {
  ToolReport r;
  r.tool = tool;
  auto eligible = [&](const GateResult& g) {
    bool kind_ok = g.kind == "correctness" || (tool == "memcheck" && g.kind == "cpu");
    return kind_ok && g.status == Status::passed;
  };
  // Visible and hidden gates apart, as in the graded run: a hidden gate's report never reaches a visible gate.
  for (const bool hidden : {false, true}) {
    if (only_hidden && *only_hidden != hidden) continue;
    std::vector<std::string> ids;
    int no_shared = 0;
    for (const auto& g : lab.gates) {
      if (g.hidden != hidden || !eligible(g)) continue;
      if (tool == "racecheck" && !uses_shared_memory(g)) {
        ++no_shared;
        continue;
      }
      ids.push_back(g.id);
    }
    if (no_shared > 0)
      r.notes.push_back(tool + ": left out " + std::to_string(no_shared) + (hidden ? " hidden" : "") +
                        " gate(s) whose own kernels use no shared memory (racecheck checks nothing else)");
    if (ids.empty()) continue;
    const std::string tag = tool + (hidden ? "-hidden-" : "-");
    std::string unfiltered;
    const std::vector<std::string> kernels = kernels_to_check(lab, ids, kernel_list_of(tool), &unfiltered);
    ToolOutcome all = sanitize_once(lab, base, tool, ids, tag + "all-", time_limit_s, kernels);
    char took[32];
    std::snprintf(took, sizeof took, "%.1f s", all.seconds);
    if (!all.started && all.errors == 0) {
      // Nothing ran to its end (the sanitizer could not start the gate binary, or died at once): say so rather
      // than "no error", and hold nothing against the gates.
      r.notes.push_back(tool + ": the memory and race checks could not run the gates (" + all.why_not + ")");
      continue;
    }
    std::string note = tool + ": " + std::to_string(all.checked) + (hidden ? " hidden" : "") +
                       " gate(s) checked in " + took;
    if (!kernels.empty())
      note += " (their " + std::to_string(kernels.size()) +
              (tool == "racecheck" ? " own kernel(s) with shared memory)" : " steps' kernel(s))");
    if (!unfiltered.empty()) note += " (every kernel instrumented: " + unfiltered + ")";
    if (!all.unchecked.empty()) {
      // Gates that did not run to their end under the sanitizer were not checked: say which and why, so that a
      // clean note never hides them.
      note += "; not checked: ";
      for (std::size_t i = 0; i < all.unchecked.size() && i < 3; ++i) note += (i ? "; " : "") + all.unchecked[i];
      if (all.unchecked.size() > 3) note += "; and " + std::to_string(all.unchecked.size() - 3) + " more";
    }
    if (!all.finished)
      note += "; the check's time limit (" + limit_text(time_limit_s) +
              ", the rubric's sanitizer_time_limit_s) ran out before every gate was checked";
    if (all.errors == 0) {
      r.notes.push_back(note + ", no error");
      continue;
    }
    // Which gate? One process per gate, each with the same time limit, until the budget of three runs is spent.
    int attributed = 0;
    double spent = 0;
    for (const auto& id : ids) {
      if (spent > 3 * time_limit_s) break;
      ToolOutcome one = sanitize_once(lab, base, tool, {id}, tag + safe_file_name(id) + "-", time_limit_s,
                                      kernels_to_check(lab, {id}, kernel_list_of(tool)));
      spent += one.seconds;
      if (one.errors == 0) continue;
      attributed += one.errors;
      r.findings[id] = tool + ": " + std::to_string(one.errors) + " error(s)" +
                       (one.excerpt.empty() ? "" : "\n" + one.excerpt);
    }
    r.summary.push_back({tool, std::max(all.errors, attributed), all.excerpt});
    note += ", " + std::to_string(all.errors) + " error(s)";
    if (attributed == 0) note += " that no single gate reproduced on its own (nothing failed for them)";
    r.notes.push_back(note);
  }
  return r;
}

}  // namespace

void check_with_sanitizers(LabResult& lab, const GateRunSpec& spec, std::optional<bool> hidden) {
  if (!spec.sanitizer_checks) return;
  bool any_gpu = false;
  for (const auto& g : lab.gates)
    any_gpu = any_gpu || (g.kind == "correctness" && g.status == Status::passed && (!hidden || g.hidden == *hidden));
  if (!any_gpu) return;  // nothing ran on a GPU (no device): nothing for a sanitizer to see
  auto sanitizer = find_program("compute-sanitizer", {"/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer"});
  if (!sanitizer) {
    add_note(lab, "memory and race checks not done: compute-sanitizer was not found (it comes with the CUDA toolkit; "
                  "labgrade doctor says where it looks)");
    return;
  }
  GateRunSpec base = spec;
  base.prefix = {sanitizer->string()};
  // Both tools run as the submission's one dedicated uid. The sweep of that uid at the end of one tool's gate
  // process would kill the other tool's running gate (on two H200s, in a batch, racecheck lost its first gate in
  // every submission that way: "crashed (SIGKILL)", not checked), so the sweep waits until both have ended.
  base.process.sweep_uid = false;
  // memcheck and racecheck run at the same time: the lab's speed gates are over (and other labs' wait for the GPU's
  // exclusive turn, labpool.h), and the checks only read correctness.
  // memcheck is light (a few seconds per lab on an H100) and hides behind racecheck, so a lab's checks take about
  // racecheck's time. One tool after the other was no faster over the whole workbook (`--solutions` on one H200,
  // 2026-11-28: 44.6, 47.9 and 47.9 s against 46.4, 45.6, 46.2 and 45.7 s at the same time): fewer processes share
  // the GPU's time slices, but each lab's checks take longer. racecheck itself is bound by the GPU's instrumented
  // work: splitting it into more processes at once gains nothing (measured: lab 01 in four racecheck processes 38 s,
  // in one 40 s), which is why the gates give it less to do instead (labkit::gate::default_racecheck), gates without
  // shared memory skip it and it instruments only the steps' own kernels with shared memory (kernels_to_check,
  // above). memcheck likewise instruments only the kernels the steps ran.
  // The progress display is shared: one thread at a time.
  auto show_mutex = std::make_shared<std::mutex>();
  if (spec.on_gate_start)
    base.on_gate_start = [show = spec.on_gate_start, show_mutex](const std::string& gate) {
      std::lock_guard<std::mutex> lock(*show_mutex);
      show(gate);
    };
  const std::vector<std::string> tools = {"memcheck", "racecheck"};
  std::vector<ToolReport> reports(tools.size());
  std::vector<std::exception_ptr> errors(tools.size());
  const auto started = Clock::now();
  {
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < tools.size(); ++t)
      threads.emplace_back([&, t] {
        try {
          reports[t] = check_with_tool(lab, base, tools[t], spec.sanitizer_time_limit_s, hidden);
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    for (auto& th : threads) th.join();
  }
  // With labs side by side in the slot (spec.process.sweep_uid off), the others may still be running: their
  // caller sweeps when none is.
  if (spec.process.sweep_uid) sweep_uid(spec.process.sandbox, spec.process.slot);
  lab.run_seconds += secs(Clock::now() - started);  // the grading time reported includes the checks
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Merged in a fixed order (memcheck first), so the report reads the same whichever thread finished first.
  for (const auto& r : reports) {
    for (const auto& n : r.notes) add_note(lab, n);
    for (const auto& f : r.summary) lab.sanitizer.push_back(f);
    for (auto& g : lab.gates) {
      auto it = r.findings.find(g.id);
      if (it == r.findings.end()) continue;
      const std::string& finding = it->second;
      g.sanitizer += (g.sanitizer.empty() ? "" : "\n") + finding;
      if (g.status == Status::passed) {
        g.status = Status::failed;
        g.message = "compute-sanitizer " + finding +
                    (r.tool == "memcheck"
                         ? "\n(an access outside an allocation, or a misaligned one, on the gate's small shapes: "
                           "the result happened to be right, the code is not)"
                         : "\n(threads of a block read and write the same shared memory without a barrier "
                           "between them: the result happened to be right on this run)");
      }
    }
  }
}

}  // namespace labgrade
