#include <sstream>

#include "labkit/guard.h"

namespace labkit {

GuardReport check_guard_bytes(const std::vector<unsigned char>& before, const std::vector<unsigned char>& after,
                              std::size_t elem_size, const std::string& name) {
  GuardReport r;
  std::size_t lowest = before.size();
  for (std::size_t i = 0; i < before.size(); ++i)
    if (before[i] != kGuardByte) {
      ++r.before;
      lowest = std::min(lowest, i);
    }
  std::size_t first_after = after.size();
  for (std::size_t i = 0; i < after.size(); ++i)
    if (after[i] != kGuardByte) {
      ++r.after;
      first_after = std::min(first_after, i);
    }
  r.ok = r.before == 0 && r.after == 0;
  if (r.ok) return r;
  std::ostringstream os;
  os << "out-of-bounds write:";
  if (r.after) {
    r.first_after = first_after / elem_size;
    os << " " << (r.after + elem_size - 1) / elem_size << " element(s) written past the end of " << name
       << " (first at " << name << "[n+" << r.first_after << "])";
  }
  if (r.before) {
    r.first_before = -static_cast<std::ptrdiff_t>((before.size() - lowest + elem_size - 1) / elem_size);
    os << (r.after ? ";" : "") << " " << (r.before + elem_size - 1) / elem_size
       << " element(s) written before the start of " << name << " (lowest at " << name << "[" << r.first_before
       << "])";
  }
  os << ": a thread outside the matrix did not skip its store (check the bounds test before writing)";
  r.message = os.str();
  return r;
}

}  // namespace labkit
