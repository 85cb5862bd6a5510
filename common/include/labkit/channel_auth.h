// Authentication of the result channel's lines (labkit/report.h).
//
// The student's code runs in the gate binary's process, so it can reach descriptor 3 (a well-formed line written
// there would read as the gates' own). The grader therefore writes a fresh random key into the channel socket
// before it starts the gate binary; labkit reads it when it opens the channel, before any gate runs, and tags every
// line it writes with a keyed hash (SipHash-2-4) of the line's number in the run and its text. The grader takes only
// lines whose tag matches the next number: a line written by anything else, or a line of the gates' replayed, is
// out of protocol. Code that reads the key first (start-up code of the submission) leaves labkit without one, and
// then no line of the run is taken. What stays possible is to find the key in the process's memory.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace labkit::report::auth {

using Key = std::array<unsigned char, 16>;

// SipHash-2-4 (Aumasson and Bernstein, 2012) of `data` under `key`: the key's bytes are k0 and k1 in little-endian
// order, as in the paper.
std::uint64_t siphash24(const Key& key, std::string_view data);

// The line `json_object` (a JSON object with at least one member) as the `seq`-th line (from 0) of a run: the object with a last member
// "mac", 16 lower-case hex digits of SipHash-2-4 over seq (8 bytes, little-endian) followed by the object's text.
std::string sign(const Key& key, std::uint64_t seq, std::string_view json_object);

// Whether `line` is the `seq`-th line of a run signed with `key`; if so, *json_object is the object without "mac".
bool verify(const Key& key, std::uint64_t seq, std::string_view line, std::string* json_object);

}  // namespace labkit::report::auth
