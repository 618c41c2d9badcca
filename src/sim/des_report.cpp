#include "sim/des_report.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "core/text.h"

namespace pf::sim {
namespace {

using core::fixed;

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string money(double usd) {
  return (usd < 0 ? "-$" : "$") + fixed(std::abs(usd), 2);
}

std::string cost_text(const std::optional<double>& v) {
  return v ? "$" + fixed(*v, 5) : std::string("-");
}

std::string pad(const std::string& s, std::size_t width) {
  // Column widths count code points, so UTF-8 text lines up too.
  std::size_t cps = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++cps;
  return cps >= width ? s : s + std::string(width - cps, ' ');
}

}  // namespace

std::optional<double> share_of_bound(const DesReport& r) {
  if (!r.bound_profit_usd || *r.bound_profit_usd <= 0) return std::nullopt;
  return r.profit_usd / *r.bound_profit_usd;
}

nlohmann::json report_json(const DesReport& r, bool details) {
  nlohmann::json j = nlohmann::json::object();
  j["scenario"] = r.scenario;
  j["policy"] = r.policy;
  j["hours"] = r.hours;
  j["proofs"] = r.proofs;
  j["revenue_usd"] = r.revenue_usd;
  j["spend_usd"] = r.spend_usd;
  j["profit_usd"] = r.profit_usd;
  j["cost_per_proof_usd"] = optional_number(r.cost_per_proof_usd);
  j["benchmark_spend_usd"] = r.benchmark_spend_usd;
  j["instances_rented"] = r.instances_rented;
  j["instances_accepted"] = r.instances_accepted;
  j["accepted_unprofitable"] = r.accepted_unprofitable;
  j["rejected_profitable"] = r.rejected_profitable;
  j["rejected_by_target"] = r.rejected_by_target;
  j["ooms"] = r.ooms;
  j["mean_proofs_per_hour"] = r.mean_proofs_per_hour;
  j["seed"] = r.seed;
  j["proofs_unpaid"] = r.proofs_unpaid;
  j["bandwidth_usd"] = r.bandwidth_usd;
  j["storage_usd"] = r.storage_usd;
  j["bid_rentals"] = r.bid_rentals;
  j["preemptions"] = r.preemptions;
  j["bid_raises"] = r.bid_raises;
  j["bid_lowerings"] = r.bid_lowerings;
  j["instances_rejected"] = r.instances_rejected;
  j["short_rentals"] = r.short_rentals;
  j["ooms_after_first_on_host"] = r.ooms_after_first_on_host;
  j["decisions"] = r.decisions;
  if (r.jobs) {
    j["jobs_arrived"] = r.jobs_arrived;
    j["jobs_served_on_time"] = r.jobs_served_on_time;
    j["jobs_late"] = r.jobs_late;
    j["jobs_unserved"] = r.jobs_unserved;
    j["queue_wait_p95_min"] = r.queue_wait_p95_min;
    j["idle_instance_hours"] = r.idle_instance_hours;
    j["hedges"] = r.hedges;
    j["hedges_won"] = r.hedges_won;
    j["hedges_won_on_time"] = r.hedges_won_on_time;
    j["hedge_usd"] = r.hedge_usd;
  }
  if (r.bound_profit_usd) {
    j["bound_profit_usd"] = *r.bound_profit_usd;
    j["profit_vs_bound"] = optional_number(share_of_bound(r));
  }
  if (details) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& i : r.instances) {
      list.push_back({{"instance_id", i.instance_id},
                      {"offer_id", i.offer_id},
                      {"machine_id", i.machine_id},
                      {"gpu", i.gpu},
                      {"dph", i.dph},
                      {"rented_h", i.rented_h},
                      {"closed_h", optional_number(i.closed_h)},
                      {"final_state", i.final_state},
                      {"close_reason", i.close_reason},
                      {"close_cause", i.close_cause},
                      {"accepted", i.accepted},
                      {"verdict_rate", i.verdict_rate},
                      {"verdict_samples", i.verdict_samples},
                      {"truth_rate", i.truth_rate},
                      {"partitions", i.partitions},
                      {"ooms", i.ooms},
                      {"proofs_paid", i.proofs_paid},
                      {"spend_usd", i.spend_usd},
                      {"revenue_usd", i.revenue_usd},
                      {"accepted_unprofitable", i.accepted_unprofitable},
                      {"rejected_profitable", i.rejected_profitable},
                      {"rejected_by_target", i.rejected_by_target}});
    }
    j["instances"] = std::move(list);
  }
  return j;
}

std::string report_text(const DesReport& r) {
  std::ostringstream out;
  out << "scenario " << r.scenario << " (seed " << r.seed << ", " << fixed(r.hours, 1)
      << " h), policy " << r.policy << "\n"
      << "  profit        " << money(r.profit_usd) << "  (revenue " << money(r.revenue_usd)
      << ", spend " << money(r.spend_usd) << ", of which benchmarks "
      << money(r.benchmark_spend_usd) << ", storage " << money(r.storage_usd) << ", bandwidth "
      << money(r.bandwidth_usd) << ")\n"
      << "  proofs        " << r.proofs << " paid (" << fixed(r.mean_proofs_per_hour, 1) << "/hr), "
      << r.proofs_unpaid << " beyond demand; $/proof " << cost_text(r.cost_per_proof_usd) << "\n"
      << "  instances     " << r.instances_rented << " rented, " << r.instances_accepted
      << " accepted, " << r.instances_rejected << " closed before a verdict or rejected; "
      << r.short_rentals << " dropped within " << fixed(kShortRentalH, 0) << " h; " << r.bid_rentals
      << " as bids, preempted " << r.preemptions << " times, " << r.bid_raises << " bids raised\n"
      << "  mistakes      " << r.accepted_unprofitable << " accepted unprofitable, "
      << r.rejected_profitable << " rejected profitable (" << r.rejected_by_target
      << " more by its own $/proof target)\n"
      << "  OOMs          " << r.ooms << " (" << r.ooms_after_first_on_host
      << " after the first on a host)\n";
  if (r.jobs) {
    out << "  jobs          " << r.jobs_arrived << " arrived, " << r.jobs_served_on_time
        << " served on time, " << r.jobs_late << " late, " << r.jobs_unserved
        << " unserved; queue wait p95 " << fixed(r.queue_wait_p95_min, 1) << " min; "
        << fixed(r.idle_instance_hours, 1) << " idle instance-hours\n";
    if (r.hedges > 0) {
      out << "  hedges        " << r.hedges << " started, " << r.hedges_won << " finished first ("
          << r.hedges_won_on_time << " on time); the losing copies cost " << money(r.hedge_usd)
          << "\n";
    }
  }
  return out.str();
}

std::string compare_text(const std::vector<DesReport>& reports, const std::string& reference) {
  const DesReport* ref = nullptr;
  for (const auto& r : reports)
    if (r.policy == reference) ref = &r;
  const bool jobs =
      std::any_of(reports.begin(), reports.end(), [](const auto& r) { return r.jobs; });
  const bool bids =
      std::any_of(reports.begin(), reports.end(), [](const auto& r) { return r.bid_rentals > 0; });
  using Cell = std::function<std::string(const DesReport&)>;
  std::vector<std::pair<std::string, Cell>> row_cells = {
      {"profit", [](const DesReport& r) { return money(r.profit_usd); }},
      {"profit vs bound",
       [](const DesReport& r) {
         const auto share = share_of_bound(r);
         return share ? core::percent(*share) : std::string("-");
       }},
      {"profit vs " + reference,
       [ref](const DesReport& r) {
         return ref && ref->profit_usd != 0 ? core::percent(r.profit_usd / ref->profit_usd)
                                            : std::string("-");
       }},
      {"revenue", [](const DesReport& r) { return money(r.revenue_usd); }},
      {"spend", [](const DesReport& r) { return money(r.spend_usd); }},
      // By what vast bills (core/billing.h): compute while it runs, storage in every state but
      // offline, bandwidth both ways.
      {"  compute",
       [](const DesReport& r) { return money(r.spend_usd - r.storage_usd - r.bandwidth_usd); }},
      {"  storage", [](const DesReport& r) { return money(r.storage_usd); }},
      {"  bandwidth", [](const DesReport& r) { return money(r.bandwidth_usd); }},
      {"benchmark spend", [](const DesReport& r) { return money(r.benchmark_spend_usd); }},
      {"$/proof", [](const DesReport& r) { return cost_text(r.cost_per_proof_usd); }},
      {"$/proof vs " + reference,
       [ref](const DesReport& r) {
         return ref && ref->cost_per_proof_usd && r.cost_per_proof_usd &&
                        *ref->cost_per_proof_usd > 0
                    ? "x" + fixed(*r.cost_per_proof_usd / *ref->cost_per_proof_usd, 2)
                    : std::string("-");
       }},
      {"proofs paid", [](const DesReport& r) { return std::to_string(r.proofs); }},
      {"proofs/hour", [](const DesReport& r) { return fixed(r.mean_proofs_per_hour, 1); }},
  };
  if (jobs) {
    row_cells.push_back({"jobs on time", [](const DesReport& r) {
                           return r.jobs_arrived > 0
                                      ? fixed(100.0 * static_cast<double>(r.jobs_served_on_time) /
                                                  static_cast<double>(r.jobs_arrived),
                                              1) +
                                            "%"
                                      : std::string("-");
                         }});
    row_cells.push_back(
        {"jobs late", [](const DesReport& r) { return std::to_string(r.jobs_late); }});
    row_cells.push_back(
        {"jobs unserved", [](const DesReport& r) { return std::to_string(r.jobs_unserved); }});
    row_cells.push_back({"idle instance-hours",
                         [](const DesReport& r) { return fixed(r.idle_instance_hours, 1); }});
    // Hedged proving (core/job_hedge.h): copies started, those that won on time, and what the
    // losing copies cost (part of the spend above).
    row_cells.push_back({"hedges (won on time)", [](const DesReport& r) {
                           return std::to_string(r.hedges) + " (" +
                                  std::to_string(r.hedges_won_on_time) + ")";
                         }});
    row_cells.push_back({"  hedge spend", [](const DesReport& r) { return money(r.hedge_usd); }});
  }
  row_cells.push_back(
      {"rented", [](const DesReport& r) { return std::to_string(r.instances_rented); }});
  row_cells.push_back({"  dropped within " + fixed(kShortRentalH, 0) + " h",
                       [](const DesReport& r) { return std::to_string(r.short_rentals); }});
  if (bids) {
    row_cells.push_back(
        {"  as bids", [](const DesReport& r) { return std::to_string(r.bid_rentals); }});
    row_cells.push_back(
        {"preemptions", [](const DesReport& r) { return std::to_string(r.preemptions); }});
    row_cells.push_back({"bids raised/lowered", [](const DesReport& r) {
                           return std::to_string(r.bid_raises) + "/" +
                                  std::to_string(r.bid_lowerings);
                         }});
  }
  row_cells.insert(
      row_cells.end(),
      {
          {"accepted", [](const DesReport& r) { return std::to_string(r.instances_accepted); }},
          {"accepted unprofitable",
           [](const DesReport& r) { return std::to_string(r.accepted_unprofitable); }},
          {"rejected profitable",
           [](const DesReport& r) { return std::to_string(r.rejected_profitable); }},
          {"rejected by own target",
           [](const DesReport& r) { return std::to_string(r.rejected_by_target); }},
          {"OOMs", [](const DesReport& r) { return std::to_string(r.ooms); }},
          {"OOMs after first on host",
           [](const DesReport& r) { return std::to_string(r.ooms_after_first_on_host); }},
      });
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  for (const auto& [label, cell] : row_cells) {
    std::vector<std::string> cells;
    for (const auto& r : reports) cells.push_back(cell(r));
    rows.emplace_back(label, std::move(cells));
  }
  std::size_t label_w = 0;
  for (const auto& [label, cells] : rows) label_w = std::max(label_w, label.size());
  std::vector<std::size_t> col_w;
  for (std::size_t c = 0; c < reports.size(); ++c) {
    std::size_t w = reports[c].policy.size();
    for (const auto& [label, cells] : rows) w = std::max(w, cells[c].size());
    col_w.push_back(w + 2);
  }
  std::ostringstream out;
  if (!reports.empty()) {
    out << "scenario " << reports.front().scenario << " (seed " << reports.front().seed << ", "
        << fixed(reports.front().hours, 1) << " h)";
    if (const auto& bound = reports.front().bound_profit_usd) {
      out << "; profit bound " << money(*bound) << " (no policy can expect more)";
    }
    out << "\n";
  }
  out << pad("", label_w + 2);
  for (std::size_t c = 0; c < reports.size(); ++c) out << pad(reports[c].policy, col_w[c]);
  out << "\n";
  for (const auto& [label, cells] : rows) {
    out << pad(label, label_w + 2);
    for (std::size_t c = 0; c < cells.size(); ++c) out << pad(cells[c], col_w[c]);
    out << "\n";
  }
  return out.str();
}

}  // namespace pf::sim
