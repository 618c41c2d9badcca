// A small blocking HTTP client over libcurl: one request, one easy handle, no shared state,
// so separate calls may run on separate threads. It knows nothing about vast.ai; it reports
// what happened on the wire precisely enough for a caller to decide whether a request that
// failed may already have reached the server (which matters for non-idempotent creates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

namespace pf::market {

struct HttpOptions {
  double connect_timeout_s = 10;
  double request_timeout_s = 60;           // whole exchange, connect included
  std::size_t max_body_bytes = 64u << 20;  // a larger reply aborts the transfer
  std::string user_agent = "proverfleet/0.1";
};

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, DELETE
  std::string url;
  std::vector<std::string> headers;  // "Name: value"; may hold secrets, never echoed
  std::optional<std::string> body;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  // The final reply's headers (names lower-cased; at most kMaxReplyHeaders, each cut to 8 KiB).
  std::vector<std::pair<std::string, std::string>> headers = {};
  // The first value of header `name` (lower-case), or "".
  std::string header(std::string_view name) const;
};
inline constexpr std::size_t kMaxReplyHeaders = 64;

enum class HttpFailure {
  NotConnected,  // no connection was made (refused, DNS, TLS handshake): nothing was sent
  Timeout,       // connect or transfer timeout
  Connection,    // reset, closed before any reply, send/receive error
  Truncated,     // the reply ended before its declared length
  TooLarge,      // the reply exceeded max_body_bytes; the transfer was aborted
  Other,         // anything else libcurl reports (bad URL, TLS verification, ...)
};

const char* to_string(HttpFailure failure);

struct HttpError {
  HttpFailure failure = HttpFailure::Other;
  // False only when libcurl proves no byte of the request reached the server.
  bool request_may_have_been_sent = true;
  int status = 0;       // HTTP status when a reply had started (truncated/too large), else 0
  std::string message;  // libcurl's description; names no header
};

// Performs one exchange. Never throws for network conditions.
tl::expected<HttpResponse, HttpError> http_perform(const HttpOptions& options,
                                                   const HttpRequest& request);

// Percent-encodes a query-string component.
std::string url_encode(const std::string& text);

// --- streaming GET (large files: proof parameters) ------------------------------------------

struct ByteRange {
  std::uint64_t first = 0;  // inclusive
  std::uint64_t last = 0;   // inclusive
};

struct HttpStreamRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // Asks for these bytes only. The reply must then be 206: a server that ignores Range would
  // resend the file from byte 0, so a 200 aborts the transfer with HttpError status 200.
  std::optional<ByteRange> range;
  // A peer slower than this for this long is treated as stalled (HttpFailure::Timeout).
  long low_speed_bytes_per_s = 1024;
  long low_speed_time_s = 60;
};

struct HttpStreamResult {
  int status = 0;
  std::uint64_t bytes = 0;  // body bytes handed to the sink (2xx replies only)
  std::string error_body;   // the start of a non-2xx reply's body, for messages
  // The whole resource's length, N of the final reply's "Content-Range: bytes A-B/N" (206).
  std::optional<std::uint64_t> range_total;
};

// GET whose reply body goes to `sink` as it arrives instead of into memory. Non-2xx bodies
// never reach the sink (they come back in error_body). `sink` returns false to abort; the
// call then fails with HttpFailure::Other. options.request_timeout_s <= 0 means no overall
// limit (the low-speed limit still applies); max_body_bytes is ignored.
tl::expected<HttpStreamResult, HttpError> http_get_stream(
    const HttpOptions& options, const HttpStreamRequest& request,
    const std::function<bool(const char* data, std::size_t size)>& sink);

}  // namespace pf::market
