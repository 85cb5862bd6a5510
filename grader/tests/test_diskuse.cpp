// diskuse.h: what a lab's files take (the batch's --disk-gib watch) and the removal of what a slot's uid left in the
// shared temporary folders (the sweep of a dedicated uid). The uid cases need root to give files away and to run
// as another uid; elsewhere they skip.
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "diskuse.h"

namespace fs = std::filesystem;
using namespace labgrade;

namespace {

// Writes `bytes` of data (not a sparse file: st_blocks must count it).
void write_bytes(const fs::path& p, std::size_t bytes) {
  std::ofstream f(p, std::ios::binary);
  const std::string block(bytes, 'x');
  f << block;
}

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("labgrade-diskuse-" + std::to_string(getpid()));
  TempDir() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

constexpr unsigned kOtherUid = 61999;  // above the batch's uid slots' first block, as a slot uid would be

}  // namespace

TEST_CASE("disk_use counts every file under a folder, links as themselves", "[diskuse]") {
  TempDir t;
  write_bytes(t.dir / "a.bin", 1 << 20);
  fs::create_directories(t.dir / "sub/deeper");
  write_bytes(t.dir / "sub/deeper/b.bin", 2 << 20);
  // A link to a large file outside: it takes a link's space, and what it points to is not counted.
  const fs::path outside = t.dir.string() + "-outside";
  write_bytes(outside, 8 << 20);
  fs::create_symlink(outside, t.dir / "link");
  fs::create_directory_symlink("/usr", t.dir / "dirlink");
  const DiskUse use = disk_use(t.dir, 1000);
  fs::remove(outside);
  CHECK_FALSE(use.stopped);
  CHECK(use.entries == 6);  // a.bin, sub, deeper, b.bin, link, dirlink
  CHECK(use.bytes >= (3u << 20));
  CHECK(use.bytes < (4u << 20));  // neither link's target
  CHECK(disk_use(t.dir / "missing", 1000).entries == 0);
  CHECK(disk_use("", 1000).entries == 0);
}

TEST_CASE("clear_folder empties a lab's working folder and keeps home/ and tmp/", "[diskuse]") {
  TempDir t;
  const fs::path lab = t.dir / "lab";
  fs::create_directories(lab / "home/.nv/cache");
  fs::create_directories(lab / "sub/deeper");
  write_bytes(lab / "home/.nv/cache/x", 100);
  write_bytes(lab / "sub/deeper/y", 100);
  write_bytes(lab / "fill-0.bin", 1 << 20);
  write_bytes(lab / "tmp", 10);  // a file where the kept folder was
  fs::create_directories(t.dir / "elsewhere");
  write_bytes(t.dir / "elsewhere/keep.bin", 10);
  fs::create_directory_symlink(t.dir / "elsewhere", lab / "link");  // removed itself, never followed
  CHECK(clear_folder(lab, {"home", "tmp"}) == 0);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(lab)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"home", "tmp"});
  CHECK(fs::is_directory(lab / "home"));
  CHECK(fs::is_directory(lab / "tmp"));
  CHECK(fs::is_empty(lab / "home"));
  CHECK(fs::exists(t.dir / "elsewhere/keep.bin"));
  CHECK(clear_folder(t.dir / "missing", {"home"}) == 0);
}

TEST_CASE("clear_folder removes read-only folders and chains deeper than any walk", "[diskuse]") {
  TempDir t;
  const fs::path lab = t.dir / "lab";
  fs::create_directories(lab / "locked/inner");
  write_bytes(lab / "locked/inner/x", 100);
  ::chmod((lab / "locked/inner").c_str(), 0500);
  ::chmod((lab / "locked").c_str(), 0500);
  fs::path deep = lab / "deep";
  for (int i = 0; i < 300; ++i) deep /= "d";  // far past the walks' 64 levels
  fs::create_directories(deep);
  write_bytes(deep / "bottom", 100);
  CHECK(disk_use(lab, 1000000).stopped);  // too deep to count: over any limit
  CHECK(clear_folder(lab, {"home"}) == 0);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(lab)) left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"home"});
}

TEST_CASE("disk_use stops at its entry count and at a nesting too deep", "[diskuse]") {
  TempDir t;
  for (int i = 0; i < 50; ++i) write_bytes(t.dir / ("f" + std::to_string(i)), 10);
  DiskUse use = disk_use(t.dir, 20);
  CHECK(use.stopped);
  CHECK(use.entries == 20);
  fs::path deep = t.dir / "deep";
  for (int i = 0; i < 80; ++i) deep /= "d";
  fs::create_directories(deep);
  use = disk_use(t.dir / "deep", 1000000);
  CHECK(use.stopped);  // past 64 levels: more than it counted
}

TEST_CASE("disk_use_of_uid counts what one uid owns in the shared folders, and its sweep removes it",
          "[diskuse]") {
  if (geteuid() != 0) SKIP("giving files to another uid and running as it needs root");
  TempDir t;
  const fs::path tmp = t.dir / "tmp";  // stands for /tmp: world-writable and sticky
  fs::create_directories(tmp);
  ::chmod(tmp.c_str(), 01777);
  write_bytes(tmp / "theirs.bin", 1 << 20);
  fs::create_directories(tmp / "their-dir/inner");
  write_bytes(tmp / "their-dir/inner/x.bin", 1 << 20);
  write_bytes(tmp / "roots.bin", 4 << 20);  // another owner's file: neither counted nor removed
  fs::create_directories(tmp / "roots-dir");
  write_bytes(tmp / "roots-dir/keep.bin", 10);
  fs::create_symlink(tmp / "roots-dir", tmp / "their-link");  // theirs, pointing at root's folder
  fs::create_directories(tmp / "their-locked/a/b");  // left read-only, nested: the sweep must still remove it
  write_bytes(tmp / "their-locked/a/b/y.bin", 10);
  for (const char* p : {"theirs.bin", "their-dir", "their-dir/inner", "their-dir/inner/x.bin", "their-locked",
                        "their-locked/a", "their-locked/a/b", "their-locked/a/b/y.bin"})
    REQUIRE(::chown((tmp / p).c_str(), kOtherUid, kOtherUid) == 0);
  for (const char* p : {"their-locked/a/b", "their-locked/a", "their-locked"}) ::chmod((tmp / p).c_str(), 0500);
  REQUIRE(::lchown((tmp / "their-link").c_str(), kOtherUid, kOtherUid) == 0);

  const DiskUse use = disk_use_of_uid({tmp, t.dir / "missing"}, kOtherUid, 1000);
  CHECK(use.entries == 9);  // theirs.bin, their-dir, inner, x.bin, their-link, their-locked, a, b, y.bin
  CHECK(use.bytes >= (2u << 20));
  CHECK(use.bytes < (3u << 20));  // not root's 4 MiB, not through the link

  // The sweep's child, as that uid: removes its own entries, never what the link points to.
  const pid_t child = fork();
  if (child == 0) {
    const bool as_uid = setgroups(0, nullptr) == 0 && setresgid(kOtherUid, kOtherUid, kOtherUid) == 0 &&
                        setresuid(kOtherUid, kOtherUid, kOtherUid) == 0;
    _exit(as_uid && remove_own_entries({tmp}) == 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(fs::exists(fs::symlink_status(tmp / "theirs.bin")));
  CHECK_FALSE(fs::exists(fs::symlink_status(tmp / "their-dir")));
  CHECK_FALSE(fs::exists(fs::symlink_status(tmp / "their-link")));
  CHECK_FALSE(fs::exists(fs::symlink_status(tmp / "their-locked")));
  CHECK(fs::exists(tmp / "roots.bin"));
  CHECK(fs::exists(tmp / "roots-dir/keep.bin"));
  CHECK(disk_use_of_uid({tmp}, kOtherUid, 1000).entries == 0);
}
