#include "diskuse.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>

namespace labgrade {

namespace {

// Folders deeper than this are not entered (the walk says it stopped): a submission could nest folders until a
// recursive walk ran out of stack.
constexpr int kMaxDepth = 64;

// Opens the folder `name` in `parent` (AT_FDCWD: a path) without following a link at its last component.
int open_dir(int parent, const char* name) {
  return ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Makes the folder `name` in `parent` its owner's to change (0700), never through a link: the folder is opened
// with O_PATH and O_NOFOLLOW (a link there fails with ENOTDIR) and changed through /proc/self/fd, which names that
// inode and no path. The grader can run this as root (a batch whose submissions run as root), beside a process of
// the submission that could swap the folder for a link to /etc.
void make_writable(int parent, const char* name) {
  const int fd = ::openat(parent, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ::chmod(proc.c_str(), 0700);
  ::close(fd);
}

void add(DiskUse& use, const struct stat& st) {
  use.bytes += static_cast<std::uintmax_t>(st.st_blocks) * 512u;
  ++use.entries;
}

// Calls fn(name) for each entry of the open folder `d` but "." and "..", until fn returns false.
template <class Fn>
void each_entry(DIR* d, Fn&& fn) {
  while (struct dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..") && !fn(e->d_name)) break;
}

// Counts what is in the open folder `fd` (closed here): at this level only the entries of `owner` where it is not
// -1, below it everything. Entries are looked at with fstatat(AT_SYMLINK_NOFOLLOW) and folders entered with
// O_NOFOLLOW: a link is counted as itself, never followed, whatever it points to.
void walk(int fd, int depth, std::uintmax_t max_entries, DiskUse& use, long long owner = -1) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  each_entry(d, [&](const char* name) {
    if (use.entries >= max_entries) {
      use.stopped = true;
      return false;
    }
    struct stat st;
    if (::fstatat(::dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {  // gone meanwhile: still an entry, so that
      ++use.entries;  // a folder whose files come and go as it is read still ends the walk at max_entries
      return true;
    }
    if (owner >= 0 && st.st_uid != static_cast<uid_t>(owner)) return true;
    add(use, st);
    if (!S_ISDIR(st.st_mode)) return true;
    if (depth >= kMaxDepth) {
      use.stopped = true;
      return true;
    }
    const int sub = open_dir(::dirfd(d), name);
    if (sub >= 0) walk(sub, depth + 1, max_entries, use);
    return !use.stopped;
  });
  ::closedir(d);
}

// Empties the open folder `fd` (left open), as the caller's uid and within `budget` entries looked at: files and
// links are unlinked, folders made the owner's to change (a submission can leave one read-only) and removed, and
// a folder that is not empty has its entries moved up into `fd` under fresh names first, then goes in the next
// pass. A chain of folders of any depth is so removed level by level, with two descriptors open. Returns how many
// entries were left.
std::size_t empty_flat(int fd, std::size_t& budget) {
  unsigned long fresh = 0;
  for (;;) {
    const int copy = ::dup(fd);
    DIR* d = copy >= 0 ? ::fdopendir(copy) : nullptr;
    if (!d) {
      if (copy >= 0) ::close(copy);
      return 1;
    }
    ::rewinddir(d);
    std::size_t left = 0;
    bool progress = false;
    while (struct dirent* e = ::readdir(d)) {
      if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
      if (budget == 0) {
        ::closedir(d);
        return left + 1;
      }
      --budget;
      struct stat st;
      if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISDIR(st.st_mode)) {
        if (::unlinkat(fd, e->d_name, 0) == 0) progress = true;
        else ++left;
        continue;
      }
      if (::unlinkat(fd, e->d_name, AT_REMOVEDIR) == 0) {
        progress = true;
        continue;
      }
      ++left;
      // Not empty (or not ours to change yet): made writable and searchable, its entries moved up here.
      make_writable(fd, e->d_name);
      const int sub = open_dir(fd, e->d_name);
      if (sub < 0) continue;
      if (DIR* sd = ::fdopendir(sub)) {
        while (struct dirent* c = ::readdir(sd)) {
          if (!std::strcmp(c->d_name, ".") || !std::strcmp(c->d_name, "..")) continue;
          if (budget == 0) break;
          --budget;
          const std::string to = ".labgrade-up-" + std::to_string(++fresh);
          // A folder moves only if it is writable (its ".." changes with it).
          struct stat cs;
          if (::fstatat(sub, c->d_name, &cs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(cs.st_mode))
            make_writable(sub, c->d_name);
          if (::renameat(sub, c->d_name, fd, to.c_str()) == 0) progress = true;
        }
        ::closedir(sd);
      } else {
        ::close(sub);
      }
    }
    ::closedir(d);
    if (left == 0) return 0;
    if (!progress) return left;
  }
}

// How many entries the removals look at, at most: a few seconds' work.
constexpr std::size_t kRemovalBudget = 4000000;

}  // namespace

DiskUse disk_use(const std::filesystem::path& dir, std::uintmax_t max_entries) {
  DiskUse use;
  if (dir.empty()) return use;
  const int fd = open_dir(AT_FDCWD, dir.c_str());
  if (fd >= 0) walk(fd, 0, max_entries, use);
  return use;
}

DiskUse disk_use_of_uid(const std::vector<std::filesystem::path>& dirs, unsigned uid, std::uintmax_t max_entries) {
  DiskUse use;
  for (const auto& dir : dirs) {
    const int fd = open_dir(AT_FDCWD, dir.c_str());
    if (fd >= 0) walk(fd, 0, max_entries, use, uid);
    if (use.stopped) break;
  }
  return use;
}

const std::vector<std::filesystem::path>& shared_temp_dirs() {
  static const std::vector<std::filesystem::path> dirs{"/tmp", "/var/tmp", "/dev/shm"};
  return dirs;
}

std::size_t clear_folder(const std::filesystem::path& dir, const std::vector<std::string>& keep) {
  const int fd = open_dir(AT_FDCWD, dir.c_str());
  if (fd < 0) return 0;
  std::size_t budget = kRemovalBudget;
  std::size_t failed = empty_flat(fd, budget);
  for (const auto& name : keep)
    if (::mkdirat(fd, name.c_str(), 0755) != 0 && errno != EEXIST) ++failed;
  ::close(fd);
  return failed;
}

std::size_t remove_own_entries(const std::vector<std::filesystem::path>& dirs) {
  const uid_t me = ::geteuid();
  std::size_t failed = 0, budget = kRemovalBudget;
  for (const auto& dir : dirs) {
    const int fd = open_dir(AT_FDCWD, dir.c_str());
    DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
    if (!d) {
      if (fd >= 0) ::close(fd);
      continue;
    }
    each_entry(d, [&](const char* name) {
      if (budget == 0) return false;
      --budget;
      struct stat st;
      if (::fstatat(::dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != me) return true;
      if (S_ISDIR(st.st_mode)) {
        make_writable(::dirfd(d), name);  // its own folder, perhaps left read-only
        const int sub = open_dir(::dirfd(d), name);
        if (sub >= 0) {
          failed += empty_flat(sub, budget);
          ::close(sub);
        }
        if (::unlinkat(::dirfd(d), name, AT_REMOVEDIR) != 0) ++failed;
      } else if (::unlinkat(::dirfd(d), name, 0) != 0) {
        ++failed;
      }
      return true;
    });
    ::closedir(d);
  }
  return failed;
}

}  // namespace labgrade
