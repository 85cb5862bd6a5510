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

void add(DiskUse& use, const struct stat& st) {
  use.bytes += static_cast<std::uintmax_t>(st.st_blocks) * 512u;
  ++use.entries;
}

// Counts everything in the open folder `fd` (closed here). Entries are looked at with fstatat(AT_SYMLINK_NOFOLLOW)
// and folders entered with O_NOFOLLOW: a link is counted as itself, never followed, whatever it points to.
void walk(int fd, int depth, std::uintmax_t max_entries, DiskUse& use) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  while (struct dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    if (use.entries >= max_entries) {
      use.stopped = true;
      break;
    }
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    add(use, st);
    if (!S_ISDIR(st.st_mode)) continue;
    if (depth >= kMaxDepth) {
      use.stopped = true;
      continue;
    }
    const int sub = open_dir(::dirfd(d), e->d_name);
    if (sub >= 0) walk(sub, depth + 1, max_entries, use);
    if (use.stopped) break;
  }
  ::closedir(d);
}

// Removes everything in the open folder `fd` (closed here), then nothing else: the caller removes the folder.
std::size_t empty_dir(int fd, int depth) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return 1;
  }
  std::size_t failed = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      const int sub = depth < kMaxDepth ? open_dir(::dirfd(d), e->d_name) : -1;
      if (sub >= 0) failed += empty_dir(sub, depth + 1);
      if (::unlinkat(::dirfd(d), e->d_name, AT_REMOVEDIR) != 0) ++failed;
    } else if (::unlinkat(::dirfd(d), e->d_name, 0) != 0) {
      ++failed;
    }
  }
  ::closedir(d);
  return failed;
}

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
    if (fd < 0) continue;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      continue;
    }
    while (struct dirent* e = ::readdir(d)) {
      if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
      if (use.entries >= max_entries) {
        use.stopped = true;
        break;
      }
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != uid) continue;
      add(use, st);
      if (!S_ISDIR(st.st_mode)) continue;
      const int sub = open_dir(::dirfd(d), e->d_name);
      if (sub >= 0) walk(sub, 1, max_entries, use);
      if (use.stopped) break;
    }
    ::closedir(d);
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
  const int top = ::dup(fd);  // empty_dir closes fd; the kept folders are made again through this one
  std::size_t failed = 0;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    if (top >= 0) ::close(top);
    return 1;
  }
  while (struct dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const bool kept = std::find(keep.begin(), keep.end(), e->d_name) != keep.end();
    if (S_ISDIR(st.st_mode)) {
      const int sub = open_dir(::dirfd(d), e->d_name);
      if (sub >= 0) failed += empty_dir(sub, 1);
      if (!kept && ::unlinkat(::dirfd(d), e->d_name, AT_REMOVEDIR) != 0) ++failed;
    } else if (::unlinkat(::dirfd(d), e->d_name, 0) != 0) {
      ++failed;
    }
  }
  ::closedir(d);
  for (const auto& name : keep)
    if (top >= 0 && ::mkdirat(top, name.c_str(), 0755) != 0 && errno != EEXIST) ++failed;
  if (top >= 0) ::close(top);
  return failed;
}

std::size_t remove_own_entries(const std::vector<std::filesystem::path>& dirs) {
  const uid_t me = ::geteuid();
  std::size_t failed = 0;
  for (const auto& dir : dirs) {
    const int fd = open_dir(AT_FDCWD, dir.c_str());
    if (fd < 0) continue;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      continue;
    }
    while (struct dirent* e = ::readdir(d)) {
      if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != me) continue;
      if (S_ISDIR(st.st_mode)) {
        const int sub = open_dir(::dirfd(d), e->d_name);
        if (sub >= 0) failed += empty_dir(sub, 1);
        if (::unlinkat(::dirfd(d), e->d_name, AT_REMOVEDIR) != 0) ++failed;
      } else if (::unlinkat(::dirfd(d), e->d_name, 0) != 0) {
        ++failed;
      }
    }
    ::closedir(d);
  }
  return failed;
}

}  // namespace labgrade
