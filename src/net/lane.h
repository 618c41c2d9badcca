// A lane of the HTTP server (net/http_server.h): a few worker threads and a bounded queue. A
// job is accepted only when a worker is idle or the queue has room, so a burst never waits
// unboundedly: the server answers 503 with Retry-After instead.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pf::net {

class Lane {
 public:
  Lane(std::string name, std::size_t threads, std::size_t queue_limit);
  ~Lane() { stop(); }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  const std::string& name() const { return name_; }

  // Before start().
  void resize(std::size_t threads, std::size_t queue_limit);
  void start();

  // false when the lane is full or stopping. A job handles its own errors; one that throws
  // anyway costs only itself (the worker goes on).
  bool try_submit(std::function<void()> job);

  // Drops queued jobs, lets running ones finish, joins the workers. Idempotent.
  void stop();

 private:
  void work();

  std::string name_;
  std::size_t threads_;
  std::size_t queue_limit_;
  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards the three below
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace pf::net
