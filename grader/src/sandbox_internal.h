// What sandbox.cpp (what the sandbox is: the bubblewrap command, the uid slots, cgroup detection) shares with
// sandbox_process.cpp (one process in it: fork, limits, wait, kill). Internal to the grader: sandbox.h is the
// interface.
#pragma once

#include <string>
#include <vector>

#include "sandbox.h"

namespace labgrade::detail {

// The bwrap command line that runs spec.argv in the sandbox `s` (through the helper's __sandbox-exec when `uid`
// is a dedicated uid, >= 0).
std::vector<std::string> bwrap_command(const SandboxSettings& s, const ProcessSpec& spec, int uid);

// Writes `text` to an existing file (a cgroup control file): false when it cannot.
bool write_text(const fs::path& p, const std::string& text);

}  // namespace labgrade::detail
