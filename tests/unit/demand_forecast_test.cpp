// The daily-pattern forecast (core/demand_forecast.h): the same time of day on the previous
// days, blended with the trailing rate by how many days were watched.
#include "core/demand_forecast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kStart = 1'750'000'000;
constexpr double kDay = 86400;
constexpr double kHour = 3600;

// `per_hour` evenly spaced arrivals in [from, to).
void add_steady(std::vector<double>& out, double from, double to, double per_hour) {
  const double gap = 3600 / per_hour;
  for (double t = from + gap / 2; t < to; t += gap) out.push_back(t);
}

// Every day: 100/hr, except 600/hr from 09:00 to 12:00.
std::vector<double> business_days(int days) {
  std::vector<double> out;
  for (int d = 0; d < days; ++d) {
    const double day = kStart + d * kDay;
    add_steady(out, day, day + 9 * kHour, 100);
    add_steady(out, day + 9 * kHour, day + 12 * kHour, 600);
    add_steady(out, day + 12 * kHour, day + kDay, 100);
  }
  return out;
}

TEST(DemandForecast, NothingBeforeADayOfHistory) {
  const auto arrivals = business_days(1);
  // 20 h watched: the same time yesterday was never watched.
  EXPECT_FALSE(
      forecast_demand(arrivals, kStart, kStart + 20 * kHour, kStart + 21 * kHour, 100, {}));
}

TEST(DemandForecast, YesterdaysPeakIsForecastAnHourBeforeIt) {
  const auto arrivals = business_days(2);
  // Day 2, 08:00, trailing 100/hr: at 09:30 yesterday the rate was 600/hr.
  const double now = kStart + kDay + 8 * kHour;
  const auto f = forecast_demand(arrivals, kStart, now, now + 1.5 * kHour, 100, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->days, 1);
  EXPECT_NEAR(f->pattern_rate, 600, 1);
  EXPECT_DOUBLE_EQ(f->weight, 0.5);  // one day counts half
  EXPECT_NEAR(f->proofs_per_hour, 350, 1);
  EXPECT_THAT(f->reason, HasSubstr("1 day"));
}

TEST(DemandForecast, MoreDaysWeighThePatternMore) {
  const auto arrivals = business_days(5);
  const double now = kStart + 4 * kDay + 8 * kHour;
  const auto f = forecast_demand(arrivals, kStart, now, now + 1.5 * kHour, 100, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->days, 4);
  EXPECT_DOUBLE_EQ(f->weight, 0.8);
  EXPECT_NEAR(f->proofs_per_hour, 0.8 * 600 + 0.2 * 100, 1);
}

TEST(DemandForecast, HistoryBeyondHistoryDaysIsIgnored) {
  // Nine days watched, history_days 2: only the last two count.
  const auto arrivals = business_days(10);
  DemandForecastConfig cfg;
  cfg.history_days = 2;
  const double now = kStart + 9 * kDay + 8 * kHour;
  const auto f = forecast_demand(arrivals, kStart, now, now + 1.5 * kHour, 100, cfg);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->days, 2);
}

TEST(DemandForecast, ADayOnlyPartlyWatchedDoesNotCount) {
  const auto arrivals = business_days(2);
  // Watching began at 09:20 on day 1: the 09:00–10:00 window of day 1 was not fully watched.
  const double now = kStart + kDay + 8 * kHour;
  EXPECT_FALSE(
      forecast_demand(arrivals, kStart + 9 * kHour + 20 * 60, now, now + 1.5 * kHour, 100, {}));
}

TEST(DemandForecast, ArrivalsAfterNowAreNotSeen) {
  // The shell may hand over arrivals up to now only; the forecast must not need the future.
  auto arrivals = business_days(2);
  const double now = kStart + kDay + 8 * kHour;
  std::erase_if(arrivals, [&](double t) { return t > now; });
  const auto f = forecast_demand(arrivals, kStart, now, now + 1.5 * kHour, 100, {});
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->pattern_rate, 600, 1);
}

TEST(DemandForecast, PatternOnlyWhenHalfWeightIsZero) {
  const auto arrivals = business_days(2);
  DemandForecastConfig cfg;
  cfg.days_for_half_weight = 0;
  const double now = kStart + kDay + 8 * kHour;
  const auto f = forecast_demand(arrivals, kStart, now, now + 1.5 * kHour, 100, cfg);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->proofs_per_hour, 600, 1);
}

TEST(DemandForecast, AQuietTimeOfDayForecastsLess) {
  const auto arrivals = business_days(3);
  // Day 3, 11:30, trailing 600/hr: at 12:30 the last two days ran at 100/hr.
  const double now = kStart + 2 * kDay + 11.5 * kHour;
  const auto f = forecast_demand(arrivals, kStart, now, now + kHour, 600, {});
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->pattern_rate, 100, 1);
  EXPECT_LT(f->proofs_per_hour, 600);
}

}  // namespace
}  // namespace pf::core
