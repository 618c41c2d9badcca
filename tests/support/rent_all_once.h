// A test policy for the policy simulator: rents every listed offer once, proves for money right
// after warm-up (no benchmark), never drops anything, re-plans one partition smaller after an
// OOM. The engine's physics with no policy in the way.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "sim/des_engine.h"

namespace pf::test {

class RentAllOnce final : public sim::DesPolicy {
 public:
  std::string name() const override { return "rent-all-once"; }
  core::LifecycleConfig lifecycle() const override { return {}; }
  const core::Acceptance* acceptance() const override { return nullptr; }
  double break_even_rate(const core::Offer&) const override { return 0; }
  int plan_partitions(const core::Offer&, const sim::AgentProbe& probe,
                      int after_oom) const override {
    return after_oom > 0 ? after_oom - 1 : sim::planned_partitions(probe);
  }
  std::vector<core::Action> decide(const sim::DesView& view) override {
    history_ = view.history;
    std::vector<core::Action> out;
    for (const auto& o : view.offers) {
      if (!rented_.insert(o.id).second) continue;
      core::Action a;
      a.kind = core::Action::Kind::Rent;
      a.offer = o;
      a.prediction.rate = predicted_rate;
      a.reason = "test";
      out.push_back(a);
    }
    return out;
  }

  const core::BidConfig& bids() const override { return bid_config; }
  core::BidConfig bid_config;  // off unless a test turns bids on
  double predicted_rate = 0;   // the rate each rental is priced on (bids)

  // The measurements the engine had recorded at the last decision.
  const std::vector<core::Measurement>& history() const { return history_; }

 private:
  std::set<std::int64_t> rented_;
  std::vector<core::Measurement> history_;
};

inline sim::DesReport run_rent_all_once(const scenario::Scenario& s, RentAllOnce* keep = nullptr) {
  RentAllOnce local;
  RentAllOnce& policy = keep != nullptr ? *keep : local;
  sim::DesOptions options;
  options.details = true;
  return sim::run_des(s, policy, options);
}

}  // namespace pf::test
