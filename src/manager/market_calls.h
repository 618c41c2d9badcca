// What the manager remembers of its own market calls between rounds, apart from the store and
// under its own lock (not the Manager's): the creates still running (reconcile must not take a
// row's absence from the market's list as proof that nothing was rented while its create has
// not returned), when each destroy and each change of bid was last sent (both are retried until
// confirmed, paced by [lifecycle] destroy_retry_s) and whether the last reconcile saw a complete
// list. Kept in memory: after a restart nothing is in flight, a destroy or a change of bid is
// sent at once, and the next reconcile says whether the list is complete.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace pf::manager {

class MarketCalls {
 public:
  void create_started(std::int64_t row_id) {
    std::lock_guard lock(mu_);
    creates_in_flight_.insert(row_id);
  }
  void create_returned(std::int64_t row_id) {
    std::lock_guard lock(mu_);
    creates_in_flight_.erase(row_id);
  }
  std::set<std::int64_t> creates_in_flight() const {
    std::lock_guard lock(mu_);
    return creates_in_flight_;
  }

  // Whether a destroy of the row may be sent now (none yet, or the last one retry_s ago); when
  // it may, `now` is recorded as its attempt.
  bool destroy_due(std::int64_t row_id, double now, double retry_s) {
    return due(last_destroy_attempt_, row_id, now, retry_s);
  }
  // The market confirmed the destroy: nothing more to pace.
  void destroyed(std::int64_t row_id) {
    std::lock_guard lock(mu_);
    last_destroy_attempt_.erase(row_id);
    last_bid_change_.erase(row_id);
  }

  // Whether a change of the row's bid may be sent now (none yet, or the last one retry_s ago);
  // when it may, `now` is recorded as its attempt. A confirmed change updates the row, which
  // ends the decision to send it.
  bool bid_change_due(std::int64_t row_id, double now, double retry_s) {
    return due(last_bid_change_, row_id, now, retry_s);
  }

  // Empty when the last reconcile saw a complete market list (at `at`, epoch s).
  void reconcile_listed(std::string error, double at) {
    std::lock_guard lock(mu_);
    if (error.empty()) last_complete_list_at_ = at;
    last_reconcile_error_ = std::move(error);
  }
  std::string last_reconcile_error() const {
    std::lock_guard lock(mu_);
    return last_reconcile_error_;
  }
  // When a reconcile last saw a complete list; nullopt before the first.
  std::optional<double> last_complete_list_at() const {
    std::lock_guard lock(mu_);
    return last_complete_list_at_;
  }

 private:
  bool due(std::map<std::int64_t, double>& last_sent, std::int64_t row_id, double now,
           double retry_s) {
    std::lock_guard lock(mu_);
    const auto last = last_sent.find(row_id);
    if (last != last_sent.end() && now - last->second < retry_s) return false;
    last_sent[row_id] = now;
    return true;
  }

  mutable std::mutex mu_;
  std::set<std::int64_t> creates_in_flight_;
  std::map<std::int64_t, double> last_destroy_attempt_;
  std::map<std::int64_t, double> last_bid_change_;
  std::string last_reconcile_error_;
  std::optional<double> last_complete_list_at_;
};

}  // namespace pf::manager
