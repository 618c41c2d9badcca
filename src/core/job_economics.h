// Money as it is (issue 12 item 6): what the fleet earns from the jobs it delivered, what each
// delivered proof really cost, and the hours accepted machines were paid for while holding no
// job. Pure: the operator API, the dashboard and /metrics pass jobs, instance rows and `now`.
//
// Rules:
//  - a delivered job earns its kind's price ([prices]: USD per proof, or FIL per proof × the
//    configured FIL/USD rate); a job delivered after its deadline earns nothing, and so does a
//    kind without a price (counted as `delivered_unpriced`, so the gap is visible).
//  - realised $/proof = spend in the window ÷ jobs delivered on time in it: what it really cost
//    to earn, setup, benchmarks and idle machines included.
//  - idle hours = the hours accepted instances (proving) held no job, inside the window.
//  - the fleet's profit/hour counts delivered jobs' revenue once the gateway has seen a job;
//    before that (or without a gateway) it stays the old estimate from measured proof rates ×
//    [economics] revenue_per_proof_usd, and says so: `ProfitBasis` travels with the figure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fleet.h"
#include "core/job.h"

namespace pf::core {

// Every proof kind, in the proto's order: price tables and per-kind counts list them all.
inline constexpr JobKind kAllJobKinds[] = {JobKind::PorepC2, JobKind::SnapUpdate,
                                           JobKind::WindowPost, JobKind::WinningPost};

enum class PriceCurrency { Usd, Fil };
const char* to_string(PriceCurrency currency);  // "usd" | "fil"
std::optional<PriceCurrency> parse_price_currency(std::string_view text);

struct PriceConfig {
  PriceCurrency currency = PriceCurrency::Usd;
  double fil_usd = 0;                   // USD per FIL; > 0 when currency is Fil
  std::map<JobKind, double> per_proof;  // in `currency`; a kind left out earns nothing
};

// USD one delivered proof of `kind` earns; none when the kind has no price (or FIL without a
// rate).
std::optional<double> price_usd(const PriceConfig& prices, JobKind kind);

// What the job earned: its price when it was delivered on time (core/job_latency.h), else 0.
double job_revenue_usd(const Job& job, const PriceConfig& prices);

// The share of an instance's spend that fell in [since, now]. Spend accrues at dph_total while
// the market bills (core/lifecycle.h) up to billed_until; the row keeps only the total, so the
// billed stretch is taken as the last spend_usd ÷ dph_total hours before billed_until (one
// stretch; parameter bandwidth, a few cents, is counted as billed time). Never more than the
// row's spend.
double spend_in_window(const InstanceRecord& instance, double since, double now);

// When an instance was accepted and until when it stayed so (destroyed, or now).
struct AcceptedSpan {
  std::int64_t instance_id = 0;
  double from = 0, until = 0;
};

// Hours inside [since, now] of the spans during which the instance held no job. A job occupies
// its instance from its current lease (assigned_at) until it finished (or now, while leased);
// earlier lost leases are not on the row and count as idle.
double idle_hours(const std::vector<AcceptedSpan>& accepted, const std::vector<Job>& jobs,
                  double since, double now);

struct JobsMoney {
  double since = 0, until = 0;  // the window, epoch s
  double revenue_usd = 0;       // jobs delivered on time in the window, priced
  int delivered_on_time = 0;
  int delivered_unpriced = 0;                     // on time, but their kind has no price
  int delivered_late = 0;                         // delivered after the deadline: earned nothing
  double spend_usd = 0;                           // every instance's spend inside the window
  std::optional<double> realised_cost_per_proof;  // spend ÷ delivered_on_time
  double revenue_per_hour = 0;                    // revenue_usd ÷ window hours
  double idle_hours = 0;
};

JobsMoney jobs_money(const std::vector<Job>& jobs, const std::vector<InstanceRecord>& instances,
                     const std::vector<AcceptedSpan>& accepted, const PriceConfig& prices,
                     double since, double now);

enum class ProfitBasis {
  ProofsMeasured,  // no gateway jobs: measured proofs/hour × revenue per proof (an estimate)
  JobsDelivered,   // revenue of jobs delivered on time, per hour over the window
};
const char* to_string(ProfitBasis basis);  // "proofs_measured" | "jobs_delivered"

struct FleetProfit {
  ProfitBasis basis = ProfitBasis::ProofsMeasured;
  double revenue_per_hour = 0;
  double profit_per_hour = 0;  // revenue_per_hour − the live fleet's dollars_per_hour
  std::string reason;
};

FleetProfit fleet_profit(bool gateway_has_jobs, double measured_proofs_per_hour,
                         double revenue_per_proof_usd, double dollars_per_hour,
                         double delivered_revenue_per_hour);

}  // namespace pf::core
