// core/billing.h: what vast.ai bills a rental for, and when (docs/vast-billing.md).
#include "core/billing.h"

#include <gtest/gtest.h>

namespace pf::core {
namespace {

// 200 GB at $0.18/GB/month is $0.05/hour of storage; dph_total $0.45 = compute $0.40 + that.
InstanceRecord rental(const std::string& status) {
  InstanceRecord r;
  r.id = 1;
  r.state = InstanceState::Booting;
  r.created_at = 1000;
  r.disk_gb = 200;
  r.offer.dph_total = 0.45;
  r.offer.storage_cost_gb_month = 0.18;
  r.offer.inet_down_cost_per_gb = 0.01;
  r.market_status = status;
  return r;
}

TEST(Billing, RatesSplitTheListedPriceIntoComputeAndTheRentedDisksStorage) {
  const InstanceRecord r = rental("running");
  EXPECT_NEAR(storage_usd_per_hour(r.offer, 200), 0.05, 1e-12);
  EXPECT_NEAR(compute_usd_per_hour(r.offer, 200), 0.40, 1e-12);
  Offer with_base = r.offer;
  with_base.dph_base = 0.38;  // the market said: it wins over the difference
  EXPECT_NEAR(compute_usd_per_hour(with_base, 200), 0.38, 1e-12);
  Offer cheap = r.offer;
  cheap.dph_total = 0.01;  // a listed price below the storage: compute is never negative
  EXPECT_EQ(compute_usd_per_hour(cheap, 200), 0);
  // A row from before the disk was recorded: storage as search priced it.
  Offer searched = r.offer;
  searched.storage_total_cost_per_hour = 0.03;
  EXPECT_NEAR(storage_usd_per_hour(searched, 0), 0.03, 1e-12);
}

// vast bills an interruptible rental's compute at its bid; storage as any rental's.
TEST(Billing, AnInterruptibleRentalPaysItsBidForComputeAndTheDisksStorage) {
  InstanceRecord r = rental("running");
  EXPECT_NEAR(rental_usd_per_hour(r), 0.45, 1e-12);  // on-demand: the listed price
  r.bid_price = 0.15;
  EXPECT_NEAR(rental_compute_usd_per_hour(r), 0.15, 1e-12);
  EXPECT_NEAR(rental_usd_per_hour(r), 0.20, 1e-12);
  r.billed_until = 1000;
  const Charges hour = accrue_rental_spend(r, 1000 + 3600);
  EXPECT_NEAR(hour.compute_usd, 0.15, 1e-12);
  EXPECT_NEAR(hour.storage_usd, 0.05, 1e-12);
  r.market_status = "stopped";  // outbid: storage only
  const Charges stopped = accrue_rental_spend(r, 1000 + 7200);
  EXPECT_EQ(stopped.compute_usd, 0);
  EXPECT_NEAR(stopped.storage_usd, 0.05, 1e-12);
}

TEST(Billing, StorageRunsInEveryStateButOfflineComputeOnlyWhileActive) {
  for (const char* status : {"", "created", "loading", "stopped"}) {
    EXPECT_TRUE(storage_billed(status)) << status;
    EXPECT_FALSE(compute_billed(status)) << status;
  }
  for (const char* status : {"running", "frozen"}) {
    EXPECT_TRUE(storage_billed(status)) << status;
    EXPECT_TRUE(compute_billed(status)) << status;
  }
  EXPECT_FALSE(storage_billed("offline"));
  EXPECT_FALSE(compute_billed("offline"));
}

TEST(Billing, AnHourLoadingPaysStorageAnHourRunningPaysBothOfflinePaysNothing) {
  InstanceRecord r = rental("loading");
  Charges c = accrue_rental_spend(r, 1000 + 3600);
  EXPECT_EQ(c.compute_usd, 0);
  EXPECT_NEAR(c.storage_usd, 0.05, 1e-12);
  r.market_status = "running";
  c = accrue_rental_spend(r, 1000 + 2 * 3600);
  EXPECT_NEAR(c.compute_usd, 0.40, 1e-12);
  EXPECT_NEAR(c.storage_usd, 0.05, 1e-12);
  r.market_status = "stopped";  // outbid or contract ended: the disk is still billed
  c = accrue_rental_spend(r, 1000 + 3 * 3600);
  EXPECT_NEAR(c.total(), 0.05, 1e-12);
  r.market_status = "offline";
  EXPECT_EQ(accrue_rental_spend(r, 1000 + 4 * 3600).total(), 0);
  EXPECT_NEAR(r.spend_usd, 0.55, 1e-12);
  EXPECT_NEAR(r.storage_spend_usd, 0.15, 1e-12);
  EXPECT_EQ(r.billed_until, 1000 + 4 * 3600);
  EXPECT_EQ(accrue_rental_spend(r, 1000).total(), 0);  // time never runs backwards
  EXPECT_EQ(r.billed_until, 1000 + 4 * 3600);
}

TEST(Billing, ADestroyedInstanceAccruesNothingMore) {
  InstanceRecord r = rental("running");
  r.state = InstanceState::Destroyed;
  EXPECT_EQ(accrue_rental_spend(r, 1000 + 3600).total(), 0);
  EXPECT_EQ(r.spend_usd, 0);
}

TEST(Billing, TheFirstAccrualStartsAtCreation) {
  InstanceRecord r = rental("");  // created, no status polled yet: storage already runs
  EXPECT_NEAR(accrue_rental_spend(r, 1000 + 1800).storage_usd, 0.025, 1e-12);
}

TEST(Billing, ParameterBandwidthIsBilledOnceForEachNewByte) {
  InstanceRecord r = rental("running");
  EXPECT_NEAR(accrue_bandwidth_spend(r, 10e9), 0.1, 1e-12);
  EXPECT_NEAR(accrue_bandwidth_spend(r, 5e9), 0, 1e-12);  // a stale report adds nothing
  EXPECT_NEAR(accrue_bandwidth_spend(r, 12e9), 0.02, 1e-12);
  EXPECT_NEAR(r.bandwidth_spend_usd, 0.12, 1e-12);
  EXPECT_NEAR(r.spend_usd, 0.12, 1e-12);
  EXPECT_EQ(r.params_done_bytes, 12e9);
}

TEST(Billing, JobAndLogBytesAreBilledAtEachDirectionsPrice) {
  InstanceRecord r = rental("running");
  r.offer.inet_up_cost_per_gb = 0.02;
  EXPECT_NEAR(accrue_transfer_spend(r, 51e6, 1920), 51e6 / 1e9 * 0.01 + 1920 / 1e9 * 0.02, 1e-15);
  EXPECT_EQ(accrue_transfer_spend(r, -5, -5), 0);  // nothing moved back
  EXPECT_NEAR(r.bandwidth_spend_usd, r.spend_usd, 1e-15);
}

}  // namespace
}  // namespace pf::core
