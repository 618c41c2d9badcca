// Test double: an in-process HTTP server for proof-parameter files, with byte ranges (206),
// optional throttling, injected failures and corruption, and counters of what it served.
// Header-only; used by the agent's parameter, flow and CLI tests.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/loopback_server.h"

namespace pf::test {

class ParamServer {
 public:
  ParamServer() {
    server_.Get(R"(/p/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    serving_.emplace(server_);
    port_ = serving_->port();
  }
  // Stopped before the files its handlers read go away.
  ~ParamServer() { serving_.reset(); }
  ParamServer(const ParamServer&) = delete;
  ParamServer& operator=(const ParamServer&) = delete;

  std::string url(const std::string& name) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/p/" + name;
  }

  void put(const std::string& name, std::string content) {
    std::lock_guard lock(mu_);
    files_[name] = std::make_shared<const std::string>(std::move(content));
  }

  // Deterministic pseudo-random bytes.
  static std::string random_bytes(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
    return s;
  }

  std::atomic<std::uint64_t> served{0};  // body bytes written
  std::atomic<int> requests{0};
  std::atomic<bool> corrupt{false};         // flip one byte of every reply
  std::atomic<bool> ignore_ranges{false};   // answer 200 with the whole file
  std::atomic<int> fail_next{0};            // answer 503 to this many requests
  std::atomic<std::size_t> bytes_per_s{0};  // 0: as fast as possible

  // Non-empty: requests without exactly this Authorization header get 401.
  void require_authorization(std::string value) {
    std::lock_guard lock(mu_);
    authorization_ = std::move(value);
  }

  std::vector<std::string> ranges_seen() const {
    std::lock_guard lock(mu_);
    return ranges_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    requests++;
    std::shared_ptr<const std::string> content;
    {
      std::lock_guard lock(mu_);
      ranges_.push_back(req.get_header_value("Range"));
      auto it = files_.find(req.matches[1].str());
      if (it != files_.end()) content = it->second;
      if (!authorization_.empty() && req.get_header_value("Authorization") != authorization_) {
        res.status = 401;
        // As long as the file, so that any range stays satisfiable (see fail_next below).
        res.set_content(std::string(content ? content->size() : 1, '.'), "text/plain");
        return;
      }
    }
    if (!content) {
      res.status = 404;
      res.set_content("no such parameter file", "text/plain");
      return;
    }
    if (fail_next > 0) {
      fail_next--;
      res.status = 503;
      // httplib applies the request's Range to any body; one as long as the file keeps every
      // range satisfiable, so the client sees the 503 and not a 416.
      res.set_content(std::string(content->size(), '.'), "text/plain");
      return;
    }
    if (corrupt) {
      auto copy = std::make_shared<std::string>(*content);
      (*copy)[copy->size() / 2] = static_cast<char>((*copy)[copy->size() / 2] ^ 0x5A);
      content = copy;
    }
    if (ignore_ranges) res.status = 200;
    res.set_content_provider(
        content->size(), "application/octet-stream",
        [this, content](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
          constexpr std::size_t kPiece = 16 * 1024;
          const std::size_t n = std::min(kPiece, length);
          if (!sink.write(content->data() + offset, n)) return false;
          served += n;
          if (const std::size_t rate = bytes_per_s.load(); rate > 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(n * 1000000 / rate));
          }
          return true;
        });
  }

  httplib::Server server_;
  std::optional<LoopbackServing> serving_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const std::string>> files_;
  std::vector<std::string> ranges_;
  std::string authorization_;
};

}  // namespace pf::test
