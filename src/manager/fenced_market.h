// The market as a replica may use it (issue 14): reads pass through; every mutation (create,
// destroy, relabel: what spends or stops money) first confirms in the store that this replica
// still holds the leader lease under the term it acts for (Leadership::fence_refusal) and is
// refused otherwise with ErrorKind::NotLeader, logged, nothing sent. So a paused ex-leader that
// wakes mid-loop cannot rent or destroy once another replica took over.
//
// What remains open: a pause longer than the lease's guard_s falling exactly between the check
// and the send; the market itself has no fencing token to carry the epoch further.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "manager/leadership.h"
#include "market/market.h"

namespace pf::manager {

class FencedMarket final : public market::Market {
 public:
  // `log` is told each refusal (the manager layer does no logging; serve passes spdlog).
  FencedMarket(market::Market& inner, Leadership& leadership,
               std::function<void(const std::string&)> log = {})
      : inner_(inner), leadership_(leadership), log_(std::move(log)) {}

  market::Result<market::SearchResult> search_offers(
      const market::SearchRequest& request) override {
    return inner_.search_offers(request);
  }
  market::Result<market::CreateResult> create_instance(
      const market::CreateRequest& request) override;
  market::Result<std::vector<market::Instance>> list_instances(
      const std::optional<std::string>& label = std::nullopt) override {
    return inner_.list_instances(label);
  }
  market::Result<std::optional<market::Instance>> show_instance(std::int64_t id) override {
    return inner_.show_instance(id);
  }
  market::Result<void> destroy_instance(std::int64_t id) override;
  market::Result<void> set_label(std::int64_t id, const std::string& label) override;
  market::Result<void> change_bid(std::int64_t id, double price) override;

  // Mutations refused so far (for tests and the log).
  int refused() const { return refused_.load(); }

 private:
  // nullopt: go ahead; else the NotLeader error for `what`.
  std::optional<market::MarketError> refuse(const std::string& what);

  market::Market& inner_;
  Leadership& leadership_;
  std::function<void(const std::string&)> log_;
  std::atomic<int> refused_{0};
};

}  // namespace pf::manager
