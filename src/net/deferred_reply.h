// A deferred reply (HttpResponse::defer) as the server and the Resume share it: private to
// net/http_message.cpp and net/http_session.cpp.
#pragma once

#include <functional>
#include <mutex>

#include "net/http_message.h"

namespace pf::net {

// A deferred reply between the handler that deferred it, the server that sends it, and the
// Resume that finishes it; each may come first.
struct DeferredReply {
  std::mutex mu;
  bool resumed = false;
  Resume::Finish finish;  // resumed before the server took the reply over
  // The server's part (runs the hooks, hands the reply to the IO thread); dropped when the
  // connection is shut first. Runs under mu, so shutting waits for a delivery under way.
  std::function<void(Resume::Finish)> deliver;

  void resume(Resume::Finish f) {
    std::lock_guard lock(mu);
    if (resumed) return;
    resumed = true;
    if (!deliver) {
      finish = std::move(f);
      return;
    }
    auto d = std::move(deliver);
    deliver = nullptr;
    d(std::move(f));
  }
  void take_over(std::function<void(Resume::Finish)> d) {
    std::lock_guard lock(mu);
    if (resumed) return d(std::move(finish));
    deliver = std::move(d);
  }
  void detach() {
    std::function<void(Resume::Finish)> dropped;
    {
      std::lock_guard lock(mu);
      dropped = std::move(deliver);
      deliver = nullptr;
    }
    // `dropped` (and the connection it holds) goes here, outside mu.
  }
};

}  // namespace pf::net
