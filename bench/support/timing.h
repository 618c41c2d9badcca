// Bench helpers: clocks, timed calls and figure lines, the same in every bench. Header-only.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace pf::bench {

using SteadyClock = std::chrono::steady_clock;

// Epoch seconds, as the manager's clock reads them.
inline double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// The seconds fn takes.
inline double seconds_of(const std::function<void()>& fn) {
  const auto start = SteadyClock::now();
  fn();
  return seconds_since(start);
}

// CPU milliseconds this process has used (every thread).
inline double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Medians over `runs` calls of fn, after one call that is timed apart (cold: statements not yet
// prepared, caches empty): wall milliseconds (the figure), and the process's CPU milliseconds
// (what a call costs on a machine busy with other work). `between`, when given, runs untimed
// before each timed call (what changes between two calls in real use).
struct Timing {
  double wall_ms = 0, cpu_ms = 0;
  double first_wall_ms = 0;
};
inline Timing time_calls(int runs, const std::function<void()>& fn,
                         const std::function<void()>& between = {}) {
  Timing t;
  t.first_wall_ms = seconds_of(fn) * 1e3;
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    if (between) between();
    const double cpu0 = process_cpu_ms();
    wall.push_back(seconds_of(fn) * 1e3);
    cpu.push_back(process_cpu_ms() - cpu0);
  }
  t.wall_ms = median(std::move(wall));
  t.cpu_ms = median(std::move(cpu));
  return t;
}

// One figure line of `make bench`: "name: value" with `decimals` decimals.
inline void print_figure(const std::string& name, double value, int decimals) {
  std::printf("%s: %.*f\n", name.c_str(), decimals, value);
}

}  // namespace pf::bench
