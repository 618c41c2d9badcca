// HTTP/1.1 on the wire (net/http_wire.h): what the server decodes from a request target and
// the bytes it writes for a reply, without a socket.
#include "net/http_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace pf::net {
namespace {

TEST(HttpWire, PercentDecodingKeepsWhatIsNotAValidEscape) {
  EXPECT_EQ(percent_decode("/api/v1/hosts/a%20b", false), "/api/v1/hosts/a b");
  EXPECT_EQ(percent_decode("%2F%2f", false), "//");
  EXPECT_EQ(percent_decode("a+b", false), "a+b");
  EXPECT_EQ(percent_decode("a+b", true), "a b");
  // Invalid or cut-off escapes stay as sent rather than becoming some other byte.
  EXPECT_EQ(percent_decode("100%", false), "100%");
  EXPECT_EQ(percent_decode("%zz%4", false), "%zz%4");
  EXPECT_EQ(percent_decode("%00", false), std::string(1, '\0'));
}

TEST(HttpWire, QueryStringsDecodeInOrderAndSkipEmptyItems) {
  const Params p = parse_query("state=proving&&q=a%26b+c&flag&=orphan&state=booting");
  ASSERT_EQ(p.size(), 4u);
  const auto states = p.equal_range("state");
  ASSERT_EQ(std::distance(states.first, states.second), 2);
  EXPECT_EQ(states.first->second, "proving");
  EXPECT_EQ(std::next(states.first)->second, "booting");
  EXPECT_EQ(p.find("q")->second, "a&b c");
  EXPECT_EQ(p.find("flag")->second, "");
  EXPECT_TRUE(parse_query("").empty());
}

TEST(HttpWire, AReplyCarriesTheServersFramingNotTheHandlers) {
  HttpResponse res;
  res.status = 404;
  res.set_header("Content-Length", "999");  // a handler's framing header is not sent
  res.set_header("X-Evil", "a\r\nSet-Cookie: x=1");
  res.set_content("nope", "text/plain");
  const std::string text = serialize_reply(res, false);
  EXPECT_EQ(text.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << text;
  EXPECT_NE(text.find("Content-Length: 4\r\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("999"), std::string::npos) << text;
  EXPECT_NE(text.find("X-Evil: aSet-Cookie: x=1\r\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Connection: keep-alive\r\n"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 8), "\r\n\r\nnope");
  EXPECT_NE(serialize_reply(res, true).find("Connection: close\r\n"), std::string::npos);
}

TEST(HttpWire, StatusesWithoutABodySendNone) {
  HttpResponse res;
  res.status = 204;
  res.body = "ignored";
  const std::string text = serialize_reply(res, false);
  EXPECT_EQ(text.find("ignored"), std::string::npos) << text;
  EXPECT_EQ(text.find("Content-Length"), std::string::npos) << text;
}

TEST(HttpWire, AStreamedReplyIsChunkedAndClosesTheConnection) {
  HttpResponse res;
  res.set_header("Content-Type", "text/event-stream");
  const std::string head = serialize_stream_head(res);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_EQ(chunk("hello", 5), "5\r\nhello\r\n");
  const std::string big(300, 'x');
  EXPECT_EQ(chunk(big.data(), big.size()).substr(0, 5), "12c\r\n");
  EXPECT_EQ(chunk("", 0), "0\r\n\r\n");  // the last chunk
}

}  // namespace
}  // namespace pf::net
