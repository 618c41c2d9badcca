#include "net/http_wire.h"

#include <boost/beast/http/status.hpp>
#include <string>

namespace pf::net {
namespace {

namespace http = boost::beast::http;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Header values come from handlers; a CR or LF in one must not split the reply.
void append_header(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out += ": ";
  for (const char c : value) {
    if (c != '\r' && c != '\n') out += c;
  }
  out += "\r\n";
}

bool is_framing_header(std::string_view name) {
  const CaseInsensitiveLess less;
  auto same = [&](std::string_view other) { return !less(name, other) && !less(other, name); };
  return same("Content-Length") || same("Transfer-Encoding") || same("Connection");
}

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

bool has_no_body(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

}  // namespace

std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int hi = hex_value(text[i + 1]);
      const int lo = hex_value(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += (c == '+' && plus_is_space) ? ' ' : c;
  }
  return out;
}

Params parse_query(std::string_view query) {
  Params params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (key.empty()) continue;
    params.emplace(percent_decode(key, true), percent_decode(value, true));
  }
  return params;
}

std::string serialize_reply(const HttpResponse& res, bool close_after) {
  std::string out = status_line(res.status);
  for (const auto& [name, value] : res.headers) {
    if (!is_framing_header(name)) append_header(out, name, value);
  }
  const bool bodiless = has_no_body(res.status);
  if (!bodiless) append_header(out, "Content-Length", std::to_string(res.body.size()));
  append_header(out, "Connection", close_after ? "close" : "keep-alive");
  out += "\r\n";
  if (!bodiless) out += res.body;
  return out;
}

std::string serialize_stream_head(const HttpResponse& res) {
  std::string out = status_line(res.status);
  for (const auto& [name, value] : res.headers) {
    if (!is_framing_header(name)) append_header(out, name, value);
  }
  append_header(out, "Transfer-Encoding", "chunked");
  append_header(out, "Connection", "close");
  out += "\r\n";
  return out;
}

std::string chunk(const char* data, std::size_t size) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string length;
  for (std::size_t n = size; n > 0 || length.empty(); n /= 16)
    length.insert(length.begin(), kHex[n % 16]);
  std::string out = length + "\r\n";
  out.append(data, size);
  out += "\r\n";
  return out;
}

}  // namespace pf::net
