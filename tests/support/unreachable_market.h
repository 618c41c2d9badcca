// A Market that refuses every call (transport error): for benches and tests of agent-facing
// paths (heartbeats, events, jobs), which never reach the market.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "market/market.h"

namespace pf::testing {

class UnreachableMarket final : public market::Market {
  static market::MarketError err() {
    return {market::ErrorKind::Transport, 0, "", "benchmark: no market"};
  }

 public:
  market::Result<market::SearchResult> search_offers(const market::SearchRequest&) override {
    return tl::unexpected(err());
  }
  market::Result<market::CreateResult> create_instance(const market::CreateRequest&) override {
    return tl::unexpected(err());
  }
  market::Result<std::vector<market::Instance>> list_instances(
      const std::optional<std::string>&) override {
    return tl::unexpected(err());
  }
  market::Result<std::optional<market::Instance>> show_instance(std::int64_t) override {
    return tl::unexpected(err());
  }
  market::Result<void> destroy_instance(std::int64_t) override { return tl::unexpected(err()); }
  market::Result<void> set_label(std::int64_t, const std::string&) override {
    return tl::unexpected(err());
  }
  market::Result<void> change_bid(std::int64_t, double) override { return tl::unexpected(err()); }
};

}  // namespace pf::testing
