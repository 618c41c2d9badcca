// The daily-pattern forecast (core/demand_forecast.h): the same time of day on the previous
// days, blended with the trailing rate by how well each predicted the last hours.
#include "core/demand_forecast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kForecastStart = 1'750'000'000;
constexpr double kDay = 86400;
constexpr double kForecastHour = 3600;

// `per_hour` evenly spaced arrivals in [from, to).
void add_steady(std::vector<double>& out, double from, double to, double per_hour) {
  const double gap = 3600 / per_hour;
  for (double t = from + gap / 2; t < to; t += gap) out.push_back(t);
}

// Every day: 100/hr, except 600/hr from 09:00 to 12:00.
std::vector<double> business_days(int days) {
  std::vector<double> out;
  for (int d = 0; d < days; ++d) {
    const double day = kForecastStart + d * kDay;
    add_steady(out, day, day + 9 * kForecastHour, 100);
    add_steady(out, day + 9 * kForecastHour, day + 12 * kForecastHour, 600);
    add_steady(out, day + 12 * kForecastHour, day + kDay, 100);
  }
  return out;
}

TEST(DemandForecast, NothingBeforeADayOfHistory) {
  const auto arrivals = business_days(1);
  // 20 h watched: the same time yesterday was never watched.
  EXPECT_FALSE(forecast_demand(arrivals, kForecastStart, kForecastStart + 20 * kForecastHour,
                               kForecastStart + 21 * kForecastHour, 100, {}));
}

TEST(DemandForecast, YesterdaysPeakIsForecastAnHourBeforeIt) {
  const auto arrivals = business_days(2);
  // Day 2, 08:00, trailing 100/hr: at 09:30 yesterday the rate was 600/hr. The last hours were
  // as flat today as yesterday: pattern and trailing rate predicted them equally well (no
  // error either), so each counts half.
  const double now = kForecastStart + kDay + 8 * kForecastHour;
  const auto f = forecast_demand(arrivals, kForecastStart, now, now + 1.5 * kForecastHour, 100, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->days, 1);
  EXPECT_NEAR(f->pattern_rate, 600, 1);
  EXPECT_GT(f->checks, 0);
  EXPECT_DOUBLE_EQ(f->weight, 0.5);
  EXPECT_NEAR(f->proofs_per_hour, 350, 1);
  EXPECT_THAT(f->reason, HasSubstr("1 day"));
}

TEST(DemandForecast, APatternThatPredictedTheLastHoursOutweighsTheTrailingRate) {
  // Day 3, 11:45: the trailing hour ran at 600/hr; at 12:45 the last two days ran at 100/hr.
  // Through this morning's rise the pattern foresaw every hour, the trailing rate lagged.
  const auto arrivals = business_days(3);
  const double now = kForecastStart + 2 * kDay + 11.75 * kForecastHour;
  const auto f = forecast_demand(arrivals, kForecastStart, now, now + kForecastHour, 600, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->days, 2);
  EXPECT_EQ(f->checks, 6);
  EXPECT_NEAR(f->pattern_error, 0, 1);
  EXPECT_GT(f->trailing_error, 50);
  EXPECT_GT(f->weight, 0.99);
  // The lull is forecast: the fleet may let capacity go before it comes.
  EXPECT_NEAR(f->proofs_per_hour, 100, 6);
  EXPECT_THAT(f->reason, HasSubstr("over the last 6 h"));
}

TEST(DemandForecast, APatternThatMissedLatelyHasNoWeight) {
  // Yesterday was quiet all day; today has run at 500/hr since midnight: the pattern missed
  // every recent hour by 450/hr, the trailing rate none.
  std::vector<double> arrivals;
  add_steady(arrivals, kForecastStart, kForecastStart + kDay, 50);
  const double now = kForecastStart + kDay + 8 * kForecastHour;
  add_steady(arrivals, kForecastStart + kDay, now, 500);
  const auto f = forecast_demand(arrivals, kForecastStart, now, now + kForecastHour, 500, {});
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->pattern_rate, 50, 1);
  EXPECT_LT(f->weight, 0.01);
  EXPECT_NEAR(f->proofs_per_hour, 500, 5);
}

TEST(DemandForecast, AnUntestedPatternHasNoWeight) {
  // 24.5 h watched: yesterday's 01:30 is there to forecast from, but no past hour can yet be
  // checked against a forecast from a day before it.
  const auto arrivals = business_days(2);
  const double now = kForecastStart + 24.5 * kForecastHour;
  const auto f = forecast_demand(arrivals, kForecastStart, now, now + 1.5 * kForecastHour, 100, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->checks, 0);
  EXPECT_DOUBLE_EQ(f->weight, 0);
  EXPECT_DOUBLE_EQ(f->proofs_per_hour, 100);
  EXPECT_THAT(f->reason, HasSubstr("not yet tested"));
}

TEST(DemandForecast, HistoryBeyondHistoryDaysIsIgnored) {
  // Nine days watched, history_days 2: only the last two count.
  const auto arrivals = business_days(10);
  DemandForecastConfig cfg;
  cfg.history_days = 2;
  const double now = kForecastStart + 9 * kDay + 8 * kForecastHour;
  const auto f =
      forecast_demand(arrivals, kForecastStart, now, now + 1.5 * kForecastHour, 100, cfg);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->days, 2);
}

TEST(DemandForecast, ADayOnlyPartlyWatchedDoesNotCount) {
  const auto arrivals = business_days(2);
  // Watching began at 09:20 on day 1: the 09:00–10:00 window of day 1 was not fully watched.
  const double now = kForecastStart + kDay + 8 * kForecastHour;
  EXPECT_FALSE(forecast_demand(arrivals, kForecastStart + 9 * kForecastHour + 20 * 60, now,
                               now + 1.5 * kForecastHour, 100, {}));
}

TEST(DemandForecast, ArrivalsAfterNowAreNotSeen) {
  // The shell may hand over arrivals up to now only; the forecast must not need the future.
  auto arrivals = business_days(2);
  const double now = kForecastStart + kDay + 8 * kForecastHour;
  std::erase_if(arrivals, [&](double t) { return t > now; });
  const auto f = forecast_demand(arrivals, kForecastStart, now, now + 1.5 * kForecastHour, 100, {});
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->pattern_rate, 600, 1);
}

}  // namespace
}  // namespace pf::core
