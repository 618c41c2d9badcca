#include "market/query.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pf::market {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json filters_of(std::string_view text, bool defaults = false) {
  auto parsed = parse_query(text, defaults);
  EXPECT_TRUE(parsed.has_value()) << text << ": " << (parsed ? "" : parsed.error());
  return parsed ? parsed->filters : json();
}

std::string error_of(std::string_view text) {
  auto parsed = parse_query(text, false);
  EXPECT_FALSE(parsed.has_value())
      << text << " parsed to " << (parsed ? parsed->filters.dump() : "");
  return parsed ? std::string() : parsed.error();
}

const json kDefaults = {{"verified", {{"eq", true}}},
                        {"external", {{"eq", false}}},
                        {"rentable", {{"eq", true}}},
                        {"rented", {{"eq", false}}}};

// --- the reference document's examples, exactly -------------------------------------------

TEST(ParseQuery, DocExampleWithDefaults) {
  const json expected = json::parse(R"({"verified":{"eq":true},"external":{"eq":false},
      "rentable":{"eq":true},"rented":{"eq":false},"gpu_name":{"eq":"RTX 4090"},
      "num_gpus":{"gte":"2"},"reliability":{"gt":"0.98"}})");
  auto parsed = parse_query("gpu_name=RTX_4090 num_gpus>=2 reliability>0.98");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->filters, expected);
  EXPECT_TRUE(parsed->warnings.empty());
}

TEST(ParseQuery, DocExampleGeolocationList) {
  EXPECT_EQ(filters_of("geolocation in [TW,SE]"),
            json::parse(R"({"geolocation":{"in":["TW","SE"]}})"));
}

TEST(ParseQuery, DocExampleGpuRamInMegabytes) {
  const json f = filters_of("gpu_ram>=24");
  EXPECT_EQ(f, json::parse(R"({"gpu_ram":{"gte":24000.0}})"));
  EXPECT_TRUE(f["gpu_ram"]["gte"].is_number_float());
}

TEST(ParseQuery, BriefExample) {
  auto parsed = parse_query(
      "gpu_name=RTX_4090 num_gpus>=2 reliability>0.98 cpu_ram>=240 geolocation in [US,CA] "
      "verified=any");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->filters, json::parse(R"({"external":{"eq":false},"rentable":{"eq":true},
      "rented":{"eq":false},"gpu_name":{"eq":"RTX 4090"},"num_gpus":{"gte":"2"},
      "reliability":{"gt":"0.98"},"cpu_ram":{"gte":240000.0},"geolocation":{"in":["US","CA"]}})"));
}

// --- defaults ---------------------------------------------------------------------------

TEST(ParseQuery, EmptyQueryGivesDefaultsOrNothing) {
  EXPECT_EQ(filters_of("", true), kDefaults);
  EXPECT_EQ(filters_of("   ", true), kDefaults);
  EXPECT_EQ(filters_of("", false), json::object());
}

TEST(ParseQuery, AnyRemovesDefaultsInEverySpelling) {
  json expected = kDefaults;
  expected.erase("verified");
  expected.erase("rented");
  expected.erase("external");
  EXPECT_EQ(filters_of("verified=any rented=? external=*", true), expected);
}

TEST(ParseQuery, TermOverridesDefault) {
  json expected = kDefaults;
  expected["rented"] = {{"eq", true}};
  EXPECT_EQ(filters_of("rented=true", true), expected);
}

TEST(ParseQuery, AnyRemovesEarlierTermsAndLaterTermReAdds) {
  EXPECT_EQ(filters_of("num_gpus>=2 num_gpus<=4 num_gpus=any"), json::object());
  EXPECT_EQ(filters_of("num_gpus=any num_gpus>=2"), json::parse(R"({"num_gpus":{"gte":"2"}})"));
}

TEST(ParseQuery, AnyWorksThroughAlias) {
  EXPECT_EQ(filters_of("cuda_vers>=12 cuda_vers=any"), json::object());
}

TEST(ParseQuery, QuotedAnyIsALiteralString) {
  EXPECT_EQ(filters_of("gpu_name=\"any\""), json::parse(R"({"gpu_name":{"eq":"any"}})"));
}

// --- operators ----------------------------------------------------------------------------

struct OperatorCase {
  const char* text;
  const char* op;
};

class OperatorSpelling : public ::testing::TestWithParam<OperatorCase> {};

TEST_P(OperatorSpelling, MapsToApiOperator) {
  const auto& c = GetParam();
  const json f = filters_of(c.text);
  ASSERT_TRUE(f.contains("num_gpus")) << c.text << " -> " << f.dump();
  ASSERT_EQ(f["num_gpus"].size(), 1u) << f.dump();
  EXPECT_TRUE(f["num_gpus"].contains(c.op)) << c.text << " -> " << f.dump();
  const json& value = f["num_gpus"][c.op];
  if (std::string_view(c.op) == "in" || std::string_view(c.op) == "notin") {
    EXPECT_EQ(value, json::array({"2", "4"}));
  } else {
    EXPECT_EQ(value, "2");
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllSpellings, OperatorSpelling,
    ::testing::Values(
        OperatorCase{"num_gpus=2", "eq"}, OperatorCase{"num_gpus==2", "eq"},
        OperatorCase{"num_gpus!=2", "neq"}, OperatorCase{"num_gpus<2", "lt"},
        OperatorCase{"num_gpus<=2", "lte"}, OperatorCase{"num_gpus>2", "gt"},
        OperatorCase{"num_gpus>=2", "gte"}, OperatorCase{"num_gpus eq 2", "eq"},
        OperatorCase{"num_gpus neq 2", "neq"}, OperatorCase{"num_gpus gt 2", "gt"},
        OperatorCase{"num_gpus gte 2", "gte"}, OperatorCase{"num_gpus lt 2", "lt"},
        OperatorCase{"num_gpus lte 2", "lte"}, OperatorCase{"num_gpus in [2,4]", "in"},
        OperatorCase{"num_gpus notin [2,4]", "notin"}, OperatorCase{"num_gpus nin [2,4]", "notin"},
        OperatorCase{"num_gpus not in [2,4]", "notin"},
        OperatorCase{"num_gpus not   in [2,4]", "notin"}, OperatorCase{"num_gpus >= 2", "gte"},
        OperatorCase{"num_gpus= 2", "eq"}, OperatorCase{"num_gpus in[2,4]", "in"}));

TEST(ParseQuery, TermsOnOneFieldMerge) {
  EXPECT_EQ(filters_of("num_gpus>=2 reliability>0.9 num_gpus<=8"),
            json::parse(R"({"num_gpus":{"gte":"2","lte":"8"},"reliability":{"gt":"0.9"}})"));
}

TEST(ParseQuery, SameOperatorTwiceKeepsTheLast) {
  EXPECT_EQ(filters_of("num_gpus>=2 num_gpus>=4"), json::parse(R"({"num_gpus":{"gte":"4"}})"));
}

// --- values -------------------------------------------------------------------------------

TEST(ParseQuery, BooleansAndNull) {
  EXPECT_EQ(filters_of("verified=true rentable=True external=false datacenter=False"),
            json::parse(R"({"verified":{"eq":true},"rentable":{"eq":true},
                "external":{"eq":false},"datacenter":{"eq":false}})"));
  EXPECT_EQ(filters_of("cpu_name=None mobo_name!=null"),
            json::parse(R"({"cpu_name":{"eq":null},"mobo_name":{"neq":null}})"));
}

TEST(ParseQuery, UnderscoresBecomeSpacesAndQuotesAreStripped) {
  EXPECT_EQ(filters_of("gpu_name=H100_SXM"), json::parse(R"({"gpu_name":{"eq":"H100 SXM"}})"));
  EXPECT_EQ(filters_of("gpu_name=\"RTX 4090\""), json::parse(R"({"gpu_name":{"eq":"RTX 4090"}})"));
  EXPECT_EQ(filters_of("gpu_name='RTX A6000' num_gpus=1"),
            json::parse(R"({"gpu_name":{"eq":"RTX A6000"},"num_gpus":{"eq":"1"}})"));
  EXPECT_EQ(filters_of("gpu_name in [RTX_4090,\"H100 SXM\"]"),
            json::parse(R"({"gpu_name":{"in":["RTX 4090","H100 SXM"]}})"));
}

TEST(ParseQuery, NumbersAreSentAsWrittenStrings) {
  const json f = filters_of("reliability>0.98 compute_cap>=890 inet_down>+100 dph<1e1");
  EXPECT_EQ(f["reliability"]["gt"], "0.98");
  EXPECT_EQ(f["compute_cap"]["gte"], "890");
  EXPECT_EQ(f["inet_down"]["gt"], "+100");
  EXPECT_EQ(f["dph_total"]["lt"], "1e1");
}

TEST(ParseQuery, SpacesInsideListsAreTolerated) {
  EXPECT_EQ(filters_of("geolocation in [US, CA]"),
            json::parse(R"({"geolocation":{"in":["US","CA"]}})"));
  EXPECT_EQ(filters_of("geolocation notin [ US ,CA , ] num_gpus=1"),
            json::parse(R"({"geolocation":{"notin":["US","CA"]},"num_gpus":{"eq":"1"}})"));
}

TEST(ParseQuery, BareValueForInIsACommaSeparatedList) {
  EXPECT_EQ(filters_of("geolocation in US"), json::parse(R"({"geolocation":{"in":["US"]}})"));
  EXPECT_EQ(filters_of("geolocation nin US,CA"),
            json::parse(R"({"geolocation":{"notin":["US","CA"]}})"));
}

// --- multipliers and aliases ----------------------------------------------------------------

TEST(ParseQuery, MultipliedFieldsAreNumbers) {
  const json f = filters_of("cpu_ram>=240 gpu_total_ram<=80.5 duration>=3 gpu_ram in [24,48]");
  EXPECT_EQ(f["cpu_ram"]["gte"], 240000.0);
  EXPECT_EQ(f["gpu_total_ram"]["lte"], 80500.0);
  EXPECT_EQ(f["duration"]["gte"], 3 * 86400.0);
  EXPECT_EQ(f["gpu_ram"]["in"], json::array({24000.0, 48000.0}));
  EXPECT_TRUE(f["duration"]["gte"].is_number());
}

TEST(ParseQuery, DriverVersionBecomesANumber) {
  EXPECT_EQ(filters_of("driver_version>=535.86.05"),
            json::parse(R"({"driver_version":{"gte":535086005}})"));
  EXPECT_EQ(filters_of("driver_version=550.127.5"),
            json::parse(R"({"driver_version":{"eq":550127005}})"));
  EXPECT_THAT(error_of("driver_version>=535.86"), HasSubstr("'driver_version>=535.86'"));
}

TEST(ParseQuery, Aliases) {
  EXPECT_EQ(filters_of("cuda_vers>=12.4 dph<2 dlperf_usd>100 flops_usd>5 display_active=false "
                       "reliability>0.9"),
            json::parse(R"({"cuda_max_good":{"gte":"12.4"},"dph_total":{"lt":"2"},
                "dlperf_per_dphtotal":{"gt":"100"},"flops_per_dphtotal":{"gt":"5"},
                "gpu_display_active":{"eq":false},"reliability":{"gt":"0.9"}})"));
}

TEST(ParseQuery, AliasAndApiNameMerge) {
  EXPECT_EQ(filters_of("dph>0.1 dph_total<2"),
            json::parse(R"({"dph_total":{"gt":"0.1","lt":"2"}})"));
}

// --- warnings -----------------------------------------------------------------------------

TEST(ParseQuery, UnknownFieldWarnsOnceAndIsStillSent) {
  auto parsed = parse_query("foo_bar=baz foo_bar!=qux num_gpus=1", false);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->filters["foo_bar"], json::parse(R"({"eq":"baz","neq":"qux"})"));
  ASSERT_EQ(parsed->warnings.size(), 1u);
  EXPECT_THAT(parsed->warnings[0], HasSubstr("foo_bar"));
}

TEST(ParseQuery, KnownFieldsDoNotWarn) {
  auto parsed = parse_query("reliability2>0.9 score>1 hosting_type>=1 cpu_arch=amd64", false);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_TRUE(parsed->warnings.empty());
}

// --- malformed terms: every error names the term ------------------------------------------

struct BadCase {
  const char* query;
  const char* term;  // must appear quoted in the message
  const char* why;   // must appear in the message
};

class MalformedTerm : public ::testing::TestWithParam<BadCase> {};

TEST_P(MalformedTerm, ErrorNamesTheTerm) {
  const auto& c = GetParam();
  const std::string error = error_of(c.query);
  EXPECT_THAT(error, HasSubstr("'" + std::string(c.term) + "'")) << c.query;
  EXPECT_THAT(error, HasSubstr(c.why)) << c.query;
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, MalformedTerm,
    ::testing::Values(
        BadCase{"num_gpus>>1", "num_gpus>>1", "unknown operator '>>'"},
        BadCase{"gpu_name=RTX_4090 num_gpus=<2", "num_gpus=<2", "unknown operator '=<'"},
        BadCase{"num_gpus=>2", "num_gpus=>2", "unknown operator '=>'"},
        BadCase{"num_gpus 2", "num_gpus", "missing operator"},
        BadCase{"verified", "verified", "missing operator"},
        BadCase{"num_gpus gte2", "num_gpus", "missing operator"},
        BadCase{"num_gpus>=", "num_gpus>=", "missing value"},
        BadCase{"num_gpus>=2 reliability>", "reliability>", "missing value"},
        BadCase{"=2", "=2", "missing field name"},
        BadCase{"num_gpus>=2 >=3", ">=3", "missing field name"},
        BadCase{"gpu-name=RTX", "gpu-name=RTX", "illegal character '-'"},
        BadCase{"gpu.name=RTX", "gpu.name=RTX", "illegal character '.'"},
        BadCase{"num_gpus>=two", "num_gpus>=two", "needs a number"},
        BadCase{"num_gpus=true", "num_gpus=true", "needs a number"},
        BadCase{"reliability>high", "reliability>high", "needs a number"},
        BadCase{"cpu_ram>=lots", "cpu_ram>=lots", "needs a number"},
        BadCase{"gpu_name>RTX", "gpu_name>RTX", "needs a number"},
        BadCase{"verified=yes", "verified=yes", "needs true or false"},
        BadCase{"num_gpus in [1,2", "num_gpus in [1,2", "unclosed list"},
        BadCase{"geolocation in [US,CA num_gpus>=2]", "geolocation in [US,CA num_gpus>=2]",
                "malformed list element"},
        BadCase{"num_gpus in [1,two]", "num_gpus in [1,two]", "needs a number"},
        BadCase{"geolocation in []", "geolocation in []", "empty list"},
        BadCase{"geolocation in [,]", "geolocation in [,]", "empty list"},
        BadCase{"geolocation=[US,CA]", "geolocation=[US,CA]", "needs 'in' or 'notin'"},
        BadCase{"geolocation in [US]x", "geolocation in [US]x", "unexpected text after list"},
        BadCase{"gpu_name=\"RTX 4090", "gpu_name=\"RTX 4090", "unclosed quote"},
        BadCase{"gpu_name=\"\"", "gpu_name=\"\"", "empty value"},
        BadCase{"gpu_name=RTX]", "gpu_name=RTX]", "stray ']'"},
        BadCase{"gpu_name= num_gpus>=2", "gpu_name= num_gpus>=2", "unexpected '>'"},
        BadCase{"num_gpus>any", "num_gpus>any", "wildcard"},
        BadCase{"num_gpus>null", "num_gpus>null", "null only works"}));

TEST(ParseQuery, ErrorHasTheDocumentedShape) {
  EXPECT_EQ(error_of("num_gpus>>1"), "bad query term 'num_gpus>>1': unknown operator '>>'");
}

// --- helpers ------------------------------------------------------------------------------

TEST(QueryHelpers, FieldKinds) {
  EXPECT_EQ(query_field_kind("num_gpus"), QueryFieldKind::Number);
  EXPECT_EQ(query_field_kind("gpu_name"), QueryFieldKind::String);
  EXPECT_EQ(query_field_kind("verified"), QueryFieldKind::Bool);
  EXPECT_EQ(query_field_kind("cuda_vers"), std::nullopt);  // alias: resolve first
  EXPECT_EQ(query_field_kind("nonsense"), std::nullopt);
  EXPECT_EQ(resolve_query_field_alias("cuda_vers"), "cuda_max_good");
  EXPECT_EQ(resolve_query_field_alias("num_gpus"), "num_gpus");
}

TEST(QueryHelpers, Numbers) {
  EXPECT_EQ(parse_query_number("2"), 2.0);
  EXPECT_EQ(parse_query_number("-0.5"), -0.5);
  EXPECT_EQ(parse_query_number("+3"), 3.0);
  EXPECT_EQ(parse_query_number("1e3"), 1000.0);
  EXPECT_EQ(parse_query_number(""), std::nullopt);
  EXPECT_EQ(parse_query_number("2x"), std::nullopt);
  EXPECT_EQ(parse_query_number(" 2"), std::nullopt);
  EXPECT_EQ(parse_query_number("inf"), std::nullopt);
  EXPECT_EQ(parse_query_number("nan"), std::nullopt);
}

TEST(QueryHelpers, DriverVersion) {
  EXPECT_EQ(numeric_driver_version("535.86.05"), 535086005);
  EXPECT_EQ(numeric_driver_version("1.2.3"), 1002003);
  EXPECT_EQ(numeric_driver_version("535.86"), std::nullopt);
  EXPECT_EQ(numeric_driver_version("535.86.05.1"), std::nullopt);
  EXPECT_EQ(numeric_driver_version("535..05"), std::nullopt);
  EXPECT_EQ(numeric_driver_version("5350.86.05"), std::nullopt);
  EXPECT_EQ(numeric_driver_version("a.b.c"), std::nullopt);
  // Found by the fuzzer: seven parts overflowed the int64 before the count was checked.
  EXPECT_EQ(numeric_driver_version("11.0.0.0.0.0.0"), std::nullopt);
  EXPECT_EQ(numeric_driver_version("999.999.999.999.999.999.999"), std::nullopt);
}

// --- order ---------------------------------------------------------------------------------

using Order = std::vector<std::pair<std::string, std::string>>;

TEST(ParseOrder, DocExample) {
  auto order = parse_order("num_gpus,total_flops-");
  ASSERT_TRUE(order) << order.error();
  EXPECT_EQ(*order, (Order{{"num_gpus", "asc"}, {"total_flops", "desc"}}));
}

TEST(ParseOrder, DefaultScoreDescPlusAndAliases) {
  EXPECT_EQ(parse_order("score-").value(), (Order{{"score", "desc"}}));
  EXPECT_EQ(parse_order(" dph+ , dlperf_usd- ").value(),
            (Order{{"dph_total", "asc"}, {"dlperf_per_dphtotal", "desc"}}));
}

TEST(ParseOrder, RejectsMalformed) {
  EXPECT_FALSE(parse_order(""));
  EXPECT_THAT(parse_order("num_gpus,,score").error(), HasSubstr("''"));
  EXPECT_THAT(parse_order("num-gpus").error(), HasSubstr("'num-gpus'"));
  EXPECT_THAT(parse_order("score--").error(), HasSubstr("'score--'"));
  EXPECT_THAT(parse_order("-").error(), HasSubstr("'-'"));
}

// --- issue 10: numbers that overflow or make no sense are refused, naming the term -----------

TEST(ParseQuery, ValueThatOverflowsAfterUnitScalingIsOutOfRange) {
  // 1e308 GB is infinite in MB: it used to reach the market as null (502).
  EXPECT_THAT(error_of("cpu_ram>=1e308"),
              HasSubstr("bad query term 'cpu_ram>=1e308': value out of range"));
  EXPECT_THAT(error_of("gpu_ram<1e308"), HasSubstr("value out of range"));
  EXPECT_THAT(error_of("duration>=1e306"), HasSubstr("value out of range"));
  EXPECT_THAT(error_of("cpu_ram in [64, 1e308]"), HasSubstr("value out of range"));
}

TEST(ParseQuery, NonFiniteNumbersAreNotNumbers) {
  EXPECT_THAT(error_of("cpu_ram>=1e400"), HasSubstr("needs a number"));
  EXPECT_THAT(error_of("dph<inf"), HasSubstr("needs a number"));
  EXPECT_THAT(error_of("num_gpus>=nan"), HasSubstr("needs a number"));
  EXPECT_THAT(error_of("score>" + std::string(400, '9')), HasSubstr("needs a number"));
}

TEST(ParseQuery, NumbersOutsideTheFieldsRangeAreRefused) {
  EXPECT_THAT(error_of("num_gpus>=100000"),
              HasSubstr("bad query term 'num_gpus>=100000': value out of range (num_gpus takes 0 "
                        "to 1024)"));
  EXPECT_THAT(error_of("reliability>1.5"), HasSubstr("value out of range"));
  EXPECT_THAT(error_of("cpu_ram>=-1"), HasSubstr("(cpu_ram takes 0 to 1e+06 GB)"));
  EXPECT_THAT(error_of("dph<1e13"), HasSubstr("value out of range"));
  // At the bounds: accepted, and the scaled value is finite.
  const json f = filters_of("cpu_ram<=1000000 num_gpus<=1024 reliability>=0 dph<1e12");
  EXPECT_EQ(f["cpu_ram"]["lte"], 1e9);
  EXPECT_EQ(f["num_gpus"]["lte"], "1024");
}

TEST(ParseQuery, InvalidUtf8IsRefusedNotThrownLater) {
  // Found by the fuzzer: the term became a JSON string and dump() threw type_error 316.
  auto q = parse_query("gpu_name=\xC1\x81", true);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error(), "bad query: invalid UTF-8 at byte 10");
  EXPECT_FALSE(parse_order("dph\xFF"));
  EXPECT_TRUE(parse_query("gpu_name=RTX_4090", true));
}

}  // namespace
}  // namespace pf::market
