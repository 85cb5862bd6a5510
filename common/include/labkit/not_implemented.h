// Thrown by every step of a skeleton that the student has not written yet. The gates report it as
// "not implemented" (status not_implemented), not as a crash.
#pragma once
#include <stdexcept>
#include <string>

namespace labkit {
class NotImplemented : public std::logic_error {
 public:
  explicit NotImplemented(const std::string& what) : std::logic_error("not implemented: " + what) {}
};
}  // namespace labkit
