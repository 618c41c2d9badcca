// Seconds on the steady clock: for measuring intervals and spacing calls in real time (it never
// goes back and means nothing across processes), never for reporting a time.
#pragma once

#include <chrono>

namespace pf::util {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace pf::util
