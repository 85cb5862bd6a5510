// The cg tool's memory of step 5's choice: one line "<GPU name>|2^<floor(log2 n)>\t<blocks per SM>" per GPU and size
// class in $XDG_CACHE_HOME/cuda-labs/lab07_blocks_per_sm.tsv (else ~/.cache/...), so that a second run skips the
// timing. Plain file handling, kept out of the kernel files; the gate cpu.tuning_cache tests it without a GPU.
// An unreadable, corrupt or unwritable cache is never an error: lookups find nothing, a failed store prints a note.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>  // getpid: a temporary file name per process

namespace lab07_cli {

// $XDG_CACHE_HOME/cuda-labs/lab07_blocks_per_sm.tsv, else ~/.cache/cuda-labs/...; "" when neither is known.
inline std::string default_tuning_cache() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg && *xdg) base = fs::path(xdg);
  else if (home && *home) base = fs::path(home) / ".cache";
  else return "";
  return (base / "cuda-labs" / "lab07_blocks_per_sm.tsv").string();
}

// Sizes within a factor of 2 share a choice: the key is the GPU's name and floor(log2 n).
inline std::string tuning_key(const std::string& gpu_name, int n) {
  int size_class = 0;
  while ((n >> size_class) > 1) ++size_class;
  return gpu_name + "|2^" + std::to_string(size_class);
}

// The count stored for `key`, or 0 when there is none (no file, no such line, a value that is not in [1, max_bps]).
inline int cache_lookup(const std::string& path, const std::string& key, int max_bps) {
  if (path.empty()) return 0;
  std::ifstream in(path);
  std::string line;
  while (in && std::getline(in, line)) {
    const auto tab = line.rfind('\t');
    if (tab == std::string::npos || tab != key.size() || line.compare(0, tab, key) != 0) continue;
    const std::string value = line.substr(tab + 1);
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (end != value.c_str() && *end == '\0' && v >= 1 && v <= max_bps) return static_cast<int>(v);
  }
  return 0;
}

// Stores `bps` for `key`, keeping every other line. Returns false (after a note on stderr) when it could not.
inline bool cache_store(const std::string& path, const std::string& key, int bps) {
  namespace fs = std::filesystem;
  if (path.empty()) return false;
  try {
    const fs::path p(path);
    if (p.has_parent_path()) fs::create_directories(p.parent_path());
    std::vector<std::string> keep;
    {
      std::ifstream in(path);
      std::string line;
      while (in && std::getline(in, line))
        if (!line.empty() && line.rfind(key + "\t", 0) != 0) keep.push_back(line);
    }
    // Write a temporary file and rename it over the cache: a reader never sees half a file.
    const std::string tmp = path + ".tmp" + std::to_string(static_cast<long long>(::getpid()));
    {
      std::ofstream out(tmp, std::ios::trunc);
      for (const auto& l : keep) out << l << "\n";
      out << key << "\t" << bps << "\n";
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    fs::rename(tmp, p);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "cg: note: the tuning cache " << path << " was not updated (" << e.what() << ")\n";
    return false;
  }
}

}  // namespace lab07_cli
