// Waiting in tests: on a condition, never on a fixed time. A test that sleeps "long enough" is
// slow on an idle machine and wrong on a loaded one (ctest runs four tests a core); one that
// polls what it needs returns as soon as it holds and tolerates a slow machine up to `timeout`.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace pf::test {

// A loaded machine is slow, never wrong: the default limit only ends a test that would hang.
inline constexpr std::chrono::milliseconds kEventuallyLimit = std::chrono::seconds(30);

// Polls `condition` until it holds (true) or `timeout` passes (false, after one last look).
// The first polls come quickly (a condition that is nearly true costs ~1 ms), later ones every
// 20 ms so that a long wait does not spin.
template <typename Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds timeout = kEventuallyLimit) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return condition();
}

// Holds while `condition` stays true for the whole `window` (checked every 10 ms): the one
// place a test must let time pass, asserting that something does NOT happen (a producer no
// longer called, no mutation after a pause). False as soon as it fails.
template <typename Condition>
bool holds_for(Condition&& condition, std::chrono::milliseconds window) {
  const auto end = std::chrono::steady_clock::now() + window;
  while (std::chrono::steady_clock::now() < end) {
    if (!condition()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

}  // namespace pf::test
