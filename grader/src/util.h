// Small helpers shared by every part of labgrade: files, strings, message trimming, running a command to
// completion. Nothing here knows about labs or rubrics.
#pragma once
#include <sched.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace labgrade {

namespace fs = std::filesystem;

// An error the user can act on (bad arguments, no build, no recipe): printed without a stack of context.
class UserError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string read_file(const fs::path& p);
// Reads at most max_bytes (from the end when tail is true): logs written by student code can be huge.
std::string read_file_limited(const fs::path& p, std::size_t max_bytes, bool tail);
// Writes to a temporary file in the same folder, fsyncs, then renames over p: a reader (or a restarted batch)
// sees the old file or the new one, never half of one.
void write_file_atomic(const fs::path& p, std::string_view content);
// Copies `from` to `to` (created with `mode`, through a temporary name renamed into place) with descriptors that
// are closed on exec: a process that another thread forks while the copy is written (a compiler) must not keep it
// open for writing, or executing the copy fails with ETXTBSY for as long as that process runs.
void copy_file_for_exec(const std::filesystem::path& from, const std::filesystem::path& to, unsigned mode = 0755);

std::string trim(std::string_view s);
std::vector<std::string> split_lines(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
bool contains(std::string_view s, std::string_view needle);
std::string replace_all(std::string s, std::string_view from, std::string_view to);
// Replaces bytes that are not valid UTF-8 (student output can be anything) so JSON and XML writers accept it:
// strictly, as nlohmann::json and XML parsers check it (overlong forms, UTF-16 surrogates, code points above
// U+10FFFF and cut-off sequences are invalid), each bad byte becoming U+FFFD. Control characters (C0 but tab and
// newline, DEL, and C1 such as the 8-bit CSI U+009B) become U+FFFD too; \r is dropped.
std::string sanitize_utf8(std::string_view s);
// The length of the valid UTF-8 sequence that starts at s[i] (0: none does) and, through cp, its code point.
std::size_t utf8_sequence(std::string_view s, std::size_t i, char32_t* cp = nullptr);
// A C0, DEL or C1 control character (a terminal acts on ESC, and on C1's CSI U+009B).
bool is_control(char32_t cp);
// Student text for a terminal: every control character (but newline and tab where keep_newlines) and every byte
// that is not valid UTF-8 written as \xNN, so that a folder name or a gate's message cannot clear the screen,
// set the window title or forge coloured lines.
std::string printable(std::string_view s, bool keep_newlines = false);
// A file name made of s: every byte but letters, digits, '.', '-' and '_' becomes '_' (tools downstream split at
// commas, spaces, colons...).
std::string safe_file_name(std::string_view s);
// At most max_lines lines and max_chars characters (bytes, cut at a UTF-8 character's start), with a note saying
// how much was cut.
std::string trim_message(std::string_view s, std::size_t max_lines, std::size_t max_chars);
std::string format_seconds(double s);  // "4.2 s", "3 min 05 s"
std::string format_points(double p);   // "10", "2.50"

// The folder holding labs/ and common/, walking up from start.
std::optional<fs::path> find_repo_root(fs::path start);

// The running labgrade executable (for the sandbox helper).
fs::path self_exe();

// Runs argv to completion (no sandbox: for cmake, nvcc --version, bwrap probes), capturing stdout+stderr.
// timeout_s > 0 counts the child tree's own progress (progress.h: time it spent waiting for a CPU that other
// processes held is forgiven), with ten times timeout_s on the clock as the last resort; it holds until the child is
// reaped (also when it closed its output and keeps running). Its process group is killed at the end, so nothing it
// started outlives it.
struct CommandResult {
  int exit_code = -1;  // -1: could not start or killed
  std::string output;
  bool timed_out = false;
};
// `cpus` (not empty): the CPUs the child and everything it starts may run on, as a sandboxed process's
// ResourceLimits::cpus (a batch's helper work beside a lab's gates stays off the workers' speed-gate CPUs).
// cpu_set_of: those CPUs as sched_setaffinity takes them (numbers outside 0..CPU_SETSIZE-1 left out). It allocates
// nothing, so a forked child of a threaded process may call it.
cpu_set_t cpu_set_of(const std::vector<int>& cpus);
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s = 0, const fs::path& cwd = {},
                          bool echo = false, const std::vector<int>& cpus = {});
// Like run_command but lets the child write straight to our terminal (cmake builds).
int run_interactive(const std::vector<std::string>& argv, const fs::path& cwd = {});

// Searches PATH (and the extra folders) for an executable.
std::optional<fs::path> find_program(const std::string& name, const std::vector<fs::path>& extra = {});

std::string shell_quote(const std::string& s);
std::string join(const std::vector<std::string>& v, std::string_view sep);

}  // namespace labgrade
