// core::unconfirmed_create_close_reason: when a rent whose create had no definite answer is
// known to have rented nothing.
#include "core/unconfirmed_create.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

InstanceRecord renting_since(double created_at) {
  InstanceRecord rec;
  rec.state = InstanceState::Renting;
  rec.created_at = created_at;
  return rec;
}

UnconfirmedCreate seen(bool in_flight, bool listed) {
  return UnconfirmedCreate{in_flight, listed, 120, 600};
}

TEST(UnconfirmedCreate, WaitsForTheGraceBecauseReadsLagCreates) {
  const auto rec = renting_since(1000);
  EXPECT_FALSE(unconfirmed_create_close_reason(rec, 1000, seen(false, false)));
  EXPECT_FALSE(unconfirmed_create_close_reason(rec, 1119, seen(false, false)));
  auto why = unconfirmed_create_close_reason(rec, 1120, seen(false, false));
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("no instance with its label"));
}

TEST(UnconfirmedCreate, ACreateStillRunningWaitsUpToTheRentingLimit) {
  const auto rec = renting_since(1000);
  EXPECT_FALSE(unconfirmed_create_close_reason(rec, 1500, seen(true, false)));
  auto why = unconfirmed_create_close_reason(rec, 1600, seen(true, false));
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("never appeared"));
}

TEST(UnconfirmedCreate, AListedLabelOrAKnownInstanceIsNeverClosedHere) {
  auto rec = renting_since(1000);
  EXPECT_FALSE(unconfirmed_create_close_reason(rec, 5000, seen(false, true)));
  rec.market_id = 77;
  EXPECT_FALSE(unconfirmed_create_close_reason(rec, 5000, seen(false, false)));
  rec = renting_since(1000);
  rec.state = InstanceState::Booting;
  EXPECT_FALSE(unconfirmed_create_close_reason(rec, 5000, seen(false, false)));
}

}  // namespace
}  // namespace pf::core
