#include "core/job_economics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/billing.h"
#include "core/job_latency.h"
#include "core/money_ledger.h"
#include "core/text.h"

namespace pf::core {

const char* to_string(PriceCurrency currency) {
  return currency == PriceCurrency::Fil ? "fil" : "usd";
}

std::optional<PriceCurrency> parse_price_currency(std::string_view text) {
  if (text == "usd") return PriceCurrency::Usd;
  if (text == "fil") return PriceCurrency::Fil;
  return std::nullopt;
}

std::optional<double> price_usd(const PriceConfig& prices, JobKind kind) {
  auto it = prices.per_proof.find(kind);
  if (it == prices.per_proof.end()) return std::nullopt;
  if (prices.currency == PriceCurrency::Usd) return it->second;
  if (prices.fil_usd <= 0) return std::nullopt;
  return it->second * prices.fil_usd;
}

double job_revenue_usd(const Job& job, const PriceConfig& prices) {
  // Timeliness of a delivered job does not depend on `now`: delivered_at settles it.
  if (job.state != JobState::Done || job.delivered_at <= 0) return 0;
  if (job_timeliness(job, job.delivered_at).timeliness != Timeliness::OnTime) return 0;
  return price_usd(prices, job.kind).value_or(0);
}

namespace {

double overlap(double a_from, double a_until, double b_from, double b_until) {
  return std::max(0.0, std::min(a_until, b_until) - std::max(a_from, b_from));
}

}  // namespace

double spend_in_window(const InstanceRecord& instance, double since, double now) {
  if (instance.spend_usd <= 0 || now <= since) return 0;
  const double dph = rental_usd_per_hour(instance);
  if (dph <= 0 || instance.billed_until <= 0) {
    // Bandwidth only, with no billed time to place it in: count it where it was last accrued.
    return instance.billed_until >= since && instance.billed_until <= now ? instance.spend_usd : 0;
  }
  const double billed_from = instance.billed_until - instance.spend_usd / dph * 3600;
  const double in_window = overlap(billed_from, instance.billed_until, since, now) / 3600 * dph;
  return std::min(instance.spend_usd, in_window);
}

double idle_hours(const std::vector<AcceptedSpan>& accepted, const std::vector<Job>& jobs,
                  double since, double now) {
  double idle_s = 0;
  for (const auto& span : accepted) {
    const double from = std::max(span.from, since);
    const double until = std::min(span.until, now);
    if (until <= from) continue;
    std::vector<std::pair<double, double>> busy;
    for (const auto& job : jobs) {
      if (job.instance_id != span.instance_id || job.assigned_at <= 0) continue;
      double end = 0;
      if (is_leased(job.state)) {
        end = now;
      } else if (is_terminal(job.state) && job.finished_at > 0) {
        end = job.finished_at;
      } else {
        continue;  // back in the queue: when the lease ended is not on the row
      }
      const double a = std::max(job.assigned_at, from), b = std::min(end, until);
      if (b > a) busy.emplace_back(a, b);
    }
    std::sort(busy.begin(), busy.end());
    double covered = 0, reach = from;
    for (const auto& [a, b] : busy) {
      const double start = std::max(a, reach);
      if (b > start) {
        covered += b - start;
        reach = b;
      }
    }
    idle_s += (until - from) - covered;
  }
  return idle_s / 3600;
}

JobsMoney jobs_money(const std::vector<Job>& jobs, const std::vector<InstanceRecord>& instances,
                     const std::vector<AcceptedSpan>& accepted, const PriceConfig& prices,
                     double since, double now) {
  JobsMoney money;
  money.since = since;
  money.until = now;
  // The money ledger's rules over one bucket, the window (core/money_ledger.h): the money page
  // and this report count delivered jobs and spend the same way.
  const double span = now > since ? now - since : 1;
  const auto ledger =
      money_ledger(count_deliveries(jobs, since, now, span), instances, prices, since, now, span);
  money.revenue_usd = ledger.total.revenue_usd;
  money.delivered_on_time = static_cast<int>(ledger.total.delivered_on_time);
  money.delivered_unpriced = static_cast<int>(ledger.total.delivered_unpriced);
  money.delivered_late = static_cast<int>(ledger.total.delivered_late);
  money.spend_usd = ledger.total.spend.total();
  money.realised_cost_per_proof = ledger.total.cost_per_proof();
  const double hours = (now - since) / 3600;
  if (hours > 0) money.revenue_per_hour = money.revenue_usd / hours;
  money.idle_hours = idle_hours(accepted, jobs, since, now);
  return money;
}

const char* to_string(ProfitBasis basis) {
  return basis == ProfitBasis::JobsDelivered ? "jobs_delivered" : "proofs_measured";
}

FleetProfit fleet_profit(bool gateway_has_jobs, double measured_proofs_per_hour,
                         double revenue_per_proof_usd, double dollars_per_hour,
                         double delivered_revenue_per_hour) {
  FleetProfit out;
  if (gateway_has_jobs) {
    out.basis = ProfitBasis::JobsDelivered;
    out.revenue_per_hour = delivered_revenue_per_hour;
    out.reason = "revenue of jobs delivered on time ($" + fixed(delivered_revenue_per_hour, 3) +
                 "/hr) less the live fleet's cost";
  } else {
    out.basis = ProfitBasis::ProofsMeasured;
    out.revenue_per_hour = measured_proofs_per_hour * revenue_per_proof_usd;
    out.reason = "no gateway jobs yet: accepted instances' measured proofs/hour x $" +
                 fixed(revenue_per_proof_usd, 4) + " per proof, proofs nobody asked for";
  }
  out.profit_per_hour = out.revenue_per_hour - dollars_per_hour;
  return out;
}

}  // namespace pf::core
