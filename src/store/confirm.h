// What a Store's caller holds without the Store itself: its error and the outcome of a
// transaction whose commit may still be on its way. Apart from store.h so that headers that
// only carry a Confirm (manager.h's replies) do not make every includer depend on the Store's
// 57 methods: editing store.h rebuilds the files that call it, not the whole tree.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace pf::store {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The outcome of a Store::transaction_sent() transaction: known at once (applied), or once the
// answer to its commit arrives.
class Confirm {
 public:
  // How a store learns the outcome later.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
    virtual void then(std::function<void(const std::string& error)> done) = 0;
  };

  Confirm() = default;  // applied already
  explicit Confirm(std::shared_ptr<Pending> pending) : pending_(std::move(pending)) {}

  // False when the outcome is known to be "applied" already.
  bool pending() const { return pending_ != nullptr; }

  // Waits until the outcome is known; throws StoreError when the transaction failed (nothing of
  // it was written then).
  void wait() const {
    if (pending_) pending_->wait();
  }
  // Calls done(error) once the outcome is known, error empty when the transaction was applied:
  // at once on this thread when it is known already, else on the thread that learns it (the
  // store's own), which `done` must not hold up nor call back into the store from. Never
  // blocks.
  void then(std::function<void(const std::string& error)> done) const {
    if (pending_) return pending_->then(std::move(done));
    done("");
  }

 private:
  std::shared_ptr<Pending> pending_;
};

class Store;  // store/store.h

}  // namespace pf::store
