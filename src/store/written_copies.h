// What a store's one writer knows it wrote (issue 14's agent path): instance rows and agent event
// seqs as this process last read or wrote them, so the leader need not read back, under the
// Manager's lock, the row and the seqs of every agent heartbeat and events batch (each a round trip
// to PostgreSQL). Only sound while this process is the only writer of both: the leader (followers
// forward agent calls; no command but serve writes instance rows); SqlStore drops them all on any
// rollback and on forget_written_copies(), which the Manager calls when a term begins.
//
// Not thread-safe: SqlStore's mutex guards it. Destroyed rows are not kept (a closed instance's
// agent gets 410 and nothing else), so it holds the live fleet only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/fleet.h"

namespace pf::store {

// A set of int64s kept as disjoint closed intervals: an agent numbers its events 1, 2, 3, ..., so
// a rental's thousands of seqs are one or a few intervals.
class SeqSet {
 public:
  bool contains(std::int64_t seq) const;
  // Returns false if it was already there.
  bool insert(std::int64_t seq);
  std::size_t intervals() const { return runs_.size(); }

 private:
  std::map<std::int64_t, std::int64_t> runs_;  // first → last, disjoint, never adjacent
};

class WrittenCopies {
 public:
  // The kept row, or nullptr.
  const core::InstanceRecord* row(std::int64_t id) const;
  core::InstanceRecord* mutable_row(std::int64_t id);
  // Keeps `row` as the stored one (read, or written whole); a destroyed row forgets the instance.
  void keep_row(const core::InstanceRecord& row);

  // Whether `seq` of the instance is recorded; nullopt when the instance's seqs are not kept.
  std::optional<bool> has_seq(std::int64_t instance_id, std::int64_t seq) const;
  // Keeps every recorded seq of the instance (as read from the database).
  void keep_seqs(std::int64_t instance_id, const std::vector<std::int64_t>& seqs);
  // Adds a seq just recorded, if the instance's seqs are kept.
  void add_seq(std::int64_t instance_id, std::int64_t seq);

  void forget(std::int64_t instance_id);
  void clear();
  std::size_t rows_kept() const { return rows_.size(); }

 private:
  std::unordered_map<std::int64_t, core::InstanceRecord> rows_;
  std::unordered_map<std::int64_t, SeqSet> seqs_;
};

}  // namespace pf::store
