#include "market/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

namespace pf::market {
namespace {

struct EasyDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, SlistDeleter>;

// A fresh easy handle, libcurl initialised first: curl_global_init is not thread-safe and must
// run before any other libcurl call.
tl::expected<EasyHandle, HttpError> new_easy_handle() {
  static std::once_flag once;
  static CURLcode init = CURLE_OK;
  std::call_once(once, [] { init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init != CURLE_OK) {
    return tl::unexpected(
        HttpError{HttpFailure::Other, false, 0,
                  std::string("libcurl initialisation failed: ") + curl_easy_strerror(init)});
  }
  EasyHandle handle(curl_easy_init());
  if (!handle) {
    return tl::unexpected(HttpError{HttpFailure::Other, false, 0, "curl_easy_init failed"});
  }
  return handle;
}

struct BodySink {
  std::string body;
  std::size_t limit = 0;
  bool overflowed = false;
};

std::size_t write_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const std::size_t bytes = size * count;
  if (sink->body.size() + bytes > sink->limit) {
    sink->overflowed = true;
    return 0;  // anything but `bytes` makes libcurl abort with CURLE_WRITE_ERROR
  }
  sink->body.append(data, bytes);
  return bytes;
}

long to_ms(double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return 0;  // 0 = libcurl's default
  return std::max(1L, static_cast<long>(std::llround(seconds * 1000)));
}

// Collects the first setopt failure so the options can be set in one flat block.
class OptionSetter {
 public:
  explicit OptionSetter(CURL* handle) : handle_(handle) {}
  template <typename T>
  void operator()(CURLoption option, T value) {
    if (result_ == CURLE_OK) result_ = curl_easy_setopt(handle_, option, value);
  }
  CURLcode result() const { return result_; }

 private:
  CURL* handle_;
  CURLcode result_ = CURLE_OK;
};

HttpError classify(CURLcode rc, CURL* handle, const BodySink& sink, const char* error_buffer) {
  HttpError error;
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  error.status = static_cast<int>(status);
  curl_off_t connect_us = 0;
  curl_easy_getinfo(handle, CURLINFO_CONNECT_TIME_T, &connect_us);
  std::string detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);

  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
      error.failure = HttpFailure::NotConnected;
      error.request_may_have_been_sent = false;
      break;
    case CURLE_OPERATION_TIMEDOUT:
      error.failure = HttpFailure::Timeout;
      // Without a completed connect no request byte can have left.
      error.request_may_have_been_sent = connect_us > 0;
      break;
    case CURLE_PARTIAL_FILE:
      error.failure = HttpFailure::Truncated;
      break;
    case CURLE_FILESIZE_EXCEEDED:
      error.failure = HttpFailure::TooLarge;
      detail = "reply larger than " + std::to_string(sink.limit) + " bytes (declared length)";
      break;
    case CURLE_WRITE_ERROR:
      if (sink.overflowed) {
        error.failure = HttpFailure::TooLarge;
        detail = "reply larger than " + std::to_string(sink.limit) + " bytes; transfer aborted";
      } else {
        error.failure = HttpFailure::Other;
      }
      break;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
      // A receive error after the status line arrived is a reply cut short.
      error.failure =
          status > 0 && rc == CURLE_RECV_ERROR ? HttpFailure::Truncated : HttpFailure::Connection;
      break;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:  // the TLS handshake fails before the request goes out
      error.failure = HttpFailure::Other;
      error.request_may_have_been_sent = false;
      break;
    default:
      error.failure = HttpFailure::Other;
      break;
  }
  error.message = detail;
  return error;
}

}  // namespace

const char* to_string(HttpFailure failure) {
  switch (failure) {
    case HttpFailure::NotConnected:
      return "could not connect";
    case HttpFailure::Timeout:
      return "timed out";
    case HttpFailure::Connection:
      return "connection failed";
    case HttpFailure::Truncated:
      return "reply truncated";
    case HttpFailure::TooLarge:
      return "reply too large";
    case HttpFailure::Other:
      return "request failed";
  }
  return "request failed";
}

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

namespace {

// Keeps the final reply's headers: a new status line (after 100 Continue) forgets earlier ones.
std::size_t read_reply_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* headers = static_cast<std::vector<std::pair<std::string, std::string>>*>(user);
  const std::size_t n = size * count;
  std::string_view line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();
    return n;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || headers->size() >= kMaxReplyHeaders) return n;
  std::string name(line.substr(0, colon));
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  headers->emplace_back(std::move(name), std::string(value.substr(0, 8192)));
  return n;
}

}  // namespace

tl::expected<HttpResponse, HttpError> http_perform(const HttpOptions& options,
                                                   const HttpRequest& request) {
  if (request.method != "GET" && request.method != "POST" && request.method != "PUT" &&
      request.method != "DELETE") {
    return tl::unexpected(
        HttpError{HttpFailure::Other, false, 0, "unsupported HTTP method " + request.method});
  }
  auto handle = new_easy_handle();
  if (!handle) return tl::unexpected(handle.error());
  CURL* h = handle->get();

  HeaderList headers;
  // An empty Expect suppresses "100-continue", which costs a round trip per request.
  std::vector<std::string> all_headers = request.headers;
  all_headers.emplace_back("Expect:");
  for (const auto& line : all_headers) {
    curl_slist* grown = curl_slist_append(headers.get(), line.c_str());
    if (grown == nullptr) {
      return tl::unexpected(HttpError{HttpFailure::Other, false, 0, "out of memory for headers"});
    }
    (void)headers.release();  // `grown` now owns the old list
    headers.reset(grown);
  }

  BodySink sink;
  sink.limit = options.max_body_bytes > 0 ? options.max_body_bytes : SIZE_MAX;
  char error_buffer[CURL_ERROR_SIZE] = {};

  std::vector<std::pair<std::string, std::string>> reply_headers;
  OptionSetter set(h);
  set(CURLOPT_HEADERFUNCTION, &read_reply_header);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&reply_headers));
  set(CURLOPT_URL, request.url.c_str());
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_NOSIGNAL, 1L);  // signals are process-wide; timeouts must not use them
  set(CURLOPT_FOLLOWLOCATION, 0L);
  set(CURLOPT_CONNECTTIMEOUT_MS, to_ms(options.connect_timeout_s));
  set(CURLOPT_TIMEOUT_MS, to_ms(options.request_timeout_s));
  set(CURLOPT_USERAGENT, options.user_agent.c_str());
  // gzip only: cheap for the server to make and for us to read. Offered brotli, a server may
  // spend far more on a reply than we gain (cpp-httplib, market-sim's server, compresses at
  // brotli's slowest quality: about 3 CPU-s of every full test run went to that).
  set(CURLOPT_ACCEPT_ENCODING, "gzip");
  set(CURLOPT_HTTPHEADER, headers.get());
  set(CURLOPT_WRITEFUNCTION, &write_body);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&sink));
  set(CURLOPT_ERRORBUFFER, error_buffer);
  if (options.max_body_bytes > 0) {
    set(CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_body_bytes));
  }

  if (request.method == "GET") {
    set(CURLOPT_HTTPGET, 1L);
  } else {
    static const std::string kNoBody;
    // libcurl keeps the pointer, so the body must outlive curl_easy_perform: it lives in
    // `request` (or is the static empty string), never in a temporary.
    const std::string& body = request.body ? *request.body : kNoBody;
    set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    set(CURLOPT_POSTFIELDS, body.c_str());
    if (request.method != "POST") set(CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  if (set.result() != CURLE_OK) {
    return tl::unexpected(
        HttpError{HttpFailure::Other, false, 0,
                  std::string("libcurl rejected an option: ") + curl_easy_strerror(set.result())});
  }

  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) return tl::unexpected(classify(rc, h, sink, error_buffer));

  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return HttpResponse{static_cast<int>(status), std::move(sink.body), std::move(reply_headers)};
}

namespace {

struct StreamSink {
  const std::function<bool(const char*, std::size_t)>* sink = nullptr;
  CURL* handle = nullptr;
  bool range_requested = false;
  bool range_ignored = false;
  bool aborted_by_caller = false;
  std::uint64_t bytes = 0;
  std::string error_body;
  std::optional<std::uint64_t> range_total;
};

// Keeps the total of a "Content-Range: bytes A-B/N" header; a new status line (after a
// redirect) forgets what an earlier reply said.
std::size_t read_stream_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* s = static_cast<StreamSink*>(user);
  const std::size_t n = size * count;
  const std::string_view line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    s->range_total.reset();
    return n;
  }
  constexpr std::string_view kName = "content-range:";
  if (line.size() <= kName.size()) return n;
  for (std::size_t i = 0; i < kName.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != kName[i]) return n;
  }
  const std::size_t slash = line.rfind('/');
  if (slash == std::string_view::npos) return n;
  std::uint64_t total = 0;
  std::size_t digits = 0;
  for (std::size_t i = slash + 1;
       i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])); ++i, ++digits) {
    if (digits >= 19) return n;  // beyond any real file: ignored, not wrapped
    total = total * 10 + static_cast<std::uint64_t>(line[i] - '0');
  }
  if (digits > 0) s->range_total = total;
  return n;
}

std::size_t write_stream(char* data, std::size_t size, std::size_t count, void* user) {
  auto* s = static_cast<StreamSink*>(user);
  const std::size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    constexpr std::size_t kKeep = 4096;
    if (s->error_body.size() < kKeep)
      s->error_body.append(data, std::min(n, kKeep - s->error_body.size()));
    return n;
  }
  if (s->range_requested && status != 206) {
    s->range_ignored = true;
    return 0;
  }
  if (!(*s->sink)(data, n)) {
    s->aborted_by_caller = true;
    return 0;
  }
  s->bytes += n;
  return n;
}

}  // namespace

tl::expected<HttpStreamResult, HttpError> http_get_stream(
    const HttpOptions& options, const HttpStreamRequest& request,
    const std::function<bool(const char* data, std::size_t size)>& sink) {
  auto handle = new_easy_handle();
  if (!handle) return tl::unexpected(handle.error());
  CURL* h = handle->get();
  HeaderList headers;
  for (const auto& line : request.headers) {
    curl_slist* grown = curl_slist_append(headers.get(), line.c_str());
    if (grown == nullptr) {
      return tl::unexpected(HttpError{HttpFailure::Other, false, 0, "out of memory for headers"});
    }
    (void)headers.release();  // `grown` now owns the old list
    headers.reset(grown);
  }
  StreamSink stream;
  stream.sink = &sink;
  stream.handle = h;
  stream.range_requested = request.range.has_value();
  const std::string range_text = request.range ? std::to_string(request.range->first) + "-" +
                                                     std::to_string(request.range->last)
                                               : std::string();
  char error_buffer[CURL_ERROR_SIZE] = {};

  OptionSetter set(h);
  set(CURLOPT_URL, request.url.c_str());
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_FOLLOWLOCATION, 1L);  // parameter gateways redirect to storage
  set(CURLOPT_MAXREDIRS, 5L);
  set(CURLOPT_CONNECTTIMEOUT_MS, to_ms(options.connect_timeout_s));
  set(CURLOPT_TIMEOUT_MS, to_ms(options.request_timeout_s));
  set(CURLOPT_LOW_SPEED_LIMIT, request.low_speed_bytes_per_s);
  set(CURLOPT_LOW_SPEED_TIME, request.low_speed_time_s);
  set(CURLOPT_USERAGENT, options.user_agent.c_str());
  set(CURLOPT_HTTPHEADER, headers.get());
  set(CURLOPT_WRITEFUNCTION, &write_stream);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&stream));
  set(CURLOPT_HEADERFUNCTION, &read_stream_header);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&stream));
  set(CURLOPT_ERRORBUFFER, error_buffer);
  set(CURLOPT_HTTPGET, 1L);
  if (request.range) set(CURLOPT_RANGE, range_text.c_str());
  if (set.result() != CURLE_OK) {
    return tl::unexpected(
        HttpError{HttpFailure::Other, false, 0,
                  std::string("libcurl rejected an option: ") + curl_easy_strerror(set.result())});
  }
  const CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (stream.range_ignored) {
    return tl::unexpected(HttpError{
        HttpFailure::Other, true, static_cast<int>(status),
        "server ignored the byte range (replied " + std::to_string(status) + ", not 206)"});
  }
  if (stream.aborted_by_caller) {
    return tl::unexpected(
        HttpError{HttpFailure::Other, true, static_cast<int>(status), "aborted by caller"});
  }
  if (rc != CURLE_OK) {
    BodySink unused;
    unused.limit = SIZE_MAX;
    return tl::unexpected(classify(rc, h, unused, error_buffer));
  }
  return HttpStreamResult{static_cast<int>(status), stream.bytes, std::move(stream.error_body),
                          status == 206 ? stream.range_total : std::nullopt};
}

std::string url_encode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0x0F]);
    }
  }
  return out;
}

}  // namespace pf::market
