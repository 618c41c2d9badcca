// The reliability suite's figures: what every part (HTTP corpus, chaos run) counts, the table
// it prints, and the rule that every figure except "requests tried" must be 0. Header-only.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace pf::reliability {

enum class Figure {
  RequestsTried,
  ServerErrors,
  Crashes,
  Hangs,
  AuthBypasses,
  SecretsFound,
  LeakedInstances,
  DuplicateRentals,
  DestroyedButBilling,
  OrphanProcesses,
  FalseDestroys,
  // The Curio cluster stand-in's (tests/e2e/gateway_e2e.py --figures-out): before these rows
  // existed the table summed its files without them, so a Curio run's nonzero figure passed.
  CurioJobsLost,
  CurioDuplicateJobs,
  CurioWrongProofs,
  CurioPostInFleetQueue,
  CurioTriesExhausted,
  // A planned upgrade (serve --takeover): Curio's retries plus the probe's failed calls.
  CurioUpgradeFailedCalls,
};
inline constexpr std::size_t kFigureCount = 17;

struct FigureInfo {
  const char* key;    // JSON key
  const char* label;  // table row
};
inline constexpr std::array<FigureInfo, kFigureCount> kFigureInfo = {{
    {"requests_tried", "requests tried"},
    {"5xx", "5xx replies"},
    {"crashes", "crashes"},
    {"hangs", "hangs"},
    {"auth_bypasses", "auth bypasses"},
    {"secrets_found", "secrets found in logs/db/ps"},
    {"leaked_instances", "leaked instances"},
    {"duplicate_rentals", "duplicate rentals"},
    {"destroyed_but_billing", "destroyed-but-billing"},
    {"orphan_processes", "orphan processes"},
    {"false_destroys", "false destroys of healthy instances"},
    {"curio_jobs_lost", "Curio: jobs lost"},
    {"curio_duplicate_jobs", "Curio: duplicate jobs"},
    {"curio_wrong_proofs", "Curio: wrong proofs"},
    {"curio_post_in_fleet_queue", "Curio: PoSt in the fleet's queue"},
    {"curio_tries_exhausted", "Curio: tasks out of tries"},
    {"curio_upgrade_failed_calls", "Curio: calls failed by a planned upgrade"},
}};

// 503 with Retry-After whose body names the market as busy, unreachable or failing (its 5xx after
// every retry: "(market_error)" is answered 503 only then): the manager's honest answer to a
// valid request while market-sim injects 429s, 500s and resets (the caller comes back), not a
// server error. Every part of the suite judges replies with this one rule.
inline bool is_market_busy_reply(int status, bool has_retry_after, const std::string& body) {
  return status == 503 && has_retry_after &&
         (body.find("(rate_limited)") != std::string::npos ||
          body.find("(transport)") != std::string::npos ||
          body.find("(market_error)") != std::string::npos);
}

// Counters plus one line per finding (what, where), shared by the threads of a run.
class Figures {
 public:
  Figures() = default;
  Figures(const Figures& other) { merge(other); }
  Figures& operator=(const Figures&) = delete;

  void add(Figure f, std::int64_t n = 1) {
    std::lock_guard lock(mu_);
    counts_[static_cast<std::size_t>(f)] += n;
  }
  // Counts one finding and keeps a line saying what it was (the first 200 are kept).
  void finding(Figure f, const std::string& what) {
    std::lock_guard lock(mu_);
    counts_[static_cast<std::size_t>(f)] += 1;
    if (details_.size() < 200) {
      details_.push_back(std::string(kFigureInfo[static_cast<std::size_t>(f)].key) + ": " + what);
    }
  }
  std::int64_t get(Figure f) const {
    std::lock_guard lock(mu_);
    return counts_[static_cast<std::size_t>(f)];
  }
  // Every figure except "requests tried" is 0.
  bool passed() const {
    std::lock_guard lock(mu_);
    for (std::size_t i = 1; i < kFigureCount; ++i) {
      if (counts_[i] != 0) return false;
    }
    return true;
  }

  void merge(const Figures& other) {
    const auto j = other.to_json();
    merge_json(j);
  }
  void merge_json(const nlohmann::json& j) {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < kFigureCount; ++i) {
      counts_[i] += j.value(kFigureInfo[i].key, std::int64_t{0});
    }
    for (const auto& d : j.value("details", nlohmann::json::array())) {
      if (details_.size() < 200 && d.is_string()) details_.push_back(d.get<std::string>());
    }
  }

  nlohmann::json to_json() const {
    std::lock_guard lock(mu_);
    nlohmann::json j = nlohmann::json::object();
    for (std::size_t i = 0; i < kFigureCount; ++i) j[kFigureInfo[i].key] = counts_[i];
    j["details"] = details_;
    return j;
  }

  // The table, then the findings; `title` names the run.
  std::string table(const std::string& title) const {
    std::ostringstream out;
    const bool ok = passed();
    std::lock_guard lock(mu_);
    out << "== reliability: " << title << " ==\n";
    for (std::size_t i = 0; i < kFigureCount; ++i) {
      char line[96];
      std::snprintf(line, sizeof line, "  %-42s %10lld%s\n", kFigureInfo[i].label,
                    static_cast<long long>(counts_[i]),
                    i > 0 && counts_[i] != 0 ? "  <-- must be 0" : "");
      out << line;
    }
    for (const auto& d : details_) out << "  finding: " << d << "\n";
    out << "== " << (ok ? "PASS" : "FAIL") << ": "
        << (ok ? "every figure except requests tried is 0" : "nonzero figures above") << " ==\n";
    return out.str();
  }

 private:
  mutable std::mutex mu_;
  std::array<std::int64_t, kFigureCount> counts_{};
  std::vector<std::string> details_;
};

}  // namespace pf::reliability
