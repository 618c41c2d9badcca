// Job inputs on disk, content-addressed: <data_dir>/job-inputs/<sha256 hex> (directory 0700,
// files 0600). A file appears under its final name only whole: it is written to a temporary
// name, fsynced and renamed, so a crash leaves at most a stray temporary file, which the next
// sweep removes and nothing ever serves.
//
// Who may remove what: the sweep removes files no job needs any more (the caller says which are
// in use) and leaves alone any digest pinned by a submission that has written its file but not
// yet committed the row naming it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace pf::jobs {

struct InputStoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class InputStore {
 public:
  // Creates <data_dir>/job-inputs (0700) if needed. Throws InputStoreError.
  explicit InputStore(const std::string& data_dir);
  InputStore(const InputStore&) = delete;
  InputStore& operator=(const InputStore&) = delete;

  // Keeps the sweep away from one digest while it lives.
  class Pin {
   public:
    Pin() = default;
    Pin(InputStore* store, std::string digest);
    Pin(Pin&& other) noexcept;
    Pin& operator=(Pin&& other) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin();

   private:
    void release();
    InputStore* store_ = nullptr;
    std::string digest_;
  };

  struct Stored {
    std::string digest;
    std::int64_t bytes = 0;
    Pin pin;  // hold until the row naming the digest is committed
  };
  // Writes `bytes` under its digest (a file already there with the same size is kept: same
  // address, same content). Throws InputStoreError (disk full, permissions...).
  Stored put(std::string_view bytes);

  struct Range {
    std::string bytes;
    std::int64_t total = 0;  // the whole file's size
  };
  // Up to max_bytes from offset (an offset at or past the end returns no bytes). Error: the
  // file is missing or unreadable.
  tl::expected<Range, std::string> read(const std::string& digest, std::int64_t offset,
                                        std::int64_t max_bytes) const;
  bool contains(const std::string& digest) const;

  // Removes every input file whose digest is not in `in_use` and not pinned, and every
  // temporary file no put() is writing.
  struct Swept {
    int removed = 0;
    std::vector<std::string> errors;  // files that could not be removed, and why
  };
  Swept sweep(const std::set<std::string>& in_use);

  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& digest) const;
  void pin(const std::string& digest);
  void unpin(const std::string& digest);

  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::string, int> pins_;  // digest → live pins
  std::set<std::string> writing_;    // temporary file names put() is writing
  std::uint64_t next_temp_ = 0;
};

}  // namespace pf::jobs
