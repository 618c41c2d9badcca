// Seeded portable random draws for the scenario physics. The standard distributions are not
// portable across library versions (std::lognormal_distribution may draw differently on
// another libstdc++), and a scenario's outcome must be reproducible everywhere from its seed,
// so every simulator of the truth draws from this one stream.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace pf::scenario {

// One step of splitmix64: advances `state` and returns a well-mixed 64-bit value.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A small deterministic random stream.
class Stream {
 public:
  explicit Stream(std::uint64_t seed = 0) : state_(seed) {}

  // Uniform in (0, 1): never 0, so log() of it is finite.
  double uniform() { return (static_cast<double>(splitmix64(state_) >> 11) + 0.5) * 0x1.0p-53; }

  // Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }

  // Lognormal with mean 1 and coefficient of variation cv (1 exactly when cv <= 0).
  double unit_lognormal(double cv) {
    if (cv <= 0) return 1;
    const double s2 = std::log(1 + cv * cv);
    return std::exp(-s2 / 2 + std::sqrt(s2) * normal());
  }

  // Exponential with mean 1 / rate (the gap of a Poisson process of that rate).
  double exponential(double rate) { return -std::log(uniform()) / rate; }

 private:
  std::uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// The seed of one rental's stream: the scenario seed, the offer and how many times that offer
// was rented before, so every simulator (and every policy) renting the same offer the same
// time sees the same machine behaviour (common random numbers).
inline std::uint64_t rental_seed(std::uint64_t scenario_seed, std::int64_t offer_id,
                                 int rentals_before) {
  std::uint64_t seed = scenario_seed;
  seed ^= splitmix64(seed) ^ static_cast<std::uint64_t>(offer_id) * 0x9e3779b97f4a7c15ULL;
  seed ^= static_cast<std::uint64_t>(rentals_before) * 0xc2b2ae3d27d4eb4fULL;
  return splitmix64(seed);
}

// The seed of the job arrivals of a /2 scenario (independent of every rental's stream).
inline std::uint64_t arrivals_seed(std::uint64_t scenario_seed) {
  std::uint64_t seed = scenario_seed ^ 0x6a09e667f3bcc909ULL;
  return splitmix64(seed);
}

}  // namespace pf::scenario
