#include "stepbuild.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <set>

#include "labpool.h"

namespace labgrade {

namespace {

const std::regex kStepToken(R"(^(step[0-9]+[a-z]?)$)");

std::string step_token(const std::string& s) {
  std::smatch m;
  return std::regex_match(s, m, kStepToken) ? m[1].str() : "";
}

struct Tool {
  bool ok = false;
  std::string message;  // why not (timeout, exit status), empty when ok
  std::string output;
  double seconds = 0;
};

// `ps` is how the tool runs (LabBuildSpec::process, perhaps with the sweep off); argv and output are set here.
Tool run_tool(ProcessSpec ps, double timeout_s, std::vector<std::string> argv, const fs::path& log) {
  ps.argv = std::move(argv);
  ps.output = log;
  auto c = run_limited(ps, timeout_s);
  Tool t;
  t.seconds = c.seconds;
  t.output = read_file_limited(log, 1 << 20, false);
  t.ok = !c.timed_out && c.exit.exited && c.exit.code == 0;
  if (c.timed_out) t.message = "took longer than " + format_seconds(timeout_s);
  else if (!c.exit.exited) t.message = c.exit.describe();
  return t;
}

// The gates' objects, then their static libraries (labkit, Catch2), then the student's objects, in one group: the
// linker keeps the first copy of a template instance (a COMDAT group) that several objects define, so the gates'
// code runs the copies compiled from the headers with the gates, never a student's (an explicit specialisation of
// std::vector<double>'s growth under the same name once scaled every time labkit's timing recorded). The group lets
// the student's references to labkit resolve from libraries listed before them. Shared libraries follow.
std::vector<std::string> link_argv(const Recipe& r, const LabBuild& b, const fs::path& exe) {
  std::vector<std::string> argv = r.link;
  argv.insert(argv.end(), r.gate_objects.begin(), r.gate_objects.end());
  argv.push_back("-Wl,--start-group");
  for (const auto& f : r.link_libraries)
    if (is_static_library(f)) argv.push_back(f);
  for (const auto& f : b.files) argv.push_back(f.object.string());
  argv.push_back("-Wl,--end-group");
  for (const auto& f : r.link_libraries)
    if (!is_static_library(f)) argv.push_back(f);
  argv.insert(argv.end(), {"-o", exe.string()});
  return argv;
}

// For a link that failed on undefined functions: the student files (of steps, compiled) whose skeleton defines
// every one of them. Empty when any undefined function is not a step's (then the whole lab fails).
std::set<std::size_t> steps_to_blame(const Recipe& r, const LabBuild& b, const std::string& link_output) {
  auto missing = undefined_symbols(link_output);
  if (missing.empty()) return {};
  std::map<std::string, std::size_t> owner;  // function -> the file whose skeleton defines it
  for (std::size_t k = 0; k < b.files.size(); ++k) {
    if (b.files[k].step.empty() || b.files[k].state != StepFile::State::compiled) continue;
    // The skeleton objects are the grader's own (never the submission's): nm runs on them directly.
    auto nm = run_command({"nm", "-P", "-C", "--defined-only", r.skeleton_objects[k]}, 60);
    if (nm.exit_code != 0) return {};
    for (const auto& s : defined_symbols_demangled(nm.output)) owner.emplace(s, k);
  }
  std::set<std::size_t> blamed;
  for (const auto& m : missing) {
    auto it = owner.find(m);
    if (it == owner.end()) return {};
    blamed.insert(it->second);
  }
  return blamed;
}

}  // namespace

bool is_static_library(const std::string& path) { return !path.empty() && path[0] != '-' && ends_with(path, ".a"); }

std::string step_of_source(const std::string& source) {
  std::string name = fs::path(source).filename().string();
  auto us = name.find('_');
  return us == std::string::npos ? "" : step_token(name.substr(0, us));
}

std::string step_of_gate(const std::string& gate_id) {
  auto dot = gate_id.find('.');
  return dot == std::string::npos ? "" : step_token(gate_id.substr(0, dot));
}

std::vector<std::string> undefined_symbols(const std::string& linker_output) {
  static const std::regex undefined(R"(undefined reference to [`']([^']+)')");
  std::vector<std::string> out;
  for (const auto& l : split_lines(linker_output)) {
    std::smatch m;
    if (std::regex_search(l, m, undefined) && std::find(out.begin(), out.end(), m[1].str()) == out.end())
      out.push_back(m[1].str());
  }
  return out;
}

std::vector<std::string> defined_symbols_demangled(const std::string& nm_output) {
  // `nm -P -C`: "NAME TYPE VALUE [SIZE]", where a demangled NAME may itself hold spaces.
  static const std::regex line(R"(^(.+) ([A-Za-z]) [0-9a-fA-F]+( [0-9a-fA-F]+)?\s*$)");
  std::vector<std::string> out;
  for (const auto& l : split_lines(nm_output)) {
    std::smatch m;
    if (std::regex_match(l, m, line) && m[2].str() != "U") out.push_back(m[1].str());
  }
  return out;
}

LabBuild build_lab(const Recipe& r, const LabBuildSpec& spec) {
  LabBuild b;
  fs::create_directories(spec.obj_dir);
  fs::create_directories(spec.log_dir);
  const std::size_t n = r.student_sources.size();
  if (std::none_of(spec.present.begin(), spec.present.end(), [](bool p) { return p; })) {
    b.lab_status = Status::not_submitted;
    b.lab_problem = "not submitted: none of the lab's student files is there";
    return b;
  }
  // The compiles first, up to spec.jobs at once; what each outcome means is decided below, file by file in order,
  // as if they had run one after the other.
  std::vector<Tool> compiled(n);
  std::vector<fs::path> objects(n);
  {
    std::vector<std::size_t> todo;
    for (std::size_t k = 0; k < n; ++k)
      if (spec.present.at(k)) todo.push_back(k);
    const bool side_by_side = spec.jobs > 1 && todo.size() > 1;
    ProcessSpec compiler = spec.process;
    if (side_by_side) compiler.sweep_uid = false;  // a sweep would end the other compiles of the slot
    const auto start = std::chrono::steady_clock::now();
    for_each_concurrently(todo.size(), spec.jobs, [&](std::size_t i) {
      const std::size_t k = todo[i];
      objects[k] = spec.obj_dir / (replace_all(r.student_sources[k], "/", "_") + ".o");
      auto argv = r.compile_argv(k, spec.src_dir / r.student_sources[k], objects[k]);
      argv.insert(argv.begin() + 1, spec.extra_compile_flags.begin(), spec.extra_compile_flags.end());
      if (spec.write_dependencies) argv.insert(argv.begin() + 1, {"-MD", "-MF", objects[k].string() + ".d"});
      ProcessSpec ps = compiler;
      if (k < spec.compile_tmp.size() && !spec.compile_tmp[k].empty())
        set_env(ps, "TMPDIR", spec.compile_tmp[k].string());
      JobTokens::Hold token(spec.tokens, spec.token_order);
      compiled[k] = run_tool(ps, spec.timeout_s, argv,
                             spec.log_dir / (spec.log_prefix + ".compile" + std::to_string(k + 1) + ".log"));
    });
    if (side_by_side && spec.process.sweep_uid) sweep_uid(spec.process.sandbox, spec.process.slot);
    b.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  for (std::size_t k = 0; k < n; ++k) {
    StepFile f;
    f.source = r.student_sources[k];
    f.step = step_of_source(f.source);
    const std::string shown = "student/" + f.source;
    if (!spec.present.at(k)) {
      if (f.step.empty()) {
        b.lab_problem = shown + " is missing (the lab's other student files are there)";
        return b;
      }
      f.state = StepFile::State::missing;
      f.message = "not submitted: the submission has no " + shown + " (the skeleton's " + f.step + " stands in)";
      f.object = r.skeleton_objects.at(k);
      b.files.push_back(f);
      continue;
    }
    f.object = objects[k];
    const Tool& t = compiled[k];
    if (!t.ok) {
      f.message = t.message.empty() ? shown + " does not compile:\n" + summarize_build_errors(t.output, spec.path_rewrites)
                                    : "compiling " + shown + " " + t.message;
      if (f.step.empty()) {  // a file of the whole lab: nothing can stand in for it
        b.lab_problem = f.message;
        return b;
      }
      f.state = StepFile::State::failed;
      f.message += "\n(the skeleton's " + f.step + " was linked in its place; the other steps are graded)";
      f.object = r.skeleton_objects.at(k);
    } else if (spec.inspect) {
      JobTokens::Hold token(spec.tokens, spec.token_order);
      std::string refusal = spec.inspect(f.source, f.object);
      if (!refusal.empty()) {
        b.lab_status = Status::refused;
        b.lab_problem = refusal;
        return b;
      }
    }
    b.files.push_back(f);
  }
  // Link; a failure on functions that the skeleton of some compiled step defines is that step's (its file
  // compiled but misses a function the gates call): the skeleton stands in for it and the lab is linked again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Tool t;
    {
      JobTokens::Hold token(spec.tokens, spec.token_order);
      t = run_tool(spec.process, spec.timeout_s, link_argv(r, b, spec.exe),
                   spec.log_dir / (spec.log_prefix + ".link.log"));
    }
    b.seconds += t.seconds;
    if (t.ok) {
      b.exe = spec.exe;
      return b;
    }
    const std::string message =
        t.message.empty() ? summarize_build_errors(t.output, spec.path_rewrites) : "linking " + t.message;
    auto blamed = t.message.empty() && attempt == 0 ? steps_to_blame(r, b, t.output) : std::set<std::size_t>{};
    if (blamed.empty()) {
      b.lab_problem = "the submission does not link with the gates:\n" + message;
      return b;
    }
    for (auto k : blamed) {
      StepFile& f = b.files[k];
      f.state = StepFile::State::failed;
      f.message = "student/" + f.source + " does not link with the gates:\n" + message + "\n(the skeleton's " + f.step +
                  " was linked in its place; the other steps are graded)";
      f.object = r.skeleton_objects.at(k);
    }
  }
  b.lab_problem = "the submission does not link with the gates";  // not reached: the second attempt returns
  return b;
}

void apply_build(LabResult& lab, const LabBuild& b) {
  lab.compile_seconds = b.seconds;
  if (!b.lab_problem.empty()) {
    set_all(lab, b.lab_status, b.lab_problem);
    return;
  }
  for (const auto& f : b.files) {
    if (f.state == StepFile::State::compiled) continue;
    for (auto& g : lab.gates) {
      if (step_of_gate(g.id) != f.step) continue;
      g.status = f.state == StepFile::State::missing ? Status::not_submitted : Status::build_failed;
      g.message = g.message.empty() ? f.message : g.message + "\n" + f.message;
    }
  }
}

}  // namespace labgrade
