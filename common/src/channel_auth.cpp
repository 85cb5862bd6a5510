#include "labkit/channel_auth.h"

#include <cstdio>

namespace labkit::report::auth {

namespace {

std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

std::uint64_t load_le(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

struct State {
  std::uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {
    v3 ^= m;
    round();  // c = 2 compression rounds per word
    round();
    v0 ^= m;
  }
};

constexpr char kMacKey[] = ",\"mac\":\"";  // what sign() puts before the tag
constexpr std::size_t kTagDigits = 16;

std::string hex(std::uint64_t v) {
  char buf[kTagDigits + 1];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string tag(const Key& key, std::uint64_t seq, std::string_view object) {
  std::string data(8, '\0');
  for (int i = 0; i < 8; ++i) data[i] = static_cast<char>((seq >> (8 * i)) & 0xff);
  data.append(object);
  return hex(siphash24(key, data));
}

}  // namespace

std::uint64_t siphash24(const Key& key, std::string_view data) {
  const std::uint64_t k0 = load_le(key.data(), 8), k1 = load_le(key.data() + 8, 8);
  // The initial state: the key mixed with the ASCII of "somepseudorandomlygeneratedbytes".
  State s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
          k1 ^ 0x7465646279746573ULL};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t n = data.size(), whole = n - n % 8;
  for (std::size_t i = 0; i < whole; i += 8) s.absorb(load_le(p + i, 8));
  // The last word: the remaining bytes, and the length (mod 256) in the top byte.
  s.absorb(load_le(p + whole, n - whole) | (static_cast<std::uint64_t>(n & 0xff) << 56));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();  // d = 4 finalization rounds
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::string sign(const Key& key, std::uint64_t seq, std::string_view json_object) {
  std::string out(json_object.substr(0, json_object.size() - 1));  // without the closing brace
  out += kMacKey;
  out += tag(key, seq, json_object);
  out += "\"}";
  return out;
}

bool verify(const Key& key, std::uint64_t seq, std::string_view line, std::string* json_object) {
  const std::size_t suffix = sizeof kMacKey - 1 + kTagDigits + 2;  // ,"mac":"<16 hex>"}
  if (line.size() <= suffix + 1 || line.front() != '{' || line.substr(line.size() - 2) != "\"}") return false;
  const std::string_view mac = line.substr(line.size() - suffix);
  if (mac.substr(0, sizeof kMacKey - 1) != kMacKey) return false;
  std::string object(line.substr(0, line.size() - suffix));
  object += '}';
  if (mac.substr(sizeof kMacKey - 1, kTagDigits) != tag(key, seq, object)) return false;
  if (json_object) *json_object = std::move(object);
  return true;
}

}  // namespace labkit::report::auth
