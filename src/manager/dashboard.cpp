#include "manager/dashboard.h"

#include <array>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "manager/dashboard_snapshot.h"
#include "manager/views.h"
#include "util/bounded_json.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";

void error_reply(net::HttpResponse& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(util::dump_json_lossy(json{{"error", message}}), kJson);
}

double system_clock_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// FNV-1a: the ETag only has to change when the bytes do.
std::string etag_of(std::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string tag = "\"";
  for (int shift = 60; shift >= 0; shift -= 4) tag += kHex[(hash >> shift) & 0xf];
  return tag + "\"";
}

// If-None-Match holds a list of tags, possibly weak ("W/"), or "*".
bool etag_matches(const std::string& header, const std::string& etag) {
  std::size_t start = 0;
  while (start <= header.size()) {
    std::size_t end = header.find(',', start);
    if (end == std::string::npos) end = header.size();
    std::string_view item(header.data() + start, end - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.substr(0, 2) == "W/") item.remove_prefix(2);
    if (item == "*" || item == etag) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

const WebAsset* find_web_asset(std::string_view name) {
  for (const auto& asset : web_assets()) {
    if (asset.name == name) return &asset;
  }
  return nullptr;
}

std::string_view web_content_type(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kTypes{{
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".txt", "text/plain; charset=utf-8"},
  }};
  for (const auto& [extension, type] : kTypes) {
    if (ends_with(name, extension)) return type;
  }
  return "application/octet-stream";
}

std::size_t default_max_streams() {
  return 8;
}

// ---- Impl -----------------------------------------------------------------------------------

struct Dashboard::Impl {
  Impl(Manager& m, DashboardOptions o) : manager(m), options(std::move(o)) {
    if (!options.clock) options.clock = system_clock_now;
    for (const auto& asset : web_assets()) etags.emplace(asset.name, etag_of(asset.bytes));
  }

  Manager& manager;
  DashboardOptions options;
  std::map<std::string_view, std::string> etags;

  // Guards everything below; streams wait on `changed`.
  std::mutex mu;
  std::condition_variable changed;
  bool closing = false;
  std::size_t open = 0;
  // Bumped when a stream is refused for the cap: every open stream then writes twice, so one
  // whose client has gone (seen only when a write fails) frees its slot.
  std::uint64_t probe_generation = 0;
  std::uint64_t version = 0;  // of the snapshot; 0 = none built yet
  std::string compared;       // the last snapshot without "at", for change detection
  std::shared_ptr<const std::string> payload;
  SteadyClock::time_point built_at;

  std::mutex build_mu;  // one snapshot build at a time; the others then reuse it
  SnapshotBuilder builder{manager, options};  // under build_mu

  struct Current {
    std::uint64_t version = 0;
    std::shared_ptr<const std::string> payload;
  };

  // The latest snapshot, rebuilt when older than poll_interval. Throws what the store throws.
  Current current() {
    std::lock_guard build_lock(build_mu);
    {
      std::lock_guard lock(mu);
      if (version != 0 && SteadyClock::now() - built_at < options.poll_interval) {
        return {version, payload};
      }
    }
    const SnapshotText parts = builder.build();
    // "at" lets the page tell time in state by the server's clock; it is left out of the
    // comparison, or every build would count as a change.
    std::string key = parts.joined(std::nullopt);
    auto text = std::make_shared<const std::string>(parts.joined(options.clock()));
    std::lock_guard lock(mu);
    built_at = SteadyClock::now();
    payload = std::move(text);
    if (version == 0 || key != compared) {
      compared = std::move(key);
      ++version;
      changed.notify_all();
    }
    return {version, payload};
  }

  class Stream {
   public:
    explicit Stream(Impl& impl) : impl_(impl), probe_seen_(impl.probe_generation) {}
    ~Stream() {
      std::lock_guard lock(impl_.mu);
      --impl_.open;
      impl_.changed.notify_all();
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // One call of the stream's content provider: waits at most wake_interval, then writes what
    // is due. false ends the stream.
    bool next(net::DataSink& sink) {
      if (sent_version_ != 0) {
        std::unique_lock lock(impl_.mu);
        impl_.changed.wait_for(lock, impl_.options.wake_interval, [this] {
          return impl_.closing || impl_.probe_generation != probe_seen_ ||
                 impl_.version != sent_version_;
        });
        if (impl_.closing) return false;
        if (impl_.probe_generation != probe_seen_) {
          probe_seen_ = impl_.probe_generation;
          pings_due_ = 2;
        }
      }
      Current snapshot;
      try {
        snapshot = impl_.current();
      } catch (const std::exception& e) {
        // The page shows it and reconnects with backoff.
        write(sink,
              "event: error\ndata: " +
                  util::dump_json_lossy(json{{"error", std::string("snapshot: ") + e.what()}}) +
                  "\n\n");
        return false;
      }
      if (snapshot.version != sent_version_) {
        sent_version_ = snapshot.version;
        return write(sink, "event: fleet\ndata: " + *snapshot.payload + "\n\n");
      }
      if (pings_due_ > 0) {
        --pings_due_;
        return write(sink, ": ping\n\n");
      }
      if (SteadyClock::now() - last_write_ >= impl_.options.keep_alive_interval) {
        return write(sink, ": keep-alive\n\n");
      }
      return true;
    }

   private:
    bool write(net::DataSink& sink, const std::string& text) {
      last_write_ = SteadyClock::now();
      return sink.write(text.data(), text.size());
    }

    Impl& impl_;
    std::uint64_t sent_version_ = 0;
    std::uint64_t probe_seen_ = 0;
    int pings_due_ = 0;
    SteadyClock::time_point last_write_ = SteadyClock::now();
  };

  // A slot for a new stream, or nullptr at the cap.
  std::shared_ptr<Stream> open_stream() {
    std::unique_lock lock(mu);
    if (closing || options.max_streams == 0) return nullptr;
    if (open >= options.max_streams) {
      // A reloaded page leaves its old stream behind until a write to it fails; make every
      // stream write now (twice: the first write to a closed peer still succeeds) and give
      // them a moment.
      ++probe_generation;
      changed.notify_all();
      changed.wait_for(lock, 4 * options.wake_interval,
                       [this] { return closing || open < options.max_streams; });
      if (closing || open >= options.max_streams) return nullptr;
    }
    ++open;
    return std::make_shared<Stream>(*this);
  }

  void serve_asset(const std::string& name, const net::HttpRequest& req, net::HttpResponse& res) {
    const WebAsset* asset = find_web_asset(name);
    if (!asset) {
      error_reply(res, 404, "no such dashboard asset: '" + name.substr(0, 64) + "'");
      return;
    }
    const std::string& etag = etags.at(asset->name);
    // Names carry no content hash, so the browser revalidates every time (a 304 is cheap).
    res.set_header("Cache-Control", "no-cache");
    res.set_header("ETag", etag);
    res.set_header("X-Content-Type-Options", "nosniff");
    if (asset->name == "index.html") {
      // Market strings end up in the page; should one ever slip past escaping, it still
      // cannot run script or send data anywhere.
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                     "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                     "base-uri 'none'; form-action 'self'");
      res.set_header("Referrer-Policy", "no-referrer");
    }
    if (etag_matches(req.get_header_value("If-None-Match"), etag)) {
      res.status = 304;
      return;
    }
    res.status = 200;
    res.set_content(asset->bytes.data(), asset->bytes.size(), web_content_type(asset->name));
  }

  void serve_stream(const net::HttpRequest& req, net::HttpResponse& res,
                    const OperatorCheck& is_operator) {
    std::optional<std::string> refused = "operator authentication is not configured";
    if (is_operator) refused = is_operator(req);
    if (refused) {
      res.set_header("WWW-Authenticate", "Bearer");
      error_reply(res, 401, *refused);
      return;
    }
    auto stream = open_stream();
    if (!stream) {
      res.set_header("Retry-After", "5");
      error_reply(res, 503,
                  "too many dashboard streams open (at most " +
                      std::to_string(options.max_streams) +
                      "); close another dashboard tab or retry later");
      return;
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");  // reverse proxies must not buffer events
    res.set_chunked_content_provider(
        "text/event-stream",
        [stream](std::size_t, net::DataSink& sink) { return stream->next(sink); });
  }
};

// ---- Dashboard ------------------------------------------------------------------------------

Dashboard::Dashboard(Manager& manager, DashboardOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}

Dashboard::~Dashboard() {
  std::lock_guard lock(impl_->mu);
  impl_->closing = true;
  impl_->changed.notify_all();
}

void Dashboard::mount(net::HttpServer& server, OperatorCheck is_operator, std::string_view lane) {
  Impl* impl = impl_.get();
  server.route(
      "GET", "/",
      [impl](const net::HttpRequest& req, net::HttpResponse& res) {
        impl->serve_asset("index.html", req, res);
      },
      lane);
  server.route(
      "GET", R"(/assets/([^/]+))",
      [impl](const net::HttpRequest& req, net::HttpResponse& res) {
        impl->serve_asset(req.matches[1].str(), req, res);
      },
      lane);
  server.route(
      "GET", "/api/v1/stream",
      [impl, check = std::move(is_operator)](const net::HttpRequest& req, net::HttpResponse& res) {
        impl->serve_stream(req, res, check);
      },
      lane);
}

json Dashboard::snapshot() {
  return json::parse(snapshot_text());
}

std::string Dashboard::snapshot_text() {
  std::lock_guard build_lock(impl_->build_mu);
  return impl_->builder.build().joined(impl_->options.clock());
}

std::size_t Dashboard::open_streams() const {
  std::lock_guard lock(impl_->mu);
  return impl_->open;
}

std::optional<std::string> Dashboard::route_of(const std::string& method, const std::string& path) {
  if (method != "GET") return std::nullopt;
  if (path == "/" || path == "/api/v1/stream") return path;
  constexpr std::string_view kAssets = "/assets/";
  if (path.size() > kAssets.size() && path.compare(0, kAssets.size(), kAssets) == 0 &&
      path.find('/', kAssets.size()) == std::string::npos) {
    return "/assets/{file}";
  }
  return std::nullopt;
}

}  // namespace pf::manager
