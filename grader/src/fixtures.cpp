#include "fixtures.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <optional>
#include <set>

namespace labgrade {

namespace {

std::vector<Status> statuses(const toml::node& n, const std::string& where) {
  std::vector<Status> out;
  auto one = [&](const std::string& s) {
    Status st = status_from_string(s);
    if (to_string(st) != s) throw UserError(where + ": unknown status `" + s + "`");
    out.push_back(st);
  };
  if (auto s = n.value<std::string>())
    one(*s);
  else if (auto* arr = n.as_array())
    for (auto& e : *arr)
      if (auto s2 = e.value<std::string>()) one(*s2);
  if (out.empty()) throw UserError(where + ": expected a status or a list of statuses");
  return out;
}

// A status named by an [expect] key whose value lists gate ids: fail = ["step3.correct"].
std::optional<Status> list_status(const std::string& key) {
  static const std::map<std::string, Status> names = {{"pass", Status::passed},
                                                      {"passed", Status::passed},
                                                      {"fail", Status::failed},
                                                      {"failed", Status::failed},
                                                      {"skip", Status::skipped},
                                                      {"skipped", Status::skipped},
                                                      {"crash", Status::crashed},
                                                      {"crashed", Status::crashed},
                                                      {"timeout", Status::timeout},
                                                      {"missing", Status::missing},
                                                      {"build_failed", Status::build_failed},
                                                      {"not_submitted", Status::not_submitted},
                                                      {"refused", Status::refused},
                                                      {"not_implemented", Status::not_implemented}};
  auto it = names.find(key);
  return it == names.end() ? std::nullopt : std::optional<Status>(it->second);
}

// Two spellings of one table: gate -> status(es) (`"step3.correct" = "failed"`, `"*" = "passed"`), and status ->
// gates (`fail = ["step3.correct", "step3.speed"]`, every other gate passes). `message = {gate = "text"}` inside
// it is the same as expect_message.
void read_status_table(const toml::table& t, std::map<std::string, std::vector<Status>>& into,
                       std::map<std::string, std::string>& messages, const std::string& where) {
  for (auto& [k, v] : t) {
    std::string key(k.str());
    if (key == "message") {
      if (auto* m = v.as_table())
        for (auto& [gate, text] : *m) messages[std::string(gate.str())] = text.value_or(std::string());
      continue;
    }
    auto st = list_status(key);
    if (st && v.is_array()) {
      for (auto& gate : *v.as_array())
        if (auto id = gate.value<std::string>()) into[*id] = {*st};
      continue;
    }
    into[key] = statuses(v, where + "." + key);
  }
}

void read_expectations(Fixture& f, const toml::table& t, const std::string& where) {
  if (auto lab = t["lab"].value<std::string>()) f.lab = *lab;
  f.description = t["description"].value_or(std::string());
  auto table = [&](const char* key, const toml::table& from) -> const toml::table* { return from[key].as_table(); };
  const toml::table* expect = table("expect", t);
  const toml::table* nogpu = table("expect_nogpu", t);
  const toml::table* message = table("expect_message", t);
  // `expect = {...}` written after a [[replace]] lands inside that table in TOML: accept it there too.
  if (auto* reps = t["replace"].as_array())
    for (auto& r : *reps)
      if (auto* rt = r.as_table()) {
        if (!expect) expect = table("expect", *rt);
        if (!nogpu) nogpu = table("expect_nogpu", *rt);
        if (!message) message = table("expect_message", *rt);
      }
  if (!expect) throw UserError(where + ": no [expect] table (e.g. fail = [\"step3.correct\"])");
  read_status_table(*expect, f.expect, f.expect_message, where + ": expect");
  if (nogpu) read_status_table(*nogpu, f.expect_nogpu, f.expect_message, where + ": expect_nogpu");
  if (message)
    for (auto& [k, v] : *message) f.expect_message[std::string(k.str())] = v.value_or(std::string());
}

// "labs/01_matmul/student/x.cu" -> "01_matmul"
std::string lab_of_path(const std::string& p) {
  auto parts = split(p, '/');
  return parts.size() >= 2 && parts[0] == "labs" ? parts[1] : "";
}

bool matches_lab(const LabResult& l, const std::string& lab) { return lab.empty() || l.lab == lab || l.name == lab; }

bool runs_without_gpu(const GateResult& g) { return g.kind == "cpu" || starts_with(g.id, "cpu."); }

std::string join_statuses(const std::vector<Status>& v) {
  std::vector<std::string> s;
  for (auto st : v) s.push_back(to_string(st));
  return join(s, "|");
}

}  // namespace

Fixture load_fixture(const fs::path& dir) {
  Fixture f;
  f.dir = dir;
  f.name = dir.filename().string();
  fs::path patch = dir / "patch.toml", expect = dir / "expect.toml";
  f.patch = fs::exists(patch);
  fs::path file = f.patch ? patch : expect;
  toml::table t;
  try {
    t = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    throw UserError(file.string() + ": " + std::string(e.description()));
  }
  if (f.patch) {
    auto* reps = t["replace"].as_array();
    if (!reps || reps->empty()) throw UserError(file.string() + ": no [[replace]] entries");
    for (auto& r : *reps) {
      auto* rt = r.as_table();
      if (!rt) continue;
      Replacement rep{(*rt)["file"].value_or(std::string()), (*rt)["from"].value_or(std::string()),
                      (*rt)["to"].value_or(std::string())};
      if (rep.file.empty() || rep.from.empty() || lab_of_path(rep.file).empty())
        throw UserError(file.string() + ": each [[replace]] needs file = \"labs/NN_x/student/F\" and a non-empty from");
      f.replacements.push_back(rep);
    }
    f.lab = lab_of_path(f.replacements.front().file);
  } else {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "labs", ec))
      if (e.is_directory()) f.lab = e.path().filename().string();
  }
  read_expectations(f, t, file.string());
  return f;
}

std::vector<Fixture> load_fixtures(const fs::path& dir) {
  std::vector<Fixture> out;
  std::function<void(const fs::path&, int)> walk = [&](const fs::path& d, int depth) {
    std::vector<fs::path> subdirs;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_directory()) subdirs.push_back(e.path());
    std::sort(subdirs.begin(), subdirs.end());
    for (const auto& s : subdirs) {
      if (fs::exists(s / "patch.toml") || fs::exists(s / "expect.toml")) {
        out.push_back(load_fixture(s));
        // planted/not_faster -> planted-not_faster: unique next to a top-level not_faster
        if (depth > 0) out.back().name = d.filename().string() + "-" + out.back().name;
      } else if (depth == 0)
        walk(s, 1);
    }
  };
  walk(dir, 0);
  std::set<std::string> names;
  for (const auto& f : out)
    if (!names.insert(f.name).second) throw UserError("two fixtures are named " + f.name);
  return out;
}

void materialise(const Fixture& f, const fs::path& dest, const std::vector<fs::path>& solution_roots) {
  fs::create_directories(dest);
  if (!f.patch) {
    for (const auto& e : fs::recursive_directory_iterator(f.dir)) {
      auto rel = e.path().lexically_relative(f.dir);
      if (rel == "expect.toml" || !e.is_regular_file()) continue;
      fs::create_directories((dest / rel).parent_path());
      fs::copy_file(e.path(), dest / rel, fs::copy_options::overwrite_existing);
    }
    return;
  }
  std::map<std::string, std::string> files;
  for (const auto& r : f.replacements) {
    if (!files.count(r.file)) {
      // labs/NN_x/student/F -> solutions/NN_x/F
      auto parts = split(r.file, '/');
      if (parts.size() < 4 || parts[2] != "student")
        throw UserError(f.name + ": " + r.file + " is not a labs/NN_x/student/ file");
      fs::path rel = fs::path("solutions") / parts[1];
      for (std::size_t i = 3; i < parts.size(); ++i) rel /= parts[i];
      std::optional<fs::path> base;
      for (const auto& root : solution_roots)
        if (fs::exists(root / rel)) base = root / rel;
      if (!base) throw UserError(f.name + ": no " + rel.string() + " to start from (is this a student release?)");
      // The lab's other files (its other steps) come from the reference solution unchanged: a fixture is the
      // solution with one bug, not a submission that lacks the steps it does not touch.
      fs::path sol_dir = *base;
      while (sol_dir.has_parent_path() && sol_dir.parent_path().filename() != "solutions") sol_dir = sol_dir.parent_path();
      for (const auto& e : fs::recursive_directory_iterator(sol_dir)) {
        if (!e.is_regular_file()) continue;
        std::string file = "labs/" + parts[1] + "/student/" + e.path().lexically_relative(sol_dir).string();
        if (!files.count(file)) files[file] = read_file(e.path());
      }
      files[r.file] = read_file(*base);
    }
    std::string& text = files[r.file];
    std::size_t count = 0, at = std::string::npos;
    for (std::size_t p = text.find(r.from); p != std::string::npos; p = text.find(r.from, p + 1)) {
      if (count == 0) at = p;
      ++count;
    }
    if (count != 1)
      throw UserError(f.name + ": `" + trim_message(r.from, 2, 120) + "` occurs " + std::to_string(count) +
                      " times in " + r.file + " (it must occur exactly once: the solution changed?)");
    text.replace(at, r.from.size(), r.to);
  }
  for (const auto& [file, text] : files) {
    fs::create_directories((dest / file).parent_path());
    write_file_atomic(dest / file, text);
  }
}

void materialise_solutions(const fs::path& dest, const std::vector<fs::path>& solution_roots) {
  for (const auto& root : solution_roots) {
    std::error_code ec;
    for (const auto& lab : fs::directory_iterator(root / "solutions", ec)) {
      if (!lab.is_directory()) continue;
      fs::path to = dest / "labs" / lab.path().filename() / "student";
      fs::create_directories(to);
      for (const auto& e : fs::recursive_directory_iterator(lab.path())) {
        if (!e.is_regular_file()) continue;
        auto rel = e.path().lexically_relative(lab.path());
        fs::create_directories((to / rel).parent_path());
        fs::copy_file(e.path(), to / rel, fs::copy_options::overwrite_existing);
      }
    }
  }
}

std::vector<Status> expected_statuses(const Fixture& f, const GateResult& g, bool have_gpu) {
  auto lookup = [&](const std::map<std::string, std::vector<Status>>& m) -> std::optional<std::vector<Status>> {
    if (auto it = m.find(g.id); it != m.end()) return it->second;
    if (auto it = m.find("*"); it != m.end()) return it->second;
    return std::nullopt;
  };
  auto base = lookup(f.expect).value_or(std::vector<Status>{Status::passed});
  if (have_gpu) return base;
  if (auto it = f.expect_nogpu.find(g.id); it != f.expect_nogpu.end()) return it->second;
  if (auto star = f.expect_nogpu.find("*"); star != f.expect_nogpu.end() && !f.expect.count(g.id)) return star->second;
  // A lab that never ran (no build, nothing submitted, a refused object) looks the same with or without a GPU.
  bool build_failure = std::any_of(base.begin(), base.end(), [](Status s) {
    return s == Status::build_failed || s == Status::not_submitted || s == Status::refused;
  });
  if (build_failure || runs_without_gpu(g)) return base;
  return {Status::skipped};
}

std::vector<FixtureCheck> check_fixtures(const fs::path& out, const std::vector<Fixture>& fixtures, bool have_gpu,
                                         const std::vector<std::string>& solution_students) {
  std::vector<FixtureCheck> checks;
  std::vector<std::pair<std::string, const Fixture*>> students;
  Fixture all_pass;
  all_pass.expect["*"] = {Status::passed};
  for (const auto& f : fixtures) students.emplace_back(f.name, &f);
  for (const auto& s : solution_students) students.emplace_back(s, &all_pass);
  for (const auto& [student, fixture] : students) {
    fs::path file = out / student / "result.json";
    if (!fs::exists(file)) {
      checks.push_back({student, fixture->lab, "*", "a result", "none", false,
                        fs::exists(out / student / "grader-error.txt")
                            ? trim(read_file(out / student / "grader-error.txt"))
                            : "no result.json"});
      continue;
    }
    SubmissionResult r = submission_from_json(nlohmann::json::parse(read_file(file)));
    bool any_lab = false;
    for (const auto& l : r.labs) {
      if (!matches_lab(l, fixture->lab)) continue;
      // The control group checks only the labs it submitted (every lab has a solution, but a lab folder without
      // one reports "not submitted").
      if (fixture == &all_pass && !l.gates.empty() && l.gates.front().status == Status::build_failed &&
          starts_with(l.gates.front().message, "not submitted"))
        continue;
      any_lab = true;
      for (const auto& g : l.gates) {
        auto want = expected_statuses(*fixture, g, have_gpu);
        FixtureCheck c{student, l.lab, g.id, join_statuses(want), to_string(g.status), false, ""};
        c.ok = std::find(want.begin(), want.end(), g.status) != want.end();
        // A multi-GPU gate on a machine (or a batch worker) with fewer GPUs says so and skips: not what the fixture
        // is about. (grader/tests/device_fixtures.sh gives one worker every GPU, so on two GPUs these gates run.)
        if (!c.ok && have_gpu && g.status == Status::skipped &&
            std::find(want.begin(), want.end(), Status::passed) != want.end() &&
            starts_with(g.message, "this gate needs") && contains(g.message, "GPU")) {
          c.ok = true;
          c.got += " (fewer GPUs)";
        }
        if (!c.ok) c.why = trim_message(g.message, 2, 200);
        auto m = fixture->expect_message.find(g.id);
        // A gate that did not run here (no GPU, or fewer GPUs than it needs: "failed|skipped" lets it skip) has no
        // diagnosis, and none of what the fixture is about.
        const bool ran = g.status != Status::skipped;
        if (c.ok && ran && m != fixture->expect_message.end() && !contains(g.message, m->second)) {
          c.ok = false;
          c.why = "the diagnosis does not mention `" + m->second + "`: " + trim_message(g.message, 2, 200);
        }
        checks.push_back(c);
      }
    }
    if (!any_lab)
      checks.push_back(
          {student, fixture->lab, "*", "results for lab " + fixture->lab, "none", false, "lab not graded"});
  }
  return checks;
}

bool print_checks(std::ostream& os, const std::vector<FixtureCheck>& checks) {
  std::size_t ws = 10, wg = 8;
  for (const auto& c : checks) {
    ws = std::max(ws, c.student.size());
    wg = std::max(wg, c.gate.size());
  }
  os << fmt::format("{:<{}}  {:<4} {:<{}}  {:<24} {:<16} {}\n", "student", ws, "lab", "gate", wg, "expected", "got",
                    "verdict");
  int pass = 0, fail = 0;
  for (const auto& c : checks) {
    os << fmt::format("{:<{}}  {:<4} {:<{}}  {:<24} {:<16} {}\n", c.student, ws, c.lab, c.gate, wg, c.expected, c.got,
                      c.ok ? "PASS" : "FAIL");
    if (!c.ok && !c.why.empty())
      for (const auto& l : split_lines(c.why)) os << "      " << l << "\n";
    (c.ok ? pass : fail)++;
  }
  os << fmt::format("\n{} PASS, {} FAIL\n", pass, fail);
  return fail == 0;
}

}  // namespace labgrade
