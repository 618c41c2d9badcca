#include "util/bounded_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "support/hostile_json.h"

namespace pf::util {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string error_of(std::string_view text, const JsonLimits& limits = {}) {
  auto parsed = parse_json(text, limits);
  EXPECT_FALSE(parsed.has_value()) << "parsed: " << (parsed ? parsed->dump() : "");
  return parsed ? std::string() : parsed.error();
}

std::string nested(std::size_t depth, char open, char close, const std::string& inner = "") {
  return std::string(depth, open) + inner + std::string(depth, close);
}

using pf::test::nested_objects;

TEST(ParseJson, ParsesOrdinaryDocuments) {
  auto parsed =
      parse_json(R"({"a": [1, -2, 3.5, "x", true, null], "b": {"c": 18446744073709551615}})");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ((*parsed)["a"][0], 1);
  EXPECT_EQ((*parsed)["a"][1], -2);
  EXPECT_DOUBLE_EQ((*parsed)["a"][2].get<double>(), 3.5);
  EXPECT_EQ((*parsed)["a"][3], "x");
  EXPECT_TRUE((*parsed)["a"][5].is_null());
  EXPECT_EQ((*parsed)["b"]["c"].get<std::uint64_t>(), std::numeric_limits<std::uint64_t>::max());
  auto scalar = parse_json("  42 ");
  ASSERT_TRUE(scalar) << scalar.error();
  EXPECT_EQ(*scalar, 42);
}

TEST(ParseJson, SameTreeAsNlohmann) {
  const std::string text =
      R"({"x": [[1, 2], {"y": [], "z": {}}], "dup": 1, "dup": 2, "s": "\u00e9\n"})";
  auto parsed = parse_json(text);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(*parsed, json::parse(text));
}

TEST(ParseJson, DepthAtTheLimitIsAccepted) {
  JsonLimits limits;
  limits.max_depth = 64;
  EXPECT_TRUE(parse_json(nested(64, '[', ']'), limits));
  EXPECT_TRUE(parse_json(nested_objects(64), limits));
}

TEST(ParseJson, DepthPastTheLimitNamesWhere) {
  EXPECT_EQ(error_of(nested(65, '[', ']')), "nesting deeper than 64 at byte 65");
  EXPECT_EQ(error_of(nested_objects(65)), "nesting deeper than 64 at byte 321");
  JsonLimits shallow;
  shallow.max_depth = 2;
  EXPECT_EQ(error_of(R"({"a": [ [1] ]})", shallow), "nesting deeper than 2 at byte 9");
}

TEST(ParseJson, HundredThousandDeepArraysAndObjectsAreRefusedWithoutCrashing) {
  EXPECT_THAT(error_of(nested(100'000, '[', ']')), StartsWith("nesting deeper than 64"));
  EXPECT_THAT(error_of(nested_objects(100'000)), StartsWith("nesting deeper than 64"));
  // Unterminated, as an attacker would send it: refused at the same place.
  EXPECT_EQ(error_of(std::string(100'000, '[')), "nesting deeper than 64 at byte 65");
  // Mixed, with whitespace.
  std::string mixed;
  for (int i = 0; i < 50'000; ++i) mixed += "[ {\"k\" : ";
  EXPECT_THAT(error_of(mixed), StartsWith("nesting deeper than 64"));
}

TEST(ParseJson, SizeLimitIsCheckedFirst) {
  JsonLimits limits;
  limits.max_bytes = 10;
  EXPECT_EQ(error_of("[1,2,3,4,5,6]", limits), "document too large: 13 bytes (at most 10)");
  EXPECT_TRUE(parse_json("[1,2,3,4]", limits));
}

TEST(ParseJson, OverflowingNumbersAreOutOfRangeNotInfinite) {
  EXPECT_EQ(error_of("1e400"), "number out of range at byte 5");
  EXPECT_EQ(error_of(R"({"x": -1e400})"), "number out of range at byte 12");
  const std::string digits400 = "1" + std::string(399, '0');
  EXPECT_EQ(error_of("[" + digits400 + "]"), "number out of range at byte 401");
  // Large but finite: kept (as a double when it does not fit 64 bits).
  auto big = parse_json("[1e308, 123456789012345678901234567890, -9223372036854775808]");
  ASSERT_TRUE(big) << big.error();
  EXPECT_DOUBLE_EQ((*big)[0].get<double>(), 1e308);
  EXPECT_TRUE((*big)[1].is_number_float());
  EXPECT_EQ((*big)[2].get<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
  // Underflow is harmless: it rounds to zero.
  auto tiny = parse_json("1e-400");
  ASSERT_TRUE(tiny) << tiny.error();
  EXPECT_EQ(tiny->get<double>(), 0.0);
}

TEST(ParseJson, NanAndInfinityTextAreNotJson) {
  EXPECT_THAT(error_of("NaN"), HasSubstr("syntax error"));
  EXPECT_THAT(error_of(R"({"x": nan})"), HasSubstr("syntax error"));
  EXPECT_THAT(error_of("[Infinity]"), HasSubstr("syntax error"));
  EXPECT_THAT(error_of("-inf"), HasSubstr("syntax error"));
}

TEST(ParseJson, SyntaxErrorsSayWhereWithoutTheExceptionPrefix) {
  const std::string message = error_of(R"({"a": 1,})");
  EXPECT_THAT(message, StartsWith("parse error at line 1, column 9"));
  EXPECT_THAT(error_of(""), HasSubstr("unexpected end of input"));
  EXPECT_THAT(error_of("[1] [2]"), HasSubstr("expected end of input"));
}

TEST(ParseJson, StringAndKeyLengthsAreBounded) {
  JsonLimits limits;
  limits.max_string_bytes = 8;
  EXPECT_TRUE(parse_json(R"(["12345678"])", limits));
  EXPECT_EQ(error_of(R"(["123456789"])", limits), "string longer than 8 bytes at byte 12");
  EXPECT_EQ(error_of(R"({"123456789": 1})", limits), "string longer than 8 bytes at byte 12");
}

TEST(ParseJson, ValueCountIsBounded) {
  JsonLimits limits;
  limits.max_values = 4;
  EXPECT_TRUE(parse_json("[1, 2, 3]", limits));  // the array and three numbers
  EXPECT_EQ(error_of("[1, 2, 3, 4]", limits), "more than 4 values at byte 12");
  EXPECT_THAT(error_of(R"({"a": {}, "b": {}, "c": {}, "d": {}})", limits),
              StartsWith("more than 4 values"));
}

TEST(ParseJson, ManyElementsAtDefaultLimitsAreRefused) {
  std::string many = "[";
  for (int i = 0; i < 1'100'000; ++i) many += "0,";
  many += "0]";
  EXPECT_THAT(error_of(many), StartsWith("more than 1000000 values"));
}

class ParseJsonFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pf_bounded_json_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(ParseJsonFile, ParsesAFile) {
  auto parsed = parse_json_file(write("ok.json", R"({"a": 1})"));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ((*parsed)["a"], 1);
}

TEST_F(ParseJsonFile, ErrorsStartWithThePath) {
  const auto deep = write("deep.json", nested(100'000, '[', ']'));
  auto parsed = parse_json_file(deep);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "'" + deep.string() + "': nesting deeper than 64 at byte 65");

  auto missing = parse_json_file(dir_ / "missing.json");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("missing.json': no such file"));

  auto directory = parse_json_file(dir_);
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.error(), HasSubstr("': is a directory"));
}

TEST_F(ParseJsonFile, SizeIsCheckedBeforeReading) {
  JsonLimits limits;
  limits.max_bytes = 100;
  auto parsed = parse_json_file(write("big.json", "[" + std::string(200, ' ') + "]"), limits);
  ASSERT_FALSE(parsed);
  EXPECT_THAT(parsed.error(), HasSubstr("file too large: 202 bytes (at most 100)"));
}

TEST(AllNumbersFinite, FindsNanAndInfinityAtAnyDepth) {
  EXPECT_TRUE(all_numbers_finite(json::parse(R"({"a": [1, 2.5, {"b": -3e300}], "c": "nan"})")));
  json with_nan = {{"a", json::array({1, json::object({{"b", std::nan("")}})})}};
  EXPECT_FALSE(all_numbers_finite(with_nan));
  EXPECT_FALSE(all_numbers_finite(json(std::numeric_limits<double>::infinity())));
  // A deep tree built in code is walked without recursion.
  json deep = 1.0;
  for (int i = 0; i < 10'000; ++i) deep = json::array({std::move(deep)});
  EXPECT_TRUE(all_numbers_finite(deep));
}

TEST(FirstInvalidUtf8, FindsTheFirstBadByte) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("r\xC3\xA9seau \xE2\x82\xAC \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("ab\xC1\x81"), 2u);        // overlong two-byte form
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\x80"), 0u);      // overlong three-byte form
  EXPECT_EQ(first_invalid_utf8("x\xED\xA0\x80"), 1u);     // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xE2\x82"), 2u);        // truncated at the end
  EXPECT_EQ(first_invalid_utf8("\x80"), 0u);              // a lone continuation byte
}

}  // namespace
}  // namespace pf::util
