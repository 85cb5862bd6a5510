// What a submission's gate processes have written to disk, for the batch's limit on it (`labgrade batch
// --disk-gib`), and the removal of what a slot's uid left in the shared temporary folders.
//
// RLIMIT_FSIZE bounds each file a gate process writes, not how many it writes: without this watch, a submission
// could fill the disk that every other student's compiles, logs and results share, for as long as its lab's time
// limit lets it run. The runner measures the lab's writable folder and, under a dedicated uid, what that uid owns
// in /tmp, /var/tmp and /dev/shm (which outlive the uid's processes) about once a second, and ends the lab when
// they pass the limit.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace labgrade {

struct DiskUse {
  std::uintmax_t bytes = 0;    // space allocated to the files (st_blocks), links and folders included
  std::uintmax_t entries = 0;  // files, links and folders counted
  bool stopped = false;        // the walk stopped at max_entries (or a folder nested too deep): more than counted
};

// Everything under `dir` (dir itself not counted), without following links; "" or a missing folder: nothing.
DiskUse disk_use(const std::filesystem::path& dir, std::uintmax_t max_entries);

// What `uid` owns directly in each of `dirs`, with everything inside the folders it owns (where a process of that
// uid can write); entries of other owners are neither counted nor entered.
DiskUse disk_use_of_uid(const std::vector<std::filesystem::path>& dirs, unsigned uid, std::uintmax_t max_entries);

// The world-writable folders a process of a dedicated uid can leave files in outside the sandbox's own.
const std::vector<std::filesystem::path>& shared_temp_dirs();

// Removes everything in `dir`, then makes the folders named in `keep` again, empty; never following a link, as the
// calling process's uid (read-only folders of its own are made writable first, chains of any depth are removed
// level by level), and within a few seconds' work. Returns how many entries it could not remove. For a lab's
// working folder after its gate binary filled it (runner.cpp).
std::size_t clear_folder(const std::filesystem::path& dir, const std::vector<std::string>& keep);

// Removes what the calling process's uid owns directly in each of `dirs`, folders with their contents (as
// clear_folder removes them), never following a link. For the child that sweeps a slot's uid (sandbox_process.cpp),
// running as that uid: it can remove nothing the uid could not. Returns how many entries it could not remove.
std::size_t remove_own_entries(const std::vector<std::filesystem::path>& dirs);

}  // namespace labgrade
