#include "core/blocklist.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/text.h"

namespace pf::core {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string evidence_json(const Strike& s, int strikes) {
  return "{\"kind\":" + json_string(to_string(s.kind)) +
         ",\"instance_id\":" + std::to_string(s.instance_id) + ",\"at\":" + number(s.at) +
         ",\"measured_rate\":" + number(s.measured_rate) +
         ",\"break_even_rate\":" + number(s.break_even_rate) +
         ",\"our_others_on_machine\":" + std::to_string(s.our_others_on_machine) +
         ",\"strikes\":" + std::to_string(strikes) + ",\"reason\":" + json_string(s.reason) + "}";
}

const BadHost* auto_entry(const std::vector<BadHost>& entries, std::int64_t machine_id) {
  for (const auto& b : entries)
    if (b.machine_id == machine_id && b.source == "auto") return &b;
  return nullptr;
}

}  // namespace

const char* to_string(StrikeKind kind) {
  switch (kind) {
    case StrikeKind::SlowBenchmark:
      return "slow_benchmark";
    case StrikeKind::NeverBooted:
      return "never_booted";
    case StrikeKind::Crashed:
      return "crashed";
    case StrikeKind::Offline:
      return "offline";
    case StrikeKind::SlowDownload:
      return "slow_download";
    case StrikeKind::FailedProofs:
      return "failed_proofs";
    case StrikeKind::RejectedProof:
      return "rejected_proof";
    case StrikeKind::InvalidProof:
      return "invalid_proof";
  }
  return "unknown";
}

double strike_expiry(int strikes, double at, const BlocklistConfig& c) {
  const double ttl = c.base_ttl_s * std::pow(c.escalation, std::max(0, strikes - 1));
  return at + std::min(ttl, c.max_ttl_s);
}

StrikeOutcome apply_strike(const std::vector<BadHost>& existing, const Strike& s,
                           const BlocklistConfig& c) {
  StrikeOutcome out;
  if (s.kind == StrikeKind::SlowBenchmark && s.our_others_on_machine > 0) {
    out.reason = "not blamed: machine " + std::to_string(s.machine_id) + " was shared with " +
                 std::to_string(s.our_others_on_machine) +
                 " other instance(s) of ours, so the slowness may be our own contention";
    return out;
  }
  const BadHost* previous = auto_entry(existing, s.machine_id);
  BadHost entry;
  entry.machine_id = s.machine_id;
  entry.source = "auto";
  entry.strikes = previous ? previous->strikes + 1 : 1;
  entry.added_at = s.at;
  entry.expires_at = strike_expiry(entry.strikes, s.at, c);
  entry.reason = std::string(to_string(s.kind)) + ": " + s.reason;
  entry.evidence_json = evidence_json(s, entry.strikes);
  out.reason = "machine " + std::to_string(s.machine_id) + " strike " +
               std::to_string(entry.strikes) + " (" + to_string(s.kind) + "), blocked for " +
               fixed((*entry.expires_at - s.at) / 3600, 1) + " h";
  out.entry = std::move(entry);
  return out;
}

Exclusion excluded_machines(const std::vector<BadHost>& bad_hosts,
                            const std::vector<Offer>& candidates, double now,
                            const BlocklistConfig& c) {
  Exclusion ex;
  std::set<std::int64_t> pool;
  for (const auto& o : candidates) pool.insert(o.machine_id);

  std::vector<const BadHost*> automatic;
  for (const auto& b : bad_hosts) {
    if (!is_active(b, now) || !pool.count(b.machine_id)) continue;
    if (b.source == "auto") {
      automatic.push_back(&b);
    } else if (ex.machines.insert(b.machine_id).second) {
      ex.reasons.push_back("machine " + std::to_string(b.machine_id) +
                           " blocked by the operator: " + b.reason);
    }
  }
  std::sort(automatic.begin(), automatic.end(), [](const BadHost* a, const BadHost* b) {
    if (a->strikes != b->strikes) return a->strikes > b->strikes;
    if (a->added_at != b->added_at) return a->added_at > b->added_at;
    return a->machine_id < b->machine_id;
  });
  // Like Envoy's max_ejection_percent, at least one host may always be excluded.
  const auto allowed = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(c.max_pool_share * static_cast<double>(pool.size()))));
  std::size_t auto_excluded = 0;
  for (const BadHost* b : automatic) {
    if (ex.machines.count(b->machine_id)) continue;
    if (auto_excluded >= allowed) {
      ++ex.auto_entries_waived;
      continue;
    }
    ex.machines.insert(b->machine_id);
    ++auto_excluded;
    ex.reasons.push_back("machine " + std::to_string(b->machine_id) + " blocked (" +
                         std::to_string(b->strikes) + " strike(s), " +
                         (b->expires_at ? fixed((*b->expires_at - now) / 3600, 1) + " h left"
                                        : std::string("no expiry")) +
                         "): " + b->reason);
  }
  if (ex.auto_entries_waived > 0) {
    ex.reasons.push_back(std::to_string(ex.auto_entries_waived) +
                         " automatic block(s) waived: they would exclude more than " +
                         percent(c.max_pool_share) + " of the " + std::to_string(pool.size()) +
                         " candidate machines");
  }
  return ex;
}

int auto_strikes(const std::vector<BadHost>& bad_hosts, std::int64_t machine_id) {
  const BadHost* b = auto_entry(bad_hosts, machine_id);
  return b ? b->strikes : 0;
}

std::optional<Strike> strike_for_close(const InstanceRecord& rec, InstanceState state_before,
                                       CloseCause cause, const std::string& reason, double at,
                                       int our_others_on_machine) {
  using S = InstanceState;
  auto make = [&](StrikeKind kind) {
    Strike s;
    s.machine_id = rec.offer.machine_id;
    s.kind = kind;
    s.reason = reason;
    s.at = at;
    s.our_others_on_machine = our_others_on_machine;
    s.instance_id = rec.id;
    if (rec.verdict) {
      s.measured_rate = rec.verdict->rate;
      s.break_even_rate = rec.verdict->break_even_rate;
    }
    return s;
  };
  if (rec.offer.machine_id <= 0) return std::nullopt;  // nothing to blame (e.g. an orphan)
  switch (cause) {
    case CloseCause::Rejected:
      return make(StrikeKind::SlowBenchmark);
    case CloseCause::MarketExited:
    case CloseCause::OtherLifecycle:
      return make(StrikeKind::Crashed);
    case CloseCause::HostOffline:
      return make(StrikeKind::Offline);
    case CloseCause::Deadline:
      if (state_before == S::Renting || state_before == S::Booting) {
        return make(StrikeKind::NeverBooted);
      }
      if (state_before == S::Registered || state_before == S::FetchingParams) {
        return make(StrikeKind::SlowDownload);
      }
      return make(StrikeKind::SlowBenchmark);
    case CloseCause::MarketStopped:  // the market's doing (contract, bids, credit): no strike
    case CloseCause::Dropped:
    case CloseCause::Operator:
    case CloseCause::Horizon:
    case CloseCause::Vanished:
    case CloseCause::NotRented:
    case CloseCause::Orphan:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace pf::core
