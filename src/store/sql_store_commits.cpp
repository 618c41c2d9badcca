// SqlStore's transactions and the outcomes of commits sent ahead (Store::transaction_sent).
//
// A sent commit's outcome is learnt by whoever next reads the connection's answers: a caller
// waiting for it (Confirm::wait), any statement that needs an answer (it reads the earlier ones
// first), or the commit reader, a thread that exists once anyone asked to be told
// (Confirm::then). The reader polls the database socket while callbacks wait, reads what
// arrived, and runs the callbacks of the outcomes known, outside the store's mutex; an eventfd
// wakes it when another thread read those outcomes instead.
#include <poll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "store/sql_connection.h"
#include "store/sql_store.h"

namespace pf::store {

namespace {

// How long the reader sleeps at most between looks (the socket may be replaced meanwhile when
// the session breaks and another thread reconnects).
constexpr int kReaderPollMs = 5;

constexpr const char* kClosedBeforeConfirmed =
    "the store was closed before the commit was confirmed; it may or may not have been applied";

}  // namespace

// A sent commit's Confirm.
class SqlStore::SentConfirm final : public Confirm::Pending {
 public:
  SentConfirm(SqlStore& store, std::shared_ptr<sql::SentCommit> sent)
      : store_(store), sent_(std::move(sent)) {}
  void wait() override { store_.await_commit(*sent_); }
  void then(std::function<void(const std::string& error)> done) override {
    store_.when_committed(sent_, std::move(done));
  }

 private:
  SqlStore& store_;
  std::shared_ptr<sql::SentCommit> sent_;
};

void SqlStore::transaction(const std::function<void()>& fn) {
  run_transaction(fn, false);
}

Confirm SqlStore::transaction_sent(const std::function<void()>& fn) {
  std::shared_ptr<sql::SentCommit> sent = run_transaction(fn, true);
  if (!sent || sent->done) {
    // Joined an outer transaction, or committed in place; a failure has thrown already.
    return Confirm();
  }
  return Confirm(std::make_shared<SentConfirm>(*this, std::move(sent)));
}

std::shared_ptr<sql::SentCommit> SqlStore::run_transaction(const std::function<void()>& fn,
                                                           bool send) {
  std::lock_guard lock(mutex_);
  if (depth_ > 0) {
    // Joins the outer transaction; the savepoint lets an inner failure that the caller
    // catches undo only the inner writes instead of committing half of them (and, on
    // PostgreSQL, leaves the outer transaction usable: an error aborts it up to the savepoint).
    const std::string name = "pf_nested_" + std::to_string(depth_);
    conn_->exec("SAVEPOINT " + name, "starting a nested transaction");
    ++depth_;
    try {
      fn();
    } catch (...) {
      --depth_;
      written_.clear();  // copies written inside the savepoint are undone with it
      try {
        conn_->exec("ROLLBACK TO SAVEPOINT " + name, "undoing a nested transaction");
        conn_->exec("RELEASE SAVEPOINT " + name, "undoing a nested transaction");
      } catch (const StoreError&) {
        // The outer transaction is lost with the connection's error; the exception already
        // propagating says why, and the outer rollback ends it.
      }
      throw;
    }
    --depth_;
    conn_->exec("RELEASE SAVEPOINT " + name, "finishing a nested transaction");
    return nullptr;
  }

  conn_->begin();
  depth_ = 1;
  try {
    fn();
  } catch (...) {
    depth_ = 0;
    written_.clear();  // the copies may hold what the rollback undoes
    conn_->rollback_quietly();
    throw;
  }
  depth_ = 0;
  try {
    if (send) return conn_->commit_sent();
    conn_->commit();
    return nullptr;
  } catch (...) {
    written_.clear();
    conn_->rollback_quietly();
    throw;
  }
}

void SqlStore::await_commit(const sql::SentCommit& sent) {
  while (true) {
    int socket = -1;
    {
      std::lock_guard lock(mutex_);
      if (!sent.done) socket = conn_->read_arrived();
      if (sent.done) {
        if (!sent.error.empty()) throw StoreError(sent.error);
        return;
      }
    }
    if (socket < 0) throw StoreError("committing: the commit's outcome was lost");
    // Outside mutex_: others use the connection meanwhile (and may read this answer first).
    // The socket may be replaced meanwhile; the bound on the wait covers that.
    pollfd wake{socket, POLLIN, 0};
    if (poll(&wake, 1, kReaderPollMs) < 0 && errno != EINTR) {
      throw StoreError(std::string("waiting for a commit's answer: ") + std::strerror(errno));
    }
  }
}

void SqlStore::when_committed(const std::shared_ptr<sql::SentCommit>& sent,
                              std::function<void(const std::string& error)> done) {
  {
    std::lock_guard lock(mutex_);
    if (!sent->done && stopping_) {
      sent->done = true;
      sent->error = kClosedBeforeConfirmed;
    }
    if (!sent->done) {
      if (!reader_.joinable()) {
        reader_event_ = util::UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (reader_event_.get() < 0) {
          throw StoreError(std::string("starting the commit reader: eventfd: ") +
                           std::strerror(errno));
        }
        reader_ = std::thread([this] { read_commits(); });
      }
      waiting_.push_back(Waiting{sent, std::move(done)});
      reader_wake_.notify_one();
      return;
    }
  }
  done(sent->error);
}

void SqlStore::on_sent_outcomes(bool failed) {
  // A sent commit that failed undid writes the copies already show.
  if (failed) written_.clear();
  if (!reader_reading_ && !waiting_.empty()) wake_commit_reader();
}

void SqlStore::wake_commit_reader() noexcept {
  if (reader_event_.get() < 0) return;  // no reader yet
  const std::uint64_t one = 1;
  // A full counter (never, at 2^64 - 2) or EAGAIN still leaves the reader awake.
  [[maybe_unused]] const ssize_t n = write(reader_event_.get(), &one, sizeof one);
}

void SqlStore::read_commits() {
  std::unique_lock lock(mutex_);
  while (true) {
    reader_wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    reader_reading_ = true;
    const int socket = conn_->read_arrived();
    reader_reading_ = false;
    // The callbacks of the outcomes known, in the order they were asked for.
    std::vector<Waiting> ready;
    std::erase_if(waiting_, [&](Waiting& w) {
      if (!w.sent->done && (socket >= 0 && !stopping_)) return false;
      if (!w.sent->done) {
        // Nothing outstanding on the connection yet not done: the outcome was lost; or the
        // store is closing while it travels.
        w.sent->done = true;
        w.sent->error =
            stopping_ ? kClosedBeforeConfirmed : "committing: the commit's outcome was lost";
      }
      ready.push_back(std::move(w));
      return true;
    });
    if (!ready.empty()) {
      lock.unlock();
      for (Waiting& w : ready) {
        try {
          w.done(w.sent->error);
        } catch (...) {
          // A callback's failure is its owner's to report (the HTTP layer answers for its
          // reply); the reader goes on serving the others.
        }
      }
      ready.clear();
      lock.lock();
      continue;
    }
    if (stopping_) return;
    const int event = reader_event_.get();
    lock.unlock();
    pollfd wake[2] = {{socket, POLLIN, 0}, {event, POLLIN, 0}};
    if (poll(wake, 2, kReaderPollMs) > 0 && (wake[1].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = read(event, &count, sizeof count);
    }
    lock.lock();
  }
}

void SqlStore::stop_commit_reader() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_commit_reader();
  }
  reader_wake_.notify_all();
  if (reader_.joinable()) reader_.join();
}

}  // namespace pf::store
