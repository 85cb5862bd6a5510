#include "release.h"

#include <sys/stat.h>
#include <toml++/toml.h>

#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "labkit/rubric.h"

namespace labgrade {

namespace {

bool is_header(const std::string& line) {
  std::string t = trim(line);
  return !t.empty() && t[0] == '[';
}
bool is_gate_header(const std::string& line) {
  static const std::regex re(R"(^\s*\[\[\s*gate\s*\]\])");
  return std::regex_search(line, re);
}
bool is_comment_or_blank(const std::string& line) {
  std::string t = trim(line);
  return t.empty() || t[0] == '#';
}

std::set<std::string> visible_gate_ids(const labkit::Rubric& r) {
  std::set<std::string> ids;
  for (const auto& g : r.gates)
    if (!g.hidden) ids.insert(g.id);
  return ids;
}

// The files of the repository: git's view (tracked, and untracked unless ignored) when it is a git work tree,
// else a walk that skips what .gitignore lists for this project.
std::vector<fs::path> repository_files(const fs::path& root) {
  std::vector<fs::path> files;
  auto r =
      run_command({"git", "-C", root.string(), "ls-files", "-z", "--cached", "--others", "--exclude-standard"}, 60);
  if (r.exit_code == 0) {
    for (const auto& f : split(r.output, '\0'))
      if (!f.empty() && fs::exists(root / f)) files.emplace_back(f);
    return files;
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->is_directory(ec) && (starts_with(name, "build") || name == ".git" || name == ".deps" || name == ".cache" ||
                                 name == "out" || starts_with(name, "grade-out") || name == "__pycache__")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) || it->is_symlink(ec)) files.push_back(it->path().lexically_relative(root));
  }
  return files;
}

bool excluded(const fs::path& rel) {
  std::vector<std::string> parts;
  for (const auto& p : rel) parts.push_back(p.string());
  if (parts.empty()) return true;
  if (parts[0] == "solutions") return true;
  if (parts.size() >= 4 && parts[0] == "labs" && parts[2] == "tests" && parts[3] == "hidden") return true;
  if (parts.size() >= 3 && parts[0] == "grader" && parts[1] == "fixtures" && parts[2] == "planted") return true;
  return false;
}

}  // namespace

std::string strip_hidden_gates(const std::string& text, const std::string& source, int* dropped) {
  labkit::Rubric original = labkit::parse_rubric(text, source);
  auto lines = split_lines(text);

  // Blocks: one per table header, from the comment lines right above it (they describe it) to the next block.
  struct Block {
    std::size_t begin, end;
    bool gate;
  };
  std::vector<std::size_t> headers;
  bool in_multiline = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!in_multiline && is_header(lines[i])) headers.push_back(i);
    for (const char* q : {"\"\"\"", "'''"}) {
      std::size_t n = 0;
      for (std::size_t p = lines[i].find(q); p != std::string::npos; p = lines[i].find(q, p + 3)) ++n;
      if (n % 2) in_multiline = !in_multiline;
    }
  }
  std::vector<std::size_t> starts;
  for (std::size_t h = 0; h < headers.size(); ++h) {
    std::size_t s = headers[h], floor = h ? headers[h - 1] + 1 : 0;
    while (s > floor && is_comment_or_blank(lines[s - 1]) && !trim(lines[s - 1]).empty()) --s;
    starts.push_back(s);
  }
  std::vector<Block> blocks;
  blocks.push_back({0, headers.empty() ? lines.size() : starts[0], false});  // the preamble
  for (std::size_t h = 0; h < headers.size(); ++h)
    blocks.push_back(
        {starts[h], h + 1 < headers.size() ? starts[h + 1] : lines.size(), is_gate_header(lines[headers[h]])});

  std::string out;
  int n_dropped = 0;
  for (const auto& b : blocks) {
    std::string chunk;
    for (std::size_t i = b.begin; i < b.end; ++i) chunk += lines[i] + "\n";
    if (b.gate) {
      bool hidden = false;
      try {
        auto t = toml::parse(chunk);
        if (auto* arr = t["gate"].as_array(); arr && !arr->empty())
          if (auto* g = arr->get(0)->as_table()) hidden = (*g)["hidden"].value_or(false);
      } catch (const toml::parse_error&) {
        hidden = false;  // checked as a whole below
      }
      if (hidden) {
        ++n_dropped;
        continue;
      }
    }
    out += chunk;
  }

  // The leaderboard may not name a gate the release drops.
  if (!original.leaderboard_gate.empty()) {
    const auto* g = original.find(original.leaderboard_gate);
    if (g && g->hidden) throw UserError(source + ": [leaderboard] names the hidden gate " + g->id);
  }
  labkit::Rubric stripped;
  try {
    stripped = labkit::parse_rubric(out, source + " (release)");
  } catch (const labkit::RubricError& e) {
    throw UserError(std::string("the rubric without hidden gates does not parse: ") + e.what());
  }
  if (visible_gate_ids(stripped) != visible_gate_ids(original) ||
      stripped.gates.size() != visible_gate_ids(original).size())
    throw UserError(source + ": removing the hidden gates changed the visible ones; edit the rubric by hand");
  if (dropped) *dropped = n_dropped;
  return out;
}

int release_main(const ReleaseOptions& opts) {
  fs::path root = opts.root;
  if (root.empty()) {
    auto found = find_repo_root(fs::current_path());
    if (!found) found = find_repo_root(self_exe().parent_path());
    if (!found) throw UserError("run labgrade release inside the lab workbook");
    root = *found;
  }
  root = fs::canonical(root);
  fs::path out = fs::absolute(opts.out).lexically_normal();
  if (out == root || starts_with(out.string(), (root / "").string()))
    throw UserError("the release folder must be outside the repository (" + root.string() + ")");
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    if (!opts.force) throw UserError(out.string() + " exists and is not empty (--force replaces it)");
    fs::remove_all(out);
  }
  fs::create_directories(out);

  std::size_t copied = 0, skipped = 0;
  std::vector<std::string> report;
  for (const auto& rel : repository_files(root)) {
    if (excluded(rel)) {
      ++skipped;
      continue;
    }
    fs::path from = root / rel, to = out / rel;
    fs::create_directories(to.parent_path());
    bool is_rubric = rel.filename() == "rubric.toml" && !rel.empty() && rel.begin()->string() == "labs";
    if (is_rubric) {
      int dropped = 0;
      std::string text = strip_hidden_gates(read_file(from), rel.string(), &dropped);
      write_file_atomic(to, text);
      if (dropped) report.push_back(rel.string() + ": " + std::to_string(dropped) + " hidden gate(s) removed");
    } else if (fs::is_symlink(from, ec)) {
      fs::copy_symlink(from, to, ec);
    } else {
      fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    }
    ++copied;
  }
  std::cout << "labgrade release: " << copied << " files to " << out.string() << " (" << skipped
            << " left out: solutions, hidden tests, planted fixtures)\n";
  for (const auto& r : report) std::cout << "  " << r << "\n";
  std::cout << "check it: cd " << shell_quote(out.string()) << " && cmake --preset ci && cmake --build --preset ci\n";
  return 0;
}

}  // namespace labgrade
