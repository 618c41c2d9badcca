#include "net/lane.h"

#include <algorithm>
#include <utility>

namespace pf::net {

Lane::Lane(std::string name, std::size_t threads, std::size_t queue_limit)
    : name_(std::move(name)),
      threads_(std::max<std::size_t>(threads, 1)),
      queue_limit_(queue_limit) {}

void Lane::resize(std::size_t threads, std::size_t queue_limit) {
  threads_ = std::max<std::size_t>(threads, 1);
  queue_limit_ = queue_limit;
}

void Lane::start() {
  for (std::size_t i = 0; i < threads_; ++i) workers_.emplace_back([this] { work(); });
}

bool Lane::try_submit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || jobs_.size() >= queue_limit_ + idle_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

void Lane::stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  wake_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void Lane::work() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      ++idle_;
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    // Jobs handle their own errors (the server's run_handler); this only keeps the worker alive.
    try {
      job();
    } catch (...) {
    }
  }
}

}  // namespace pf::net
