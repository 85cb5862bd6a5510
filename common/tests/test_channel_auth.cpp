// The result channel's line tags (labkit/channel_auth.h): SipHash-2-4 against the paper's test vector, and the
// signed lines the gate binary writes as the grader checks them.
#include <catch2/catch_test_macros.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

#include "labkit/channel_auth.h"
#include "labkit/report.h"

using labkit::report::auth::Key;
namespace auth = labkit::report::auth;

namespace {
Key counting_key() {
  Key k{};
  for (int i = 0; i < 16; ++i) k[i] = static_cast<unsigned char>(i);
  return k;
}
}  // namespace

TEST_CASE("SipHash-2-4 gives the paper's test vector", "[cpu][report]") {
  // Aumasson and Bernstein, "SipHash: a fast short-input PRF", appendix A: key 00 01 .. 0f, message 00 01 .. 0e.
  std::string msg;
  for (int i = 0; i < 15; ++i) msg += static_cast<char>(i);
  CHECK(auth::siphash24(counting_key(), msg) == 0xa129ca6149be45e5ULL);
}

TEST_CASE("a signed line verifies only with its key, its number and its text", "[cpu][report]") {
  const Key k = counting_key();
  const std::string obj = R"({"event":"gate_end","gate":"cpu.sum","status":"passed","message":"","seconds":0.1})";
  const std::string line = auth::sign(k, 7, obj);
  CHECK(nlohmann::json::parse(line)["status"] == "passed");  // still one JSON object
  std::string back;
  REQUIRE(auth::verify(k, 7, line, &back));
  CHECK(back == obj);
  CHECK_FALSE(auth::verify(k, 8, line, nullptr));  // replayed as another line of the run
  Key other = k;
  other[3] ^= 1;
  CHECK_FALSE(auth::verify(other, 7, line, nullptr));
  std::string changed = line;
  changed.replace(changed.find("passed"), 6, "failed");
  CHECK_FALSE(auth::verify(k, 7, changed, nullptr));
  CHECK_FALSE(auth::verify(k, 7, obj, nullptr));  // unsigned
  CHECK_FALSE(auth::verify(k, 7, "", nullptr));
  CHECK_FALSE(auth::verify(k, 7, R"({"mac":"0123456789abcdef"})", nullptr));
}

TEST_CASE("with a key waiting in the socket, the gate binary signs every line in order", "[cpu][report]") {
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  Key k{};
  for (int i = 0; i < 16; ++i) k[i] = static_cast<unsigned char>(0xa0 + i);
  REQUIRE(write(fds[0], k.data(), k.size()) == 16);  // what the grader does before starting the gate binary
  labkit::report::detail::open("/dev/fd/" + std::to_string(fds[1]));
  labkit::report::detail::set_current_gate("g3");
  labkit::report::metric("first", 1, "x");
  labkit::report::metric("second", 2, "x");
  labkit::report::detail::open("");
  shutdown(fds[0], SHUT_WR);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  const auto nl = got.find('\n');
  REQUIRE(nl != std::string::npos);
  const std::string first = got.substr(0, nl), second = got.substr(nl + 1, got.find('\n', nl + 1) - nl - 1);
  std::string obj;
  REQUIRE(auth::verify(k, 0, first, &obj));
  CHECK(nlohmann::json::parse(obj)["name"] == "first");
  REQUIRE(auth::verify(k, 1, second, &obj));
  CHECK(nlohmann::json::parse(obj)["name"] == "second");
  CHECK_FALSE(auth::verify(k, 0, second, nullptr));
}
