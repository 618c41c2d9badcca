// Test fixture: a real Manager on an in-memory store and the FakeMarket (offers 101 at $0.40/h
// and 102 at $0.20/h), with a manual clock. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "core/predictor.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf::test {

class ManagerFixture : public ::testing::Test {
 protected:
  void SetUp() override { start_manager(default_config()); }

  // The config SetUp uses: the default predictor, everything else the ManagerConfig defaults.
  static manager::ManagerConfig default_config() {
    manager::ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    return cfg;
  }

  // For fixtures that need another config: call from their SetUp instead of this SetUp.
  void start_manager(const manager::ManagerConfig& cfg) {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);
    market_.add_offer(102, 12, 0.20);
    manager_ =
        std::make_unique<manager::Manager>(*store_, market_, cfg, [this] { return now_.load(); });
  }

  std::atomic<double> now_{1'000'000};
  std::unique_ptr<store::Store> store_;
  pf::testing::FakeMarket market_;
  std::unique_ptr<manager::Manager> manager_;
};

}  // namespace pf::test
