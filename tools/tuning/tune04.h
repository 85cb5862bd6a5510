// Lab 04 tuning harness: what tune04.cu and tune04_step3.cu share (see tune04.cu for the build command).
#pragma once
#include <cstdint>
#include <functional>

namespace tune04 {
// Times each kernel of step 3 at n = N keys through `kernel(name, launch)` (which restores the input first).
void breakdown_step3(float* work, std::uint32_t N,
                     const std::function<void(const char*, const std::function<void()>&)>& kernel);
}  // namespace tune04
