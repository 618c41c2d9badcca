#include "agent/outbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/bounded_json.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// events.state holds two integers.
const util::JsonLimits kStateLimits{
    .max_bytes = 4096, .max_depth = 4, .max_values = 64, .max_string_bytes = 256};

std::string errno_text() {
  return std::strerror(errno);
}

bool write_all(int fd, const std::string& data) {
  const char* p = data.data();
  std::size_t n = data.size();
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

tl::expected<std::unique_ptr<EventOutbox>, std::string> EventOutbox::open(const std::string& dir,
                                                                          std::int64_t epoch_ms) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return tl::unexpected("cannot create " + dir + ": " + ec.message());
  std::unique_ptr<EventOutbox> box(new EventOutbox());
  box->dir_ = dir;
  const std::string state_path = dir + "/events.state";
  const std::string journal_path = dir + "/events.jsonl";
  bool have_state = false;
  // A missing or unreadable state file is recovered from below; a torn or hostile one too.
  if (auto state = util::parse_json_file(state_path, kStateLimits)) {
    if (state->is_object() && state->contains("next_seq") &&
        state->at("next_seq").is_number_integer() &&
        state->at("next_seq").get<std::int64_t>() > 0) {
      box->next_seq_ = state->at("next_seq").get<std::int64_t>();
      const auto acked = state->find("acked_through");
      box->acked_through_ =
          acked != state->end() && acked->is_number_integer() ? acked->get<std::int64_t>() : 0;
      have_state = true;
    }
  }
  if (!have_state) {
    box->next_seq_ = std::max<std::int64_t>(1, epoch_ms);
    box->acked_through_ = box->next_seq_ - 1;
  }
  if (std::ifstream in(journal_path); in) {
    std::string line;
    while (std::getline(in, line)) {
      // A line torn by a crash mid-append does not parse and is skipped: its add() never
      // returned, so nobody was told it was recorded.
      auto parsed = util::parse_json(line);
      if (!parsed) continue;
      json e = std::move(*parsed);
      if (!e.is_object() || !e.contains("seq") || !e["seq"].is_number_integer()) continue;
      const auto seq = e["seq"].get<std::int64_t>();
      box->next_seq_ = std::max(box->next_seq_, seq + 1);
      if (seq > box->acked_through_) box->pending_.push_back(std::move(e));
    }
  }
  box->journal_fd_ = ::open(journal_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (box->journal_fd_ < 0)
    return tl::unexpected("cannot open " + journal_path + ": " + errno_text());
  if (!have_state) {
    if (auto r = box->write_state(); !r) return tl::unexpected(r.error());
  }
  return box;
}

EventOutbox::~EventOutbox() {
  if (journal_fd_ >= 0) close(journal_fd_);
}

tl::expected<std::int64_t, std::string> EventOutbox::add(json event) {
  std::lock_guard lock(mu_);
  const std::int64_t seq = next_seq_;
  event["seq"] = seq;
  const std::string line = util::dump_json_lossy(event) + "\n";
  if (!write_all(journal_fd_, line) || fdatasync(journal_fd_) != 0) {
    return tl::unexpected("cannot journal event in " + dir_ + "/events.jsonl: " + errno_text());
  }
  ++next_seq_;
  pending_.push_back(std::move(event));
  return seq;
}

std::vector<json> EventOutbox::pending(std::size_t max) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  for (const auto& e : pending_) {
    if (out.size() >= max) break;
    out.push_back(e);
  }
  return out;
}

std::size_t EventOutbox::pending_count() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

std::int64_t EventOutbox::next_seq() const {
  std::lock_guard lock(mu_);
  return next_seq_;
}

tl::expected<void, std::string> EventOutbox::acknowledge(std::int64_t seq) {
  std::lock_guard lock(mu_);
  if (seq <= acked_through_) return {};
  acked_through_ = seq;
  while (!pending_.empty() && pending_.front()["seq"].get<std::int64_t>() <= seq) {
    pending_.pop_front();
  }
  if (auto r = write_state(); !r) return r;
  if (pending_.empty()) {
    // Everything is delivered and the state file remembers the numbers: start a new journal.
    if (ftruncate(journal_fd_, 0) != 0) {
      return tl::unexpected("cannot truncate " + dir_ + "/events.jsonl: " + errno_text());
    }
  }
  return {};
}

tl::expected<void, std::string> EventOutbox::write_state() {
  const std::string path = dir_ + "/events.state";
  const std::string tmp = path + ".tmp";
  const std::string text =
      json{{"next_seq", next_seq_}, {"acked_through", acked_through_}}.dump() + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return tl::unexpected("cannot write " + tmp + ": " + errno_text());
  const bool ok = write_all(fd, text) && fsync(fd) == 0;
  close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return tl::unexpected("cannot write " + path + ": " + errno_text());
  }
  return {};
}

}  // namespace pf::agent
