#include "manager/dashboard_snapshot.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

#include "manager/views.h"
#include "store/store.h"
#include "util/bounded_json.h"

namespace pf::manager {
namespace {

using nlohmann::json;

// The offer fields the dashboard shows. With hundreds of instances a full offer and plan per
// row would multiply every event's size.
constexpr std::array<const char*, 13> kRowOfferFields{
    "id",          "machine_id",  "host_id",        "gpu_name",    "num_gpus",
    "gpu_ram_gib", "cpu_ram_gib", "usable_ram_gib", "geolocation", "dph_total",
    "reliability", "verified",    "inet_down_mbps",
};

}  // namespace

json dashboard_row(core::InstanceRecord record) {
  record.plan_json.clear();  // left out: not worth parsing (every row, every second) to drop it
  json row = to_json(record);
  row.erase("plan");
  json offer = json::object();
  const json& full = row["offer"];
  for (const char* key : kRowOfferFields) {
    if (full.contains(key)) offer[key] = full[key];
  }
  row["offer"] = std::move(offer);
  return row;
}

std::string SnapshotText::joined(std::optional<double> at) const {
  std::string out;
  out.reserve(alerts.size() + autopilot.size() + instances.size() + summary.size() + 80);
  out += "{\"alerts\":";
  out += alerts;
  if (at) {
    out += ",\"at\":";
    out += util::dump_json_lossy(json(*at));
  }
  out += ",\"autopilot\":";
  out += autopilot;
  out += ",\"instances\":";
  out += instances;
  out += ",\"summary\":";
  out += summary;
  out += '}';
  return out;
}

SnapshotBuilder::SnapshotBuilder(Manager& manager, const DashboardOptions& options)
    : manager_(manager), options_(options) {}

SnapshotText SnapshotBuilder::build() {
  // The live rows and the recently destroyed ones, by id; never the whole history (issue 14).
  // The live rows are read once and serve the summary (and its jobs report) too.
  auto& store = manager_.store();
  auto live = store.instances(false);
  SnapshotText text;
  text.summary = util::dump_json_lossy(options_.summary ? options_.summary(live)
                                                        : to_json(manager_.summary(live)));
  text.autopilot = util::dump_json_lossy(options_.autopilot ? options_.autopilot() : json(nullptr));
  text.alerts = util::dump_json_lossy(to_json(manager_.alerts()));
  const double recent_since = options_.clock() - options_.recent_destroyed_s;
  std::vector<core::InstanceRecord> recent;
  for (auto& record : store.destroyed_instances_since(recent_since)) {
    if (record.destroyed_at && *record.destroyed_at >= recent_since) {
      recent.push_back(std::move(record));
    }
  }
  std::vector<core::InstanceRecord> rows;
  rows.reserve(live.size() + recent.size());
  std::merge(std::make_move_iterator(live.begin()), std::make_move_iterator(live.end()),
             std::make_move_iterator(recent.begin()), std::make_move_iterator(recent.end()),
             std::back_inserter(rows), [](const auto& a, const auto& b) { return a.id < b.id; });
  text.instances = rows_text(std::move(rows));
  return text;
}

std::string SnapshotBuilder::rows_text(std::vector<core::InstanceRecord> rows) {
  std::unordered_map<std::int64_t, CachedRow> kept;
  kept.reserve(rows.size());
  std::string out = "[";
  for (auto& record : rows) {
    const std::int64_t id = record.id;
    auto cached = rows_.find(id);
    CachedRow row;
    if (cached != rows_.end() && cached->second.record == record) {
      row = std::move(cached->second);
    } else {
      row.text = util::dump_json_lossy(dashboard_row(record));
      row.record = std::move(record);
    }
    if (out.size() > 1) out += ',';
    out += row.text;
    kept.insert_or_assign(id, std::move(row));
  }
  out += ']';
  rows_ = std::move(kept);
  return out;
}

}  // namespace pf::manager
