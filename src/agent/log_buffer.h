// Agent and prover output waiting to be pushed to the manager. Bounded: when the manager is
// unreachable for long, the oldest text goes first and a marker says how much was lost.
// Positions are absolute byte offsets, so a chunk being sent can be consumed exactly even if
// new text arrived or old text was dropped meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace pf::agent {

class LogBuffer {
 public:
  explicit LogBuffer(std::size_t capacity = 1u << 20) : capacity_(capacity) {}

  // Appends one line (a newline is added).
  void append_line(const std::string& line);

  struct Chunk {
    std::uint64_t end = 0;      // absolute offset just past the chunk
    std::uint64_t dropped = 0;  // lost bytes the chunk's leading marker reports
    std::string text;
  };
  // Up to `max_bytes` of the oldest text, cut after a newline when one is in reach.
  Chunk peek(std::size_t max_bytes) const;
  // Drops what a successful push of `chunk` delivered.
  void consume(const Chunk& chunk);
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::size_t capacity_;
  std::string text_;
  std::uint64_t front_ = 0;  // absolute offset of text_[0]
  std::uint64_t dropped_unreported_ = 0;
};

}  // namespace pf::agent
