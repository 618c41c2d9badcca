// The live web dashboard: the single-page app in web/ (compiled into the binary by
// web/embed.cmake) served at GET / and GET /assets/<file>, and the server-sent event stream
// GET /api/v1/stream (operator token) that keeps it current. HttpApi mounts it beside the
// operator API; the page reads everything else from the operator API itself.
//
// A stream holds one of the HTTP front's stream threads for as long as it is open (never an IO
// thread or a lane worker): the number of open streams is capped (503 above the cap).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "manager/manager.h"
#include "net/http_server.h"

namespace pf::manager {

struct WebAsset {
  std::string_view name;   // file name in web/, e.g. "app.js"
  std::string_view bytes;  // the file's content
};

// Every embedded web/ file, by name (defined in the build-time generated web_assets.cpp).
std::span<const WebAsset> web_assets();
// The embedded file with that name, or nullptr.
const WebAsset* find_web_asset(std::string_view name);
// The Content-Type a file is served with, from its extension; application/octet-stream for
// extensions the dashboard does not use.
std::string_view web_content_type(std::string_view name);

// Open dashboards at once: a few operators with a tab or two each. Below the front's stream
// threads (ApiOptions::stream_threads), so the dashboard's own 503 is the one a tab sees.
std::size_t default_max_streams();

struct DashboardOptions {
  std::size_t max_streams = default_max_streams();
  // The snapshot is rebuilt and compared at most this often, however many streams are open.
  std::chrono::milliseconds poll_interval{1000};
  // A comment line is sent when nothing else was for this long: proxies keep the connection,
  // and a client that went away is noticed when the write fails.
  std::chrono::milliseconds keep_alive_interval{15000};
  // How long a stream sleeps between checks for a new snapshot or a server shutdown (the
  // server notices its own shutdown between two calls of a stream's content provider).
  std::chrono::milliseconds wake_interval{250};
  // Destroyed instances stay in the snapshot this long after their destroy.
  double recent_destroyed_s = 3600;
  // Epoch seconds; empty = the system clock.
  std::function<double()> clock;
  // The autopilot's JSON as GET /api/v1/autopilot answers it; empty = "autopilot": null.
  std::function<nlohmann::json()> autopilot;
  // The fleet summary as GET /api/v1/fleet answers it (profit basis and "jobs" section
  // included), from the live rows the snapshot read (store().instances(false), by id); empty =
  // views.h's JSON of Manager::summary().
  std::function<nlohmann::json(const std::vector<core::InstanceRecord>& live)> summary;
};

// Decides whether a request carries the operator token: nullopt when it does, else the
// message of the 401.
using OperatorCheck = std::function<std::optional<std::string>(const net::HttpRequest&)>;

class Dashboard {
 public:
  Dashboard(Manager& manager, DashboardOptions options);
  // Ends open streams at their next wake-up.
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Installs GET /, GET /assets/{file} and GET /api/v1/stream on `server`, handled on `lane`.
  // This object must outlive the server's serving.
  void mount(net::HttpServer& server, OperatorCheck is_operator,
             std::string_view lane = net::kDefaultLane);

  // What a `fleet` event carries: {"at": epoch seconds, "summary": the fleet summary as in
  // GET /api/v1/fleet, "autopilot": DashboardOptions::autopilot's object or null, "instances":
  // live instances and those destroyed within recent_destroyed_s, each as views.h's instance
  // JSON without "plan" and with the offer cut to the fields the dashboard shows}.
  nlohmann::json snapshot();
  // The same as the text a `fleet` event's data line carries (what the stream builds).
  std::string snapshot_text();

  std::size_t open_streams() const;

  // The request-counter label of a dashboard route ("/assets/{file}"), or nullopt when the
  // request is not one of the dashboard's.
  static std::optional<std::string> route_of(const std::string& method, const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::manager
