// FakeMarket: an in-memory Market for unit tests (a test double; the product never uses it).
// Offers can be listed, instances created/destroyed, and failures scripted per call.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "market/market.h"

namespace pf::testing {

class FakeMarket : public market::Market {
 public:
  std::vector<core::Offer> offers;
  std::map<std::int64_t, market::Instance> instances;  // live instances by id
  std::int64_t next_id = 5000;
  // Scripted failures: each call pops the next error if any.
  std::vector<market::MarketError> create_errors;
  bool create_executes_despite_error = false;  // the reply is lost but the instance exists
  int destroy_failures = 0;                    // fail this many destroys first
  bool list_fails = false;
  bool search_fails = false;
  int creates = 0, destroys = 0, lists = 0, searches = 0;
  std::vector<std::int64_t> destroyed;
  std::vector<market::CreateRequest> create_requests;
  std::map<std::int64_t, double> bids;  // change_bid's last price per instance
  int change_bid_failures = 0;          // fail this many changes of bid first
  int bid_changes = 0;

  void add_offer(std::int64_t id, std::int64_t machine, double dph, double ram_gib = 512,
                 const std::string& gpu = "RTX 4090") {
    core::Offer o;
    o.id = id;
    o.machine_id = machine;
    o.gpu_name = gpu;
    o.num_gpus = 1;
    o.cpu_ram_gib = ram_gib;
    o.cpu_cores = o.cpu_cores_effective = 64;
    o.pcie_bw_gbs = 25;
    o.inet_down_mbps = 1000;
    o.inet_down_cost_per_gb = 0.001;
    o.dph_total = dph;
    core::derive_offer_fields(o);
    offers.push_back(o);
  }

  void set_status(std::int64_t instance_id, const std::string& status) {
    std::lock_guard lock(mu_);
    instances.at(instance_id).actual_status = status;
  }
  // Any other field of an instance as the market reports it (a stop's intended_status, ...).
  template <typename Change>
  void edit_instance(std::int64_t instance_id, Change&& change) {
    std::lock_guard lock(mu_);
    change(instances.at(instance_id));
  }

  market::Result<market::SearchResult> search_offers(const market::SearchRequest& req) override {
    std::lock_guard lock(mu_);
    ++searches;
    if (search_fails)
      return tl::unexpected(market::MarketError{market::ErrorKind::Transport, 0, "", "down"});
    market::SearchResult r;
    for (const auto& o : offers) {
      if (req.query.contains("id") && req.query["id"]["eq"].get<std::int64_t>() != o.id) continue;
      bool rented = std::any_of(instances.begin(), instances.end(), [&](const auto& kv) {
        return kv.second.raw.value("offer", 0) == o.id;
      });
      if (!rented) r.offers.push_back(o);
    }
    return r;
  }

  market::Result<market::CreateResult> create_instance(const market::CreateRequest& req) override {
    std::lock_guard lock(mu_);
    creates++;
    create_requests.push_back(req);
    if (!create_errors.empty()) {
      auto e = create_errors.front();
      create_errors.erase(create_errors.begin());
      if (create_executes_despite_error) make_instance(req);
      return tl::unexpected(e);
    }
    market::CreateResult r;
    r.instance_id = make_instance(req);
    return r;
  }

  market::Result<std::vector<market::Instance>> list_instances(
      const std::optional<std::string>& label) override {
    std::lock_guard lock(mu_);
    lists++;
    if (list_fails)
      return tl::unexpected(market::MarketError{market::ErrorKind::Transport, 0, "", "down"});
    std::vector<market::Instance> out;
    for (const auto& [id, inst] : instances) {
      if (!label || inst.label == *label) out.push_back(inst);
    }
    return out;
  }

  market::Result<std::optional<market::Instance>> show_instance(std::int64_t id) override {
    std::lock_guard lock(mu_);
    auto it = instances.find(id);
    if (it == instances.end()) return std::optional<market::Instance>{};
    return std::optional<market::Instance>{it->second};
  }

  market::Result<void> destroy_instance(std::int64_t id) override {
    std::lock_guard lock(mu_);
    destroys++;
    if (destroy_failures > 0) {
      destroy_failures--;
      return tl::unexpected(
          market::MarketError{market::ErrorKind::RateLimited, 429, "", "slow down"});
    }
    instances.erase(id);
    destroyed.push_back(id);
    return {};
  }

  market::Result<void> set_label(std::int64_t id, const std::string& label) override {
    std::lock_guard lock(mu_);
    auto it = instances.find(id);
    if (it == instances.end())
      return tl::unexpected(
          market::MarketError{market::ErrorKind::NotFound, 404, "no_such_instance", "gone"});
    it->second.label = label;
    return {};
  }

  market::Result<void> change_bid(std::int64_t id, double price) override {
    std::lock_guard lock(mu_);
    ++bid_changes;
    if (change_bid_failures > 0) {
      --change_bid_failures;
      return tl::unexpected(
          market::MarketError{market::ErrorKind::Transport, 0, "", "connection reset"});
    }
    auto it = instances.find(id);
    if (it == instances.end())
      return tl::unexpected(
          market::MarketError{market::ErrorKind::NotFound, 404, "no_such_instance", "gone"});
    bids[id] = price;
    return {};
  }

  // Adds an instance directly (e.g. an orphan with our label).
  std::int64_t inject(const std::string& label, std::int64_t machine = 1) {
    std::lock_guard lock(mu_);
    market::Instance inst;
    inst.id = next_id++;
    inst.label = label;
    inst.machine_id = machine;
    inst.actual_status = "running";
    inst.gpu_name = "RTX 4090";
    inst.num_gpus = 1;
    inst.dph_total = 0.3;
    instances[inst.id] = inst;
    return inst.id;
  }

 private:
  std::int64_t make_instance(const market::CreateRequest& req) {
    market::Instance inst;
    inst.id = next_id++;
    inst.label = req.label;
    inst.actual_status = "loading";
    for (const auto& o : offers) {
      if (o.id == req.offer_id) {
        inst.machine_id = o.machine_id;
        inst.gpu_name = o.gpu_name;
        inst.num_gpus = o.num_gpus;
        inst.dph_total = o.dph_total;
        // As vast: a create with a price is an interruptible rental whose dph_total is the bid
        // plus the storage (dph_total - dph_base).
        if (req.bid_price) {
          inst.is_bid = true;
          inst.dph_total = *req.bid_price + (o.dph_base > 0 ? o.dph_total - o.dph_base : 0);
          bids[inst.id] = *req.bid_price;
        }
      }
    }
    inst.raw = {{"offer", req.offer_id}};
    instances[inst.id] = inst;
    return inst.id;
  }
  std::recursive_mutex mu_;
};

}  // namespace pf::testing
