// The dashboard's snapshot: what each `fleet` event of GET /api/v1/stream carries (see
// Dashboard::snapshot for its shape), built as JSON text. Its cost must not grow with the
// fleet's history (issue 14): it reads the live rows once (they serve the summary and its jobs
// report too), the recently destroyed rows, and nothing older.
//
// Most of a snapshot is its instance rows, and most rows read back the same from one build to
// the next (a second apart). A row's text is therefore kept with the record it was made from
// and reused only while the row reads back equal in every field: never a stale row, only one
// not serialised twice. Rows that left the snapshot leave the cache at the next build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/fleet.h"
#include "manager/dashboard.h"
#include "manager/manager.h"

namespace pf::manager {

// A snapshot's parts, each as JSON text.
struct SnapshotText {
  std::string alerts, autopilot, instances, summary;  // instances: the array

  // The snapshot as one JSON object, byte for byte what nlohmann's dump of the same object
  // gives (keys sorted), with "at" (epoch seconds) when given.
  std::string joined(std::optional<double> at) const;
};

class SnapshotBuilder {
 public:
  // Both must outlive the builder.
  SnapshotBuilder(Manager& manager, const DashboardOptions& options);

  // Reads the store and builds a snapshot. One call at a time (the caller serialises).
  // Throws what the store throws.
  SnapshotText build();

 private:
  // The rows' JSON array, reusing the text of every row that reads back unchanged.
  std::string rows_text(std::vector<core::InstanceRecord> rows);

  struct CachedRow {
    core::InstanceRecord record;
    std::string text;
  };

  Manager& manager_;
  const DashboardOptions& options_;
  std::unordered_map<std::int64_t, CachedRow> rows_;  // by instance id: the last build's rows
};

// The dashboard's row of an instance: views.h's instance JSON without "plan", its offer cut to
// the fields the dashboard shows (the rest stays in GET /api/v1/instances/{id}).
nlohmann::json dashboard_row(core::InstanceRecord record);

}  // namespace pf::manager
