// Internal to src/store: a bounded pool of extra database connections, for work that must not
// queue behind the store's one serialised connection (SqlStore: job input chunks, MiBs per
// statement, beside agent heartbeats of a few hundred bytes). Connections are opened on demand up
// to `max_connections`; a caller beyond that waits for one to come back. Health checks: a
// connection idle longer than `check_after_idle_s` answers `SELECT 1` before it is lent again
// (one that does not is closed and another opened), and one its user saw fail is closed, not
// lent again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "store/sql_connection.h"

namespace pf::store {

class ConnectionPool {
 public:
  using Opener = std::function<std::unique_ptr<sql::Connection>()>;
  ConnectionPool(Opener open, std::size_t max_connections, double check_after_idle_s);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool();

  struct Idle {
    std::unique_ptr<sql::Connection> connection;
    std::chrono::steady_clock::time_point since;
  };

  // One borrowed connection, the caller's alone until this goes; returned to the pool then,
  // unless failed() was called.
  class Borrowed {
   public:
    Borrowed(ConnectionPool& pool, std::unique_ptr<sql::Connection> connection);
    Borrowed(Borrowed&& other) noexcept;
    Borrowed& operator=(Borrowed&&) = delete;
    Borrowed(const Borrowed&) = delete;
    Borrowed& operator=(const Borrowed&) = delete;
    ~Borrowed();
    sql::Connection& operator*() const { return *connection_; }
    // What it ran failed: its session may be broken, so it is closed instead of lent again.
    void failed() { failed_ = true; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<sql::Connection> connection_;
    bool failed_ = false;
  };

  // Waits while every connection is lent. Throws StoreError when a connection cannot be opened.
  Borrowed acquire();

  struct Stats {
    std::size_t open = 0;     // connections that exist now (lent or idle)
    std::size_t lent = 0;     // of them, lent now
    std::int64_t opened = 0;  // since the pool began
    std::int64_t closed = 0;  // closed for a failure or a failed health check
  };
  Stats stats() const;

 private:
  void give_back(std::unique_ptr<sql::Connection> connection, bool failed);

  const Opener open_;
  const std::size_t max_;
  const std::chrono::duration<double> check_after_idle_;
  mutable std::mutex mu_;
  std::condition_variable returned_;
  std::vector<Idle> idle_;  // newest last: the warmest is lent first
  std::size_t open_count_ = 0;
  std::size_t lent_ = 0;
  std::int64_t opened_ = 0;
  std::int64_t closed_ = 0;
};

}  // namespace pf::store
