// What a route handler sees and fills: the request, the reply (a body, a streamed body, or a
// reply finished later), and the handler's type. No server in it: net/http_server.h serves
// these, tests and handlers can be written against this alone.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pf::net {

struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};
using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;
using Params = std::multimap<std::string, std::string>;

// One capture group of a route's pattern (a copy: it outlives the matching).
struct MatchGroup {
  std::string text;
  const std::string& str() const { return text; }
};

struct HttpRequest {
  std::string method;  // "GET"
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded, without the query
  Params params;       // the decoded query
  Headers headers;
  std::string body;
  std::string remote_address;       // the peer's IP address
  std::vector<MatchGroup> matches;  // [0] the whole path, then the route's groups
  // Whether the client has hung up while its request is handled (set by the server for routes
  // on a lane; unset elsewhere). A long wait checks it before acting on the caller's behalf.
  // A client that half-closes after its request reads as gone.
  std::function<bool()> caller_gone;

  bool has_header(std::string_view name) const;
  // The first value of the header, or "".
  std::string get_header_value(std::string_view name) const;
  bool has_param(std::string_view key) const;
  // The first value of the query parameter, or "".
  std::string get_param_value(std::string_view key) const;
};

// Where a streaming reply writes. write() blocks until the bytes were handed to the socket and
// returns false once the client is gone or the server stops; the producer should then return.
class DataSink {
 public:
  virtual ~DataSink() = default;
  virtual bool write(const char* data, std::size_t size) = 0;
  virtual bool is_writable() const = 0;
};

// Called again and again on a stream thread until it returns false or a write fails; `offset`
// is the number of bytes written so far.
using ContentProvider = std::function<bool(std::size_t offset, DataSink& sink)>;

struct HttpResponse;
struct DeferredReply;  // (net/deferred_reply.h)

// Sends a deferred reply (HttpResponse::defer): call it once, from any thread, with what
// finishes the reply (an empty Finish: as the handler left it); later calls do nothing. The
// server's hooks then run on that thread, so it must be one that may block briefly (never an
// IO thread). When the last copy goes uncalled, the reply is a 503 with Retry-After.
class Resume {
 public:
  using Finish = std::function<void(HttpResponse&)>;
  void operator()(Finish finish) const;

 private:
  friend struct HttpResponse;
  struct Token;
  explicit Resume(std::shared_ptr<Token> token) : token_(std::move(token)) {}
  std::shared_ptr<Token> token_;
};

struct HttpResponse {
  int status = 200;
  Headers headers;
  std::string body;
  // Set by set_chunked_content_provider: the body is produced, chunk by chunk, by this.
  ContentProvider content_provider;
  // Set by defer().
  std::shared_ptr<DeferredReply> deferred;

  // Makes this a reply finished later: the handler returns, its lane's thread goes on to the
  // next request, and the reply (as the handler left it) is sent once the returned Resume is
  // called. For a reply that waits on an outcome decided elsewhere (a database commit in
  // flight) without holding a thread. Not on inline routes nor with a streamed body (those
  // answer 500).
  Resume defer();

  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name) const;
  // Replaces any earlier value of the header.
  void set_header(std::string_view name, std::string_view value);
  void set_content(std::string content, std::string_view content_type);
  void set_content(const char* data, std::size_t size, std::string_view content_type);
  void set_chunked_content_provider(std::string_view content_type, ContentProvider provider);
};

using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;

}  // namespace pf::net
