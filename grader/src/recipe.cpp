#include "recipe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

namespace labgrade {

std::vector<fs::path> Recipe::referenced_paths() const {
  std::set<fs::path> out;
  auto consider = [&](std::string s) {
    for (const char* flag : {"-I", "-L", "-isystem=", "-isystem", "-Wl,-rpath,", "@"})
      if (starts_with(s, flag)) s = s.substr(std::string(flag).size());
    if (s.empty() || s[0] != '/') return;
    fs::path p(s);
    std::error_code ec;
    out.insert(fs::is_directory(p, ec) ? p : p.parent_path());
  };
  for (const auto& argv : compile)
    for (std::size_t i = 0; i < argv.size(); ++i) {
      consider(argv[i]);
      // The include folders CMake writes into an options file are the compile's too: the batch masks the hidden
      // tests below every one of them.
      std::string file = argv[i] == "--options-file" && i + 1 < argv.size() ? argv[i + 1]
                         : starts_with(argv[i], "@")                      ? argv[i].substr(1)
                                                                          : "";
      std::error_code ec;
      if (!file.empty() && fs::is_regular_file(file, ec))
        for (const auto& s : shell_split(read_file(file))) consider(s);
    }
  for (const auto* list : {&gate_objects, &skeleton_objects, &link, &link_libraries})
    for (const auto& s : *list) consider(s);
  out.insert(lab_dir);
  out.insert(rubric.parent_path());
  return {out.begin(), out.end()};
}

std::vector<std::string> Recipe::compile_argv(std::size_t k, const fs::path& source, const fs::path& object) const {
  std::vector<std::string> argv = compile.at(k);
  for (auto& a : argv) {
    if (a == kSourcePlaceholder) a = source.string();
    if (a == kObjectPlaceholder) a = object.string();
  }
  return argv;
}

std::vector<std::string> shell_split(const std::string& command) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == '\'') {
      auto end = command.find('\'', i + 1);
      if (end == std::string::npos) throw UserError("unbalanced ' in a compile command: " + command);
      cur += command.substr(i + 1, end - i - 1);
      i = end;
      have = true;
    } else if (c == '"') {
      for (++i; i < command.size() && command[i] != '"'; ++i) {
        if (command[i] == '\\' && i + 1 < command.size() && std::strchr("\"\\$`", command[i + 1])) ++i;
        cur += command[i];
      }
      if (i >= command.size()) throw UserError("unbalanced \" in a compile command: " + command);
      have = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      cur += command[++i];
      have = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have) out.push_back(cur);
  return out;
}

std::vector<std::string> compile_command_for(const std::string& compile_commands_json, const fs::path& file,
                                             const std::string& where) {
  nlohmann::json db;
  try {
    db = nlohmann::json::parse(compile_commands_json);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": not a compile_commands.json (" + e.what() + ")");
  }
  const std::string wanted = file.lexically_normal().string();
  for (const auto& e : db) {
    if (!e.is_object() || !e.contains("file") || e["file"].get<std::string>() != wanted) continue;
    fs::path dir = e.value("directory", std::string());
    std::vector<std::string> in =
        e.contains("arguments") ? e["arguments"].get<std::vector<std::string>>() : shell_split(e.value("command", ""));
    std::vector<std::string> out;
    auto absolute = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (dir / p).string(); };
    bool have_source = false, have_object = false;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::string& a = in[i];
      if (a == "-c" && i + 1 < in.size()) {  // the input: a placeholder (so is the output below)
        out.insert(out.end(), {"-c", Recipe::kSourcePlaceholder});
        ++i;
        have_source = true;
      } else if (a == "-o" && i + 1 < in.size()) {
        out.insert(out.end(), {"-o", Recipe::kObjectPlaceholder});
        ++i;
        have_object = true;
      } else if ((a == "-MF" || a == "-MT" || a == "-MQ") && i + 1 < in.size()) {
        ++i;  // the build's dependency files: nothing the grader needs, and they would be written into the build
      } else if (a == "-MD" || a == "-MMD") {
      } else if (a == "--options-file" && i + 1 < in.size()) {
        out.insert(out.end(), {a, absolute(in[++i])});
      } else if (starts_with(a, "@")) {
        out.push_back("@" + absolute(a.substr(1)));
      } else {
        out.push_back(a);
      }
    }
    if (!have_source || !have_object || out.empty())
      throw UserError(where + ": the compile command of " + wanted + " has no -c/-o");
    return out;
  }
  throw UserError(where + ": compile_commands.json has no entry for " + wanted +
                  " (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON, as the presets do, and build once)");
}

Recipe load_recipe(const fs::path& json_file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(json_file));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(json_file.string() + ": not a grading recipe (" + e.what() + ")");
  }
  Recipe r;
  r.file = json_file;
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto list = [&](const char* k) {
    return j.contains(k) && j[k].is_array() ? j[k].get<std::vector<std::string>>() : std::vector<std::string>{};
  };
  r.lab = str("lab");
  r.name = str("name");
  r.lab_dir = str("lab_dir");
  r.rubric = str("rubric");
  r.student_sources = list("student_sources");
  r.gate_objects = list("gate_objects");
  r.skeleton_objects = list("skeleton_objects");
  r.skeleton_dir = str("skeleton_dir");
  r.grading_target = str("grading_target");
  r.link = list("link");
  r.link_libraries = list("link_libraries");
  r.launcher = list("launcher");
  r.student_gates = str("student_gates");
  r.solution_gates = str("solution_gates");
  r.student_target = str("student_target");
  r.solution_target = str("solution_target");
  const std::string db = str("compile_commands"), source_dir = str("compile_source_dir");
  if (r.lab.empty() || r.name.empty() || r.rubric.empty() || db.empty() || source_dir.empty() || r.link.empty())
    throw UserError(json_file.string() +
                    ": incomplete grading recipe (needs lab, name, rubric, compile_commands, compile_source_dir, link)");
  for (const auto& s : r.student_sources)
    if (s.empty() || s[0] == '/' || contains(s, ".."))
      throw UserError(json_file.string() + ": student source `" + s + "` must be a plain relative path");
  // The skeleton object of each source, matched by name (CMake's object names end in <source>.o): never a
  // file the submission names.
  std::vector<std::string> skeletons;
  for (const auto& s : r.student_sources) {
    auto it = std::find_if(r.skeleton_objects.begin(), r.skeleton_objects.end(),
                           [&](const std::string& o) { return ends_with(o, "/" + s + ".o"); });
    if (it == r.skeleton_objects.end())
      throw UserError(json_file.string() + ": no skeleton object for " + s + " (rebuild the lab's grading target)");
    skeletons.push_back(*it);
  }
  r.skeleton_objects = skeletons;
  std::error_code ec;
  if (fs::exists(db, ec)) {
    const std::string text = read_file(db);
    for (const auto& s : r.student_sources)
      r.compile.push_back(compile_command_for(text, fs::path(source_dir) / s, json_file.string()));
  } else {
    throw UserError(json_file.string() + ": " + db + " does not exist (configure the build: cmake --preset ...)");
  }
  return r;
}

std::vector<Recipe> load_recipes(const std::vector<fs::path>& grading_dirs) {
  std::vector<Recipe> out;
  std::map<std::string, fs::path> seen;
  for (const auto& dir : grading_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      auto name = e.path().filename().string();
      if (starts_with(name, "lab") && ends_with(name, ".json")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      Recipe r = load_recipe(f);
      auto [it, fresh] = seen.emplace(r.lab, f);
      if (!fresh) throw UserError("lab " + r.lab + " has two recipes: " + it->second.string() + " and " + f.string());
      out.push_back(std::move(r));
    }
  }
  std::sort(out.begin(), out.end(), [](const Recipe& a, const Recipe& b) { return a.lab < b.lab; });
  return out;
}

std::vector<Recipe> select_labs(const std::vector<Recipe>& all, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return all;
  std::vector<Recipe> out;
  for (const auto& w : wanted) {
    const Recipe* hit = nullptr;
    for (const auto& r : all) {
      std::string topic = r.name.size() > 3 ? r.name.substr(3) : r.name;
      bool numeric = !w.empty() && std::all_of(w.begin(), w.end(), ::isdigit);
      if (w == r.lab || w == r.name || w == topic || (numeric && std::stoi(w) == std::stoi(r.lab))) hit = &r;
    }
    if (!hit) {
      std::string known;
      for (const auto& r : all) known += " " + r.name;
      throw UserError("no lab `" + w + "` (known:" + (known.empty() ? " none" : known) + ")");
    }
    if (std::none_of(out.begin(), out.end(), [&](const Recipe& r) { return r.lab == hit->lab; })) out.push_back(*hit);
  }
  return out;
}

std::string cmake_cache_value(const fs::path& build_dir, const std::string& name) {
  std::ifstream in(build_dir / "CMakeCache.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (!starts_with(line, name + ":") && !starts_with(line, name + "=")) continue;
    auto eq = line.find('=');
    if (eq != std::string::npos) return line.substr(eq + 1);
  }
  return "";
}

namespace {

// A lab folder with a CMakeLists.txt but no recipe: the build was configured before the lab existed (the
// top-level CMakeLists globs labs/ at configure time only).
bool recipes_outdated(const fs::path& root, const fs::path& build_dir) {
  std::error_code ec;
  const fs::path grading = build_dir / "grading";
  auto only = split(cmake_cache_value(build_dir, "LABS_ONLY"), ';');  // the build's LABS_ONLY selection
  only.erase(std::remove(only.begin(), only.end(), std::string()), only.end());
  for (const auto& e : fs::directory_iterator(root / "labs", ec)) {
    auto name = e.path().filename().string();
    if (name.size() < 3 || !isdigit(name[0]) || !isdigit(name[1]) || name[2] != '_') continue;
    if (!fs::exists(e.path() / "CMakeLists.txt", ec)) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), name.substr(0, 2)) == only.end()) continue;
    if (!fs::exists(grading / ("lab" + name.substr(0, 2) + ".json"), ec)) return true;
  }
  return false;
}

}  // namespace

Build prepare_build(const BuildOptions& opts) {
  Build b;
  b.root = opts.root;
  b.jobs = opts.jobs > 0 ? opts.jobs : 2;
  b.preset = opts.preset.empty() ? (opts.have_gpu ? "gpu" : "ci") : opts.preset;
  b.dir = opts.build_dir.empty() ? opts.root / "build" / b.preset : fs::absolute(opts.build_dir);
  b.grading_dirs = opts.grading_dirs.empty() ? std::vector<fs::path>{b.dir / "grading"} : opts.grading_dirs;
  if (opts.no_build) {
    if (!fs::exists(b.dir / "CMakeCache.txt") && opts.grading_dirs.empty())
      throw UserError("--no-build: " + b.dir.string() + " is not a configured build");
    return b;
  }
  std::error_code ec;
  if (!fs::exists(b.dir / "CMakeCache.txt", ec)) {
    std::cerr << "labgrade: configuring " << b.dir.string() << " (cmake --preset " << b.preset << ")\n";
    std::vector<std::string> argv = {"cmake", "--preset", b.preset};
    if (!opts.build_dir.empty()) argv.insert(argv.end(), {"-B", b.dir.string()});
    if (run_interactive(argv, b.root) != 0)
      throw UserError("configuring the build failed (cmake --preset " + b.preset +
                      "); run `labgrade doctor` to check the toolchain");
  } else if (recipes_outdated(b.root, b.dir)) {
    std::cerr << "labgrade: a lab has no grading recipe yet: re-running cmake in " << b.dir.string() << "\n";
    if (run_interactive({"cmake", b.dir.string()}, b.root) != 0) throw UserError("re-configuring the build failed");
  }
  return b;
}

BuildOutcome build_target(const Build& b, const std::string& target) {
  BuildOutcome out;
  auto start = std::chrono::steady_clock::now();
  auto r =
      run_command({"cmake", "--build", b.dir.string(), "--target", target, "-j", std::to_string(b.jobs)}, 0, b.root);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.ok = r.exit_code == 0;
  if (!out.ok) out.diagnostics = summarize_build_errors(r.output, {{(b.root / "").string(), ""}});
  return out;
}

std::string summarize_build_errors(const std::string& raw,
                                   const std::vector<std::pair<std::string, std::string>>& path_rewrites) {
  std::string output = sanitize_utf8(raw);
  for (const auto& [from, to] : path_rewrites) output = replace_all(output, from, to);
  auto lines = split_lines(output);

  static const std::regex undefined(R"(undefined reference to [`']([^']+)')");
  std::vector<std::string> missing;
  for (const auto& l : lines) {
    std::smatch m;
    if (std::regex_search(l, m, undefined) && std::find(missing.begin(), missing.end(), m[1].str()) == missing.end())
      missing.push_back(m[1].str());
  }
  std::vector<std::string> picked;
  auto is_error = [](const std::string& l) {
    return contains(l, "error") || contains(l, "Error") || contains(l, "undefined reference") ||
           contains(l, "multiple definition") || contains(l, "fatal");
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    if (starts_with(l, "ninja:") || starts_with(l, "gmake") || starts_with(l, "make[") || starts_with(l, "FAILED:") ||
        contains(l, "collect2: error: ld returned") || contains(l, "errors detected in the compilation"))
      continue;
    if (!is_error(l)) continue;
    picked.push_back(l);
    // nvcc and gcc follow an error with the source line and a caret: keep them.
    for (std::size_t k = i + 1; k < lines.size() && k <= i + 2 && !is_error(lines[k]); ++k)
      if (!trim(lines[k]).empty()) picked.push_back(lines[k]);
  }
  std::string text;
  if (!missing.empty()) {
    text = "link failed: missing function" + std::string(missing.size() > 1 ? "s" : "") +
           " (declared but not defined in the submission):";
    for (const auto& m : missing) text += "\n  " + m;
    text += "\n";
  }
  if (picked.empty()) {
    std::size_t from = lines.size() > 20 ? lines.size() - 20 : 0;
    picked.assign(lines.begin() + static_cast<std::ptrdiff_t>(from), lines.end());
  }
  text += join(picked, "\n");
  return trim_message(text, 40, 6000);
}

}  // namespace labgrade
