#include "agent/log_buffer.h"

#include <algorithm>

namespace pf::agent {

void LogBuffer::append_line(const std::string& line) {
  std::lock_guard lock(mu_);
  text_ += line;
  text_ += '\n';
  if (text_.size() > capacity_) {
    // Cut at a line boundary so what is left starts with a whole line.
    std::size_t cut = text_.size() - capacity_ / 2;
    const std::size_t nl = text_.find('\n', cut);
    cut = nl == std::string::npos ? text_.size() : nl + 1;
    dropped_unreported_ += cut;
    front_ += cut;
    text_.erase(0, cut);
  }
}

LogBuffer::Chunk LogBuffer::peek(std::size_t max_bytes) const {
  std::lock_guard lock(mu_);
  std::size_t n = std::min(max_bytes, text_.size());
  if (n < text_.size()) {
    const std::size_t nl = text_.rfind('\n', n == 0 ? 0 : n - 1);
    if (nl != std::string::npos && nl > 0) n = nl + 1;
  }
  Chunk chunk{front_ + n, dropped_unreported_, text_.substr(0, n)};
  if (dropped_unreported_ > 0) {
    chunk.text.insert(0, "[proverfleet agent: " + std::to_string(dropped_unreported_) +
                             " bytes of log dropped]\n");
  }
  return chunk;
}

void LogBuffer::consume(const Chunk& chunk) {
  std::lock_guard lock(mu_);
  dropped_unreported_ -= std::min(chunk.dropped, dropped_unreported_);
  if (chunk.end <= front_) return;  // already dropped
  const std::uint64_t n = std::min<std::uint64_t>(chunk.end - front_, text_.size());
  text_.erase(0, static_cast<std::size_t>(n));
  front_ += n;
}

std::size_t LogBuffer::size() const {
  std::lock_guard lock(mu_);
  return text_.size();
}

}  // namespace pf::agent
