// vast's per-endpoint rate limits (market/rate_limits.h): the table, its text form, which
// request is which endpoint, and the window both the client's pacing and market-sim keep.
#include "market/rate_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pf::market {
namespace {

using ::testing::HasSubstr;

TEST(RateLimits, TheDocumentedTableIsVasts) {
  const RateLimits vast = vast_documented_rate_limits();
  EXPECT_EQ(vast.describe(),
            "search=10/60s,create=4.5s,list=1s,show=2s,destroy=3s,manage=1s,bid=5.5s");
  auto parsed = parse_rate_limits("vast");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->describe(), vast.describe());
  auto off = parse_rate_limits(" off ");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->any());
  EXPECT_EQ(off->describe(), "off");
}

TEST(RateLimits, OwnEntriesLimitOnlyTheEndpointsNamed) {
  auto parsed = parse_rate_limits("search=3/2, create=0.5s ,bid=1");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->describe(), "search=3/2s,create=0.5s,bid=1s");
  EXPECT_EQ((*parsed)[VastEndpoint::Search].calls, 3);
  EXPECT_DOUBLE_EQ((*parsed)[VastEndpoint::Search].window_s, 2);
  EXPECT_FALSE((*parsed)[VastEndpoint::Show].limits());
  // describe() reads back as the same limits.
  auto again = parse_rate_limits(parsed->describe());
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(again->describe(), parsed->describe());
}

TEST(RateLimits, BadEntriesAreNamed) {
  const auto error = [](std::string_view text) {
    auto parsed = parse_rate_limits(text);
    return parsed ? std::string("(accepted)") : parsed.error();
  };
  EXPECT_THAT(error(""), HasSubstr("empty"));
  EXPECT_THAT(error("search=10/60,"), HasSubstr("empty entry"));
  EXPECT_THAT(error("launch=5"), HasSubstr("unknown endpoint"));
  EXPECT_THAT(error("create"), HasSubstr("expected ENDPOINT=SECONDS"));
  EXPECT_THAT(error("create=1,create=2"), HasSubstr("given twice"));
  EXPECT_THAT(error("create=-1"), HasSubstr("from 0 to 86400"));
  EXPECT_THAT(error("create=nan"), HasSubstr("from 0 to 86400"));
  EXPECT_THAT(error("create=1e9"), HasSubstr("from 0 to 86400"));
  EXPECT_THAT(error("search=0/60"), HasSubstr("from 1 to 1000"));
  EXPECT_THAT(error("search=x/60"), HasSubstr("from 1 to 1000"));
  EXPECT_THAT(error("search=10/"), HasSubstr("from 0 to 86400"));
  EXPECT_THAT(error("show=2\"; DROP"), HasSubstr("show=2"));
}

TEST(RateLimits, RequestsAreTheirEndpoints) {
  const auto is = [](std::string_view method, std::string_view path) {
    auto e = vast_endpoint_of(method, path);
    return e ? std::string(to_string(*e)) : std::string("none");
  };
  EXPECT_EQ(is("POST", "/api/v0/bundles/"), "search");
  EXPECT_EQ(is("GET", "/api/v0/bundles"), "search");
  EXPECT_EQ(is("PUT", "/api/v0/asks/123/"), "create");
  EXPECT_EQ(is("GET", "/api/v1/instances/"), "list");
  EXPECT_EQ(is("GET", "/api/v0/instances/77/"), "show");
  EXPECT_EQ(is("DELETE", "/api/v0/instances/77/"), "destroy");
  EXPECT_EQ(is("PUT", "/api/v0/instances/77/"), "manage");
  EXPECT_EQ(is("PUT", "/api/v0/instances/bid_price/77/"), "bid");
  EXPECT_EQ(is("GET", "/api/v0/users/current/"), "none");
  EXPECT_EQ(is("PUT", "/api/v0/asks/12x/"), "none");
  EXPECT_EQ(is("DELETE", "/api/v0/bundles/"), "none");
  EXPECT_EQ(is("GET", "/api/v0/instances/"), "none");
}

TEST(RateLimits, AMinimumIntervalSpacesEveryCall) {
  RateWindow w(RateRule{1, 4.5});
  EXPECT_DOUBLE_EQ(w.earliest(100), 100);
  w.record(100);
  EXPECT_DOUBLE_EQ(w.earliest(101), 104.5);
  EXPECT_DOUBLE_EQ(w.earliest(110), 110);
  // A slot booked ahead (a client waiting its turn) pushes the next one further.
  w.record(104.5);
  EXPECT_DOUBLE_EQ(w.earliest(102), 109);
}

TEST(RateLimits, TenAMinuteLetsTenGoThenWaitsForTheOldestToAge) {
  RateWindow w(RateRule{10, 60});
  for (int i = 0; i < 10; ++i) {
    EXPECT_DOUBLE_EQ(w.earliest(i), i) << "call " << i;
    w.record(i);
  }
  EXPECT_DOUBLE_EQ(w.earliest(10), 60);  // the first call leaves the window at 60
  w.record(60);
  EXPECT_DOUBLE_EQ(w.earliest(60), 61);  // then the second, at 61
  RateWindow unlimited;
  unlimited.record(1);
  EXPECT_DOUBLE_EQ(unlimited.earliest(1), 1);
}

}  // namespace
}  // namespace pf::market
