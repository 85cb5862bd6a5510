// copy_file_for_exec (util.h): the batch copies each lab's gate binary while other threads start compilers. A
// descriptor of the copy that a compiler inherits keeps the binary open for writing, and running it then fails with
// ETXTBSY (a healthy cpu.speed was graded crashed, exit 127, under load). std::filesystem::copy_file's descriptors
// were inherited across exec (1 of 200 forks here saw one); copy_file_for_exec's must never be.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch_test_macros.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "util.h"

namespace fs = std::filesystem;

TEST_CASE("a gate binary's copy is never held open by a process started meanwhile", "[util][copy]") {
  const fs::path dir = fs::temp_directory_path() / ("labgrade-copy-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path from = dir / "gates", to = dir / "gates-copy";
  {
    std::ofstream f(from, std::ios::binary);
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 64; ++i) f << block;  // 64 MiB: each copy takes long enough to be forked across
  }
  std::atomic<bool> stop{false};
  std::thread copier([&] {
    while (!stop) labgrade::copy_file_for_exec(from, to, 0755);
  });
  int held = 0;
  for (int i = 0; i < 200; ++i) {
    const pid_t p = fork();
    if (p == 0) {
      // The program that runs after exec lists its own descriptors: one of the copy's would show its name.
      execl("/bin/sh", "sh", "-c", "ls -l /proc/$$/fd 2>/dev/null | grep -q gates-copy && exit 7; exit 0",
            static_cast<char*>(nullptr));
      _exit(1);
    }
    int status = 0;
    waitpid(p, &status, 0);
    held += WIFEXITED(status) && WEXITSTATUS(status) == 7;
  }
  stop = true;
  copier.join();
  CHECK(held == 0);
  CHECK(fs::file_size(to) == fs::file_size(from));
  struct stat st {};
  REQUIRE(::stat(to.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0755);
  fs::remove_all(dir);
}
