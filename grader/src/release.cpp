#include "release.h"

#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include "labkit/rubric.h"

namespace labgrade {

namespace {

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
      if (!f.empty() && (fs::exists(root / f) || fs::is_symlink(root / f))) files.emplace_back(f);  // links: check_link
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

bool excluded(const fs::path& rel);

// A link the release would copy. One in a lab's student/ folder (or that folder itself) becomes its target's
// contents in .skeleton/ (a link to a solution would ship the solution). Any other must be relative and lead, as
// written, to a file the release keeps: an absolute link, or one that leaves the tree, would point the students at
// the instructor's copy; one into solutions/ or hidden tests, or one that points at nothing, would dangle. Checked
// for every file before anything is written. Throws UserError.
void check_link(const fs::path& root, const fs::path& rel) {
  const fs::path from = root / rel;
  std::error_code ec;
  if (!fs::is_symlink(from, ec)) return;
  if (std::vector<fs::path> p(rel.begin(), rel.end()); p.size() >= 3 && p[0] == "labs" && p[2] == "student")
    throw UserError(rel.string() + " is a symbolic link: a release copies each file of a lab's student/ folder into "
                                   ".skeleton/ as what it points to; put the file itself there");
  const fs::path text = fs::read_symlink(from, ec);
  if (ec || text.is_absolute())
    throw UserError(rel.string() + " is a symbolic link to an absolute path (" + text.string() +
                    "): in a release it would point at this machine's files; make it relative");
  const fs::path inside = (rel.parent_path() / text).lexically_normal();
  if (inside.empty() || *inside.begin() == "..")
    throw UserError(rel.string() + " is a symbolic link out of the workbook (" + text.string() +
                    "): a release would carry it to a file the students do not have");
  if (excluded(inside))
    throw UserError(rel.string() + " is a symbolic link to " + inside.string() +
                    ", which a release leaves out (solutions, hidden tests, planted fixtures)");
  if (!fs::exists(from, ec))
    throw UserError(rel.string() + " is a symbolic link to " + inside.string() + ", which does not exist");
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

  // Where the tables start, as toml++ reads the file (so multi-line strings, comments and quoting are TOML's
  // business, not this function's): every top-level [table] and every [[array]] element. A hidden gate's block
  // runs from its [[gate]] header (with the comment lines right above it, which describe it) to the next such
  // start; its sub-tables ([gate.x]) go with it.
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw UserError(source + ": " + std::string(e.description()));  // not reached: parse_rubric parsed it
  }
  std::vector<std::size_t> headers;  // 0-based line numbers
  std::set<std::size_t> hidden_headers;
  auto line_of = [](const toml::node& n) { return static_cast<std::size_t>(n.source().begin.line) - 1; };
  for (auto&& [key, node] : doc) {
    if (auto* tbl = node.as_table(); tbl && !tbl->is_inline()) headers.push_back(line_of(node));
    if (auto* arr = node.as_array(); arr && arr->is_array_of_tables())
      for (auto& el : *arr) {
        headers.push_back(line_of(el));
        if (key.str() == "gate" && (*el.as_table())["hidden"].value_or(false)) hidden_headers.insert(line_of(el));
      }
  }
  std::sort(headers.begin(), headers.end());
  std::vector<std::size_t> starts;  // each header's block start: the comment lines right above it belong to it
  for (std::size_t h = 0; h < headers.size(); ++h) {
    std::size_t s = headers[h], floor = h ? headers[h - 1] + 1 : 0;
    while (s > floor && is_comment_or_blank(lines[s - 1]) && !trim(lines[s - 1]).empty()) --s;
    starts.push_back(s);
  }
  std::vector<bool> keep(lines.size(), true);
  int n_dropped = 0;
  for (std::size_t h = 0; h < headers.size(); ++h) {
    if (!hidden_headers.count(headers[h])) continue;
    std::size_t end = h + 1 < headers.size() ? starts[h + 1] : lines.size();
    for (std::size_t i = starts[h]; i < end; ++i) keep[i] = false;
    ++n_dropped;
  }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (keep[i]) out += lines[i] + "\n";

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
  const std::vector<fs::path> files = repository_files(root);
  for (const auto& rel : files)
    if (!excluded(rel)) check_link(root, rel);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    if (!opts.force) throw UserError(out.string() + " exists and is not empty (--force replaces it)");
    fs::remove_all(out);
  }
  fs::create_directories(out);

  std::size_t copied = 0, skipped = 0, skeletons = 0;
  std::vector<std::string> report;
  for (const auto& rel : files) {
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
    // labs/NN_x/student/F also goes to labs/NN_x/.skeleton/F: the pristine skeleton the build compiles and the
    // grader links in place of a step of the student's that does not compile (the student edits student/ itself).
    if (std::vector<fs::path> p(rel.begin(), rel.end()); p.size() >= 4 && p[0] == "labs" && p[2] == "student") {
      fs::path skel = out / "labs" / p[1] / ".skeleton" / rel.lexically_relative(fs::path("labs") / p[1] / "student");
      fs::create_directories(skel.parent_path());
      fs::copy_file(from, skel, fs::copy_options::overwrite_existing);
      if (!fs::exists(skel.parent_path() / "README.txt"))
        write_file_atomic(skel.parent_path() / "README.txt",
                          "The skeleton of this lab as released: do not edit. When one of your step files does not\n"
                          "compile, labgrade links the file of the same name from here in its place, so that only\n"
                          "that step loses its points. Your work goes in ../student/.\n");
      ++skeletons;
    }
  }
  std::cout << "labgrade release: " << copied << " files to " << out.string() << " (" << skipped
            << " left out: solutions, hidden tests, planted fixtures); " << skeletons
            << " skeleton files copied to labs/*/.skeleton/\n";
  for (const auto& r : report) std::cout << "  " << r << "\n";
  std::cout << "check it: cd " << shell_quote(out.string()) << " && cmake --preset ci && cmake --build --preset ci\n";
  return 0;
}

}  // namespace labgrade
