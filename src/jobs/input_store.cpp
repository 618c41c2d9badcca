#include "jobs/input_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "util/sha256.h"

namespace pf::jobs {
namespace {

constexpr std::string_view kTempPrefix = ".tmp-";
// put(): bytes hashed and written at a time.
constexpr std::size_t kWritePiece = 1 << 20;

std::string errno_text() {
  return std::strerror(errno);
}

// Closes on scope exit; the error of an explicit close() is the caller's to check.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

void make_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw InputStoreError("job inputs: cannot create '" + dir + "': " + errno_text());
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw InputStoreError("job inputs: '" + dir + "' is not a directory");
  }
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    throw InputStoreError("job inputs: cannot make '" + dir + "' private: " + errno_text());
  }
}

void fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    throw InputStoreError("job inputs: cannot sync '" + dir + "': " + errno_text());
  }
}

}  // namespace

InputStore::Pin::Pin(InputStore* store, std::string digest)
    : store_(store), digest_(std::move(digest)) {
  store_->pin(digest_);
}
InputStore::Pin::Pin(Pin&& other) noexcept
    : store_(std::exchange(other.store_, nullptr)), digest_(std::move(other.digest_)) {}
InputStore::Pin& InputStore::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    release();
    store_ = std::exchange(other.store_, nullptr);
    digest_ = std::move(other.digest_);
  }
  return *this;
}
InputStore::Pin::~Pin() {
  release();
}
void InputStore::Pin::release() {
  if (store_ != nullptr) store_->unpin(digest_);
  store_ = nullptr;
}

InputStore::InputStore(const std::string& data_dir) {
  if (data_dir.empty()) throw InputStoreError("job inputs: the data directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    throw InputStoreError("job inputs: cannot create '" + data_dir + "': " + ec.message());
  }
  dir_ = (std::filesystem::path(data_dir) / "job-inputs").string();
  make_private_dir(dir_);
}

std::string InputStore::path_of(const std::string& digest) const {
  return dir_ + "/" + digest;
}

void InputStore::pin(const std::string& digest) {
  std::lock_guard lock(mu_);
  ++pins_[digest];
}

void InputStore::unpin(const std::string& digest) {
  std::lock_guard lock(mu_);
  auto it = pins_.find(digest);
  if (it != pins_.end() && --it->second <= 0) pins_.erase(it);
}

InputStore::Stored InputStore::put(std::string_view bytes) {
  std::string temp_name;
  {
    std::lock_guard lock(mu_);
    temp_name =
        std::string(kTempPrefix) + std::to_string(::getpid()) + "-" + std::to_string(next_temp_++);
    writing_.insert(temp_name);
  }
  struct Unmark {
    InputStore* self;
    std::string name;
    ~Unmark() {
      std::lock_guard lock(self->mu_);
      self->writing_.erase(name);
    }
  } unmark{this, temp_name};
  const std::string temp_path = dir_ + "/" + temp_name;
  const auto fail = [&](const std::string& what) -> InputStoreError {
    const std::string why = errno_text();
    ::unlink(temp_path.c_str());
    return InputStoreError("job inputs: " + what + " '" + temp_path + "': " + why);
  };

  // One pass over the bytes: each piece is hashed and written while it is in the CPU's cache.
  Fd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) throw fail("cannot create");
  util::Sha256 hash;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const std::size_t piece = std::min(kWritePiece, bytes.size() - done);
    hash.update(bytes.substr(done, piece));
    for (std::size_t written = 0; written < piece;) {
      const ssize_t n = ::write(fd.get(), bytes.data() + done + written, piece - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw fail("cannot write");
      }
      written += static_cast<std::size_t>(n);
    }
    done += piece;
  }

  Stored out;
  out.digest = hash.hex();
  out.bytes = static_cast<std::int64_t>(bytes.size());
  // Pinned before the final name is looked at: from here the sweep cannot remove it.
  out.pin = Pin(this, out.digest);
  const std::string final_path = path_of(out.digest);
  struct stat st {};
  if (::stat(final_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size == static_cast<off_t>(bytes.size())) {
    // Same address, same content: the file there is kept (a temporary left by a failed unlink
    // is swept).
    ::unlink(temp_path.c_str());
    return out;
  }
  if (::fsync(fd.get()) != 0) throw fail("cannot sync");
  if (!fd.close()) throw fail("cannot close");
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) throw fail("cannot rename");
  fsync_dir(dir_);
  return out;
}

tl::expected<InputStore::Range, std::string> InputStore::read(const std::string& digest,
                                                              std::int64_t offset,
                                                              std::int64_t max_bytes) const {
  if (!util::is_sha256_hex(digest)) return tl::unexpected("not an input digest: '" + digest + "'");
  if (offset < 0 || max_bytes < 0) return tl::unexpected(std::string("negative range"));
  Fd fd(::open(path_of(digest).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return tl::unexpected("input " + digest + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return tl::unexpected("input " + digest + ": " + errno_text());
  Range out;
  out.total = st.st_size;
  if (offset >= out.total) return out;
  const std::int64_t want = std::min(max_bytes, out.total - offset);
  out.bytes.resize(static_cast<std::size_t>(want));
  std::int64_t got = 0;
  while (got < want) {
    const ssize_t n =
        ::pread(fd.get(), out.bytes.data() + got, static_cast<std::size_t>(want - got),
                static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return tl::unexpected("input " + digest + ": " + errno_text());
    }
    if (n == 0) break;  // shorter than stat said: cannot happen to a renamed-in file
    got += n;
  }
  out.bytes.resize(static_cast<std::size_t>(got));
  return out;
}

bool InputStore::contains(const std::string& digest) const {
  if (!util::is_sha256_hex(digest)) return false;
  struct stat st {};
  return ::stat(path_of(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

InputStore::Swept InputStore::sweep(const std::set<std::string>& in_use) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(dir_.c_str()), &::closedir);
  if (!dir) throw InputStoreError("job inputs: cannot list '" + dir_ + "': " + errno_text());
  std::lock_guard lock(mu_);
  Swept out;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string name = entry->d_name;
    bool remove = false;
    if (name.starts_with(kTempPrefix)) {
      remove = !writing_.contains(name);
    } else if (util::is_sha256_hex(name)) {
      remove = !in_use.contains(name) && !pins_.contains(name);
    }
    // Anything else is not ours: left alone.
    if (!remove) continue;
    if (::unlink((dir_ + "/" + name).c_str()) == 0) {
      ++out.removed;
    } else if (errno != ENOENT) {
      out.errors.push_back(name + ": " + errno_text());
    }
  }
  return out;
}

}  // namespace pf::jobs
