#include "store/connection_pool.h"

#include <utility>

namespace pf::store {

ConnectionPool::ConnectionPool(Opener open, std::size_t max_connections, double check_after_idle_s)
    : open_(std::move(open)),
      max_(max_connections == 0 ? 1 : max_connections),
      check_after_idle_(check_after_idle_s) {}

ConnectionPool::~ConnectionPool() = default;

ConnectionPool::Borrowed::Borrowed(ConnectionPool& pool,
                                   std::unique_ptr<sql::Connection> connection)
    : pool_(&pool), connection_(std::move(connection)) {}

ConnectionPool::Borrowed::Borrowed(Borrowed&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      connection_(std::move(other.connection_)),
      failed_(other.failed_) {}

ConnectionPool::Borrowed::~Borrowed() {
  if (pool_ != nullptr) pool_->give_back(std::move(connection_), failed_);
}

ConnectionPool::Borrowed ConnectionPool::acquire() {
  std::unique_lock lock(mu_);
  for (;;) {
    returned_.wait(lock, [this] { return !idle_.empty() || open_count_ < max_; });
    if (idle_.empty()) break;  // room to open one
    Idle idle = std::move(idle_.back());
    idle_.pop_back();
    ++lent_;
    if (std::chrono::steady_clock::now() - idle.since < check_after_idle_) {
      return Borrowed(*this, std::move(idle.connection));
    }
    // The health check runs without the pool's lock: others may borrow meanwhile.
    lock.unlock();
    bool healthy = true;
    try {
      sql::Statement ping(*idle.connection, "SELECT 1 AS one", "checking a pooled connection");
      healthy = ping.next() && ping.integer("one") == 1;
    } catch (const StoreError&) {
      healthy = false;
    }
    if (healthy) return Borrowed(*this, std::move(idle.connection));
    idle.connection.reset();
    lock.lock();
    --lent_;
    --open_count_;
    ++closed_;
    returned_.notify_one();
  }
  ++open_count_;
  ++lent_;
  lock.unlock();
  try {
    auto connection = open_();
    std::lock_guard relock(mu_);
    ++opened_;
    return Borrowed(*this, std::move(connection));
  } catch (...) {
    std::lock_guard relock(mu_);
    --open_count_;
    --lent_;
    returned_.notify_one();
    throw;
  }
}

void ConnectionPool::give_back(std::unique_ptr<sql::Connection> connection, bool failed) {
  if (failed) connection.reset();  // closed before the lock: a PostgreSQL goodbye may wait
  std::lock_guard lock(mu_);
  --lent_;
  if (failed || !connection) {
    --open_count_;
    ++closed_;
  } else {
    idle_.push_back(Idle{std::move(connection), std::chrono::steady_clock::now()});
  }
  returned_.notify_one();
}

ConnectionPool::Stats ConnectionPool::stats() const {
  std::lock_guard lock(mu_);
  return Stats{open_count_, lent_, opened_, closed_};
}

}  // namespace pf::store
