#include "cli/offers_table.h"

#include <cmath>
#include <vector>

#include "cli/table.h"
#include "core/text.h"

namespace pf::cli {
namespace {

using nlohmann::json;

double number(const json& object, const char* key, double fallback = 0) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}
bool has_number(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number();
}
std::string text(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}
std::string integer(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? std::to_string(it->get<std::int64_t>()) : "?";
}
std::string plural(long n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The reasons worth a table cell: adjustments and risks, not the prior's provenance.
std::string short_reasons(const json& row) {
  std::string out;
  const auto it = row.find("reasons");
  if (it == row.end() || !it->is_array()) return "-";
  for (std::size_t i = 1; i < it->size(); ++i) {
    const auto& r = (*it)[i];
    if (!r.is_string()) continue;
    const auto& s = r.get_ref<const std::string&>();
    if (s.rfind("setup ~", 0) == 0) continue;
    if (!out.empty()) out += "; ";
    out += s;
  }
  // A host measured before leads its reasons: keep it even though it comes first.
  if (!it->empty() && (*it)[0].is_string() && text(row, "prediction_source") == "host") {
    out = (*it)[0].get<std::string>() + (out.empty() ? "" : "; " + out);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string history_cell(const json& row) {
  const auto it = row.find("history");
  if (it == row.end() || !it->is_object()) return "-";
  const json& h = *it;
  std::vector<std::string> parts;
  const auto rentals = static_cast<long>(number(h, "rentals"));
  const auto runs = static_cast<long>(number(h, "runs"));
  if (rentals > 0) parts.push_back(plural(rentals, "rental"));
  if (runs > 0) parts.push_back(plural(runs, "run"));
  if (has_number(h, "median_rate")) {
    parts.push_back("median " + core::fixed(number(h, "median_rate"), 1) + "/hr");
  }
  if (const std::string v = text(h, "last_verdict"); !v.empty()) parts.push_back("last " + v);
  if (const auto ooms = static_cast<long>(number(h, "ooms")); ooms > 0) {
    parts.push_back(std::to_string(ooms) + " OOM");
  }
  if (const auto crashes = static_cast<long>(number(h, "crashes")); crashes > 0) {
    parts.push_back(std::to_string(crashes) + (crashes == 1 ? " crash" : " crashes"));
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  const auto bad = h.find("bad_host");
  if (bad != h.end() && bad->is_object()) {
    out += (out.empty() ? "" : "; ") + std::string("BLOCKED (") + text(*bad, "source") +
           "): " + text(*bad, "reason");
  }
  return out.empty() ? "-" : out;
}

std::string break_even_cell(const json& row) {
  const double rate = number(row, "break_even_rate", number(row, "min_rate"));
  std::string out = core::fixed(rate, 1);
  const auto differ = row.find("break_evens_differ");
  if (differ != row.end() && differ->is_boolean() && differ->get<bool>()) {
    const bool revenue = text(row, "break_even_objective") != "target";
    out += revenue ? " (target " + core::fixed(number(row, "target_break_even_rate"), 1) + ")"
                   : " (revenue " + core::fixed(number(row, "revenue_break_even_rate"), 1) + ")";
  }
  return out;
}

void print_offers_table(const json& rows, std::ostream& out) {
  using A = Table::Align;
  Table t({{"ID"},
           {"GPU"},
           {"$/HR", A::Right},
           {"RATE/HR (BAND) SOURCE", A::Right},
           {"BREAK-EVEN/HR", A::Right},
           {"$/PROOF", A::Right},
           {"PROFIT/HR", A::Right},
           {"MACHINE HISTORY", A::Left, 70},
           {"WHY", A::Left, 90}});
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    t.add_row(
        {integer(r, "id"), text(r, "gpu_name") + " x" + integer(r, "num_gpus"),
         core::fixed(number(r, "dph_total"), 3),
         core::fixed(number(r, "predicted_rate"), 1) + " (" +
             core::fixed(number(r, "predicted_rate_low"), 0) + "-" +
             core::fixed(number(r, "predicted_rate_high"), 0) + ") " + text(r, "prediction_source"),
         break_even_cell(r),
         has_number(r, "expected_cost_per_proof")
             ? core::fixed(number(r, "expected_cost_per_proof"), 4)
             : "-",
         core::fixed(number(r, "expected_profit_per_hour"), 3), history_cell(r), short_reasons(r)});
  }
  t.print(out);
}

}  // namespace pf::cli
