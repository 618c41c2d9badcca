#include "store/written_copies.h"

#include <iterator>
#include <limits>

namespace pf::store {

bool SeqSet::contains(std::int64_t seq) const {
  auto it = runs_.upper_bound(seq);  // the first run starting after seq
  if (it == runs_.begin()) return false;
  --it;
  return seq <= it->second;
}

bool SeqSet::insert(std::int64_t seq) {
  if (contains(seq)) return false;
  auto next = runs_.upper_bound(seq);
  // Joins the run ending just before it and the one starting just after it, if any.
  const bool joins_next = next != runs_.end() && seq != std::numeric_limits<std::int64_t>::max() &&
                          next->first == seq + 1;
  if (next != runs_.begin()) {
    auto prev = std::prev(next);
    if (seq != std::numeric_limits<std::int64_t>::min() && prev->second == seq - 1) {
      prev->second = joins_next ? next->second : seq;
      if (joins_next) runs_.erase(next);
      return true;
    }
  }
  const std::int64_t last = joins_next ? next->second : seq;
  if (joins_next) runs_.erase(next);
  runs_.emplace(seq, last);
  return true;
}

const core::InstanceRecord* WrittenCopies::row(std::int64_t id) const {
  auto it = rows_.find(id);
  return it == rows_.end() ? nullptr : &it->second;
}

core::InstanceRecord* WrittenCopies::mutable_row(std::int64_t id) {
  auto it = rows_.find(id);
  return it == rows_.end() ? nullptr : &it->second;
}

void WrittenCopies::keep_row(const core::InstanceRecord& row) {
  if (row.state == core::InstanceState::Destroyed) {
    forget(row.id);
    return;
  }
  rows_.insert_or_assign(row.id, row);
}

std::optional<bool> WrittenCopies::has_seq(std::int64_t instance_id, std::int64_t seq) const {
  auto it = seqs_.find(instance_id);
  if (it == seqs_.end()) return std::nullopt;
  return it->second.contains(seq);
}

void WrittenCopies::keep_seqs(std::int64_t instance_id, const std::vector<std::int64_t>& seqs) {
  SeqSet set;
  for (const std::int64_t seq : seqs) set.insert(seq);
  seqs_.insert_or_assign(instance_id, std::move(set));
}

void WrittenCopies::add_seq(std::int64_t instance_id, std::int64_t seq) {
  auto it = seqs_.find(instance_id);
  if (it != seqs_.end()) it->second.insert(seq);
}

void WrittenCopies::forget(std::int64_t instance_id) {
  rows_.erase(instance_id);
  seqs_.erase(instance_id);
}

void WrittenCopies::clear() {
  rows_.clear();
  seqs_.clear();
}

}  // namespace pf::store
