#include "agent/params.h"

#include <blake2.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "market/backoff.h"
#include "market/http_outcome.h"
#include "util/bounded_json.h"
#include "util/hex.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string gib(double bytes) {
  std::ostringstream ss;
  ss.setf(std::ios::fixed);
  ss.precision(1);
  ss << bytes / kGiB << " GiB";
  return ss.str();
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text(int err) {
  return std::strerror(err);
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

std::optional<double> statvfs_free_gib(const std::string& dir) {
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize) / kGiB;
}

// Sleeps `seconds` in small steps; false when cancelled meanwhile.
bool sleep_unless_cancelled(double seconds, const std::function<bool()>& cancelled) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cancelled && cancelled()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !(cancelled && cancelled());
}

// Before the next of `attempts`: a jittered, growing pause (none after the last attempt).
// False when cancelled meanwhile.
bool pause_before_retry(int attempt, int attempts, const FetchOptions& opts, std::mt19937_64& rng) {
  if (attempt + 1 >= attempts) return true;
  const double delay =
      market::full_jitter_delay_s(attempt, opts.retry_base_s, opts.retry_cap_s, rng);
  return sleep_unless_cancelled(delay, opts.cancelled);
}

// A GET of `url` (only `range` of it, when given) with the options' headers and stall limits.
market::HttpStreamRequest file_get(const FetchOptions& opts, const std::string& url,
                                   std::optional<market::ByteRange> range) {
  market::HttpStreamRequest req;
  req.url = url;
  req.headers = opts.headers;
  req.range = range;
  req.low_speed_bytes_per_s = opts.low_speed_bytes_per_s;
  req.low_speed_time_s = opts.low_speed_time_s;
  return req;
}

// ": <the start of the error body>", or nothing.
std::string error_body_suffix(const std::string& error_body) {
  return error_body.empty() ? "" : ": " + error_body.substr(0, 200);
}

constexpr util::JsonLimits kMarkerLimits{
    .max_bytes = 4096, .max_depth = 2, .max_values = 16, .max_string_bytes = 256};

struct FileJob {
  const ParamFile* file = nullptr;
  std::string final_path, part_path, chunks_path, marker_path;
};

struct Marker {
  std::string digest;
  std::uint64_t bytes = 0;
  std::int64_t mtime_ns = 0;
};

// A marker is three scalars; anything else (torn, foreign, wrong types) reads as none, so the
// file is checked again.
std::optional<Marker> read_marker(const std::string& path) {
  const json m = util::parse_json_file(path, kMarkerLimits).value_or(json());
  if (!m.is_object() || !m.contains("digest") || !m["digest"].is_string() || !m.contains("bytes") ||
      !m["bytes"].is_number_unsigned() || !m.contains("mtime_ns") ||
      !m["mtime_ns"].is_number_integer()) {
    return std::nullopt;
  }
  return Marker{m["digest"].get<std::string>(), m["bytes"].get<std::uint64_t>(),
                m["mtime_ns"].get<std::int64_t>()};
}

// The verified file's size when its marker vouches for it with `digest`: a restart learns an
// unlisted size from what it verified before, without asking the source.
std::optional<std::uint64_t> verified_size(const std::string& final_path,
                                           const std::string& marker_path,
                                           const std::string& digest) {
  const auto m = read_marker(marker_path);
  struct stat st {};
  if (!m || digest.empty() || stat(final_path.c_str(), &st) != 0) return std::nullopt;
  if (m->digest != digest || m->bytes != static_cast<std::uint64_t>(st.st_size) ||
      m->mtime_ns != mtime_ns(st)) {
    return std::nullopt;
  }
  return m->bytes;
}

bool marker_matches(const FileJob& job) {
  const auto size = verified_size(job.final_path, job.marker_path, job.file->digest);
  return size && *size == job.file->bytes;
}

void write_marker(const FileJob& job) {
  struct stat st {};
  if (stat(job.final_path.c_str(), &st) != 0) return;
  const std::string tmp = job.marker_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"digest", job.file->digest},
                {"bytes", job.file->bytes},
                {"mtime_ns", mtime_ns(st)}}
               .dump();
  }
  std::error_code ec;
  fs::rename(tmp, job.marker_path, ec);
}

std::uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

// Downloads one file into its .part, resuming recorded chunks. Adds to `downloaded`.
class FileDownload {
 public:
  FileDownload(const FileJob& job, const FetchOptions& opts, FetchProgress& progress)
      : job_(job), f_(*job.file), opts_(opts), progress_(progress) {}

  // Bytes this file already had on disk when the download started.
  std::uint64_t existing() const { return existing_; }
  std::uint64_t downloaded() const { return downloaded_.load(); }

  tl::expected<void, std::string> run() {
    const std::uint64_t chunk = std::max<std::uint64_t>(1, opts_.chunk_bytes);
    const std::uint64_t nchunks = (f_.bytes + chunk - 1) / chunk;
    const std::string header =
        "pf-chunks v1 " + std::to_string(f_.bytes) + " " + std::to_string(chunk);
    std::vector<bool> done(nchunks, false);
    bool resumed = false;
    if (fs::exists(job_.part_path) && fs::exists(job_.chunks_path)) {
      std::ifstream in(job_.chunks_path);
      std::string first;
      std::getline(in, first);
      if (first == header) {
        resumed = true;
        std::string line;
        while (std::getline(in, line)) {
          // A torn last line (killed mid-write) is ignored: that chunk is fetched again.
          if (line.empty() || line.find_first_not_of("0123456789") != std::string::npos) continue;
          const auto idx = std::stoull(line);
          if (idx < nchunks) done[idx] = true;
        }
      }
    }
    if (!resumed) {
      remove_quietly(job_.part_path);
      remove_quietly(job_.chunks_path);
    }
    Fd part(open(job_.part_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (part.get() < 0) {
      return tl::unexpected("cannot open " + job_.part_path + ": " + errno_text(errno));
    }
    if (f_.bytes > 0) {
      // Reserving the whole file up front turns "disk full" into an error now, not hours in.
      const int rc = posix_fallocate(part.get(), 0, static_cast<off_t>(f_.bytes));
      if (rc == ENOSPC) {
        return tl::unexpected("disk full: cannot reserve " + gib(static_cast<double>(f_.bytes)) +
                              " for " + f_.name + " in " + opts_.dir);
      }
      if (rc != 0 && ftruncate(part.get(), static_cast<off_t>(f_.bytes)) != 0) {
        return tl::unexpected("cannot size " + job_.part_path + ": " + errno_text(errno));
      }
    }
    Fd chunks(open(job_.chunks_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (chunks.get() < 0) {
      return tl::unexpected("cannot open " + job_.chunks_path + ": " + errno_text(errno));
    }
    if (!resumed) {
      const std::string line = header + "\n";
      if (write(chunks.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
          fdatasync(chunks.get()) != 0) {
        return tl::unexpected("cannot write " + job_.chunks_path + ": " + errno_text(errno));
      }
    }
    std::vector<std::uint64_t> pending;
    for (std::uint64_t i = 0; i < nchunks; ++i) {
      if (done[i]) {
        existing_ += chunk_len(i, chunk);
      } else {
        pending.push_back(i);
      }
    }
    progress_.add_existing(existing_);
    if (existing_ > 0 && opts_.log) {
      opts_.log("resuming " + f_.name + ": " + gib(static_cast<double>(existing_)) + " of " +
                gib(static_cast<double>(f_.bytes)) + " already on disk");
    }

    part_fd_ = part.get();
    chunks_fd_ = chunks.get();
    std::atomic<std::size_t> next{0};
    const int workers =
        static_cast<int>(std::min<std::size_t>(std::max(1, opts_.connections), pending.size()));
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        std::mt19937_64 rng(static_cast<std::uint64_t>(w) * 7919 + f_.bytes);
        while (!failed_.load()) {
          const std::size_t k = next.fetch_add(1);
          if (k >= pending.size()) break;
          auto r = fetch_chunk(pending[k], chunk, rng);
          if (!r) {
            fail(r.error());
            break;
          }
        }
      });
    }
    for (auto& t : threads) t.join();

    if (range_unsupported_.load()) {
      if (opts_.log) opts_.log(f_.name + ": server ignores byte ranges; fetching it in one piece");
      failed_ = false;
      error_.clear();
      progress_.sub_existing(existing_);
      existing_ = 0;
      if (ftruncate(part.get(), 0) != 0 || ftruncate(chunks.get(), 0) != 0) {
        return tl::unexpected("cannot reset " + job_.part_path + ": " + errno_text(errno));
      }
      auto r = fetch_whole();
      if (!r) return r;
    } else if (failed_.load()) {
      return tl::unexpected(error_);
    }
    if (fsync(part.get()) != 0) {
      return tl::unexpected("cannot flush " + job_.part_path + ": " + errno_text(errno));
    }
    return {};
  }

 private:
  std::uint64_t chunk_len(std::uint64_t idx, std::uint64_t chunk) const {
    const std::uint64_t first = idx * chunk;
    return std::min(chunk, f_.bytes - first);
  }

  void fail(const std::string& message) {
    std::lock_guard lock(mu_);
    if (!failed_.exchange(true)) error_ = message;
  }

  bool cancelled() const { return opts_.cancelled && opts_.cancelled(); }

  // Writes `n` bytes at `offset` in full; false with errno on failure.
  // Writes a received piece at `offset + written` and counts it as downloaded; false (the
  // disk's errno in `write_errno`) when it could not be written.
  bool take(const char* data, std::size_t n, std::uint64_t offset, std::uint64_t& written,
            int& write_errno) {
    if (!write_at(data, n, offset + written)) {
      write_errno = errno;
      return false;
    }
    written += n;
    downloaded_ += n;
    progress_.add_bytes(n);
    return true;
  }

  bool write_at(const char* data, std::size_t n, std::uint64_t offset) {
    while (n > 0) {
      const ssize_t w = pwrite(part_fd_, data, n, static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      data += w;
      n -= static_cast<std::size_t>(w);
      offset += static_cast<std::uint64_t>(w);
    }
    return true;
  }

  tl::expected<void, std::string> fetch_chunk(std::uint64_t idx, std::uint64_t chunk,
                                              std::mt19937_64& rng) {
    const std::uint64_t first = idx * chunk;
    const std::uint64_t len = chunk_len(idx, chunk);
    std::string last_error;
    const int attempts = std::max(1, opts_.chunk_attempts);
    for (int attempt = 0; attempt < attempts; ++attempt) {
      if (cancelled()) return tl::unexpected(std::string("cancelled"));
      if (failed_.load()) return {};  // another chunk failed for good; stop quietly
      std::uint64_t written = 0;
      int write_errno = 0;
      bool too_long = false;
      const auto req = file_get(opts_, f_.url, market::ByteRange{first, first + len - 1});
      auto result = market::http_get_stream(opts_.http, req, [&](const char* data, std::size_t n) {
        if (cancelled()) return false;
        if (written + n > len) {
          too_long = true;
          return false;
        }
        return take(data, n, first, written, write_errno);
      });
      if (result && result->status == 206 && written == len) {
        // Data first, then the record that it is there: a crash in between costs a re-fetch,
        // never a hole.
        if (fdatasync(part_fd_) != 0) {
          return tl::unexpected("cannot flush " + job_.part_path + ": " + errno_text(errno));
        }
        std::lock_guard lock(mu_);
        const std::string line = std::to_string(idx) + "\n";
        if (write(chunks_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
            fdatasync(chunks_fd_) != 0) {
          return tl::unexpected("cannot write " + job_.chunks_path + ": " + errno_text(errno));
        }
        return {};
      }
      progress_.sub_bytes(written);
      downloaded_ -= written;
      if (write_errno != 0) {
        if (write_errno == ENOSPC) {
          return tl::unexpected("disk full while writing " + job_.part_path);
        }
        return tl::unexpected("cannot write " + job_.part_path + ": " + errno_text(write_errno));
      }
      if (cancelled()) return tl::unexpected(std::string("cancelled"));
      if (!result && result.error().status == 200) {
        range_unsupported_ = true;
        failed_ = true;
        return {};
      }
      if (result) {
        const int status = result->status;
        if (market::refused_for_good(status)) {
          return tl::unexpected("HTTP " + std::to_string(status) + " fetching " + f_.name +
                                " from " + f_.url + error_body_suffix(result->error_body));
        }
        last_error = too_long        ? "server sent more than the requested range"
                     : status == 206 ? "reply ended after " + std::to_string(written) + " of " +
                                           std::to_string(len) + " bytes"
                                     : "HTTP " + std::to_string(status);
      } else {
        last_error = market::describe(result.error());
      }
      if (!pause_before_retry(attempt, attempts, opts_, rng)) {
        return tl::unexpected(std::string("cancelled"));
      }
    }
    return tl::unexpected("fetching " + f_.name + " bytes " + std::to_string(first) + "-" +
                          std::to_string(first + len - 1) + " failed " + std::to_string(attempts) +
                          " times; last: " + last_error);
  }

  // The fallback for servers without Range support: one GET from byte 0, no resume.
  tl::expected<void, std::string> fetch_whole() {
    std::uint64_t written = 0;
    int write_errno = 0;
    const auto req = file_get(opts_, f_.url, std::nullopt);
    auto result = market::http_get_stream(opts_.http, req, [&](const char* data, std::size_t n) {
      if (cancelled() || written + n > f_.bytes) return false;
      return take(data, n, 0, written, write_errno);
    });
    if (write_errno != 0) {
      progress_.sub_bytes(written);
      return tl::unexpected(write_errno == ENOSPC ? "disk full while writing " + job_.part_path
                                                  : "cannot write " + job_.part_path + ": " +
                                                        errno_text(write_errno));
    }
    if (!result || result->status != 200 || written != f_.bytes) {
      progress_.sub_bytes(written);
      return tl::unexpected("fetching " + f_.name + " failed: " +
                            (!result ? market::describe(result.error())
                                     : "HTTP " + std::to_string(result->status) + ", " +
                                           std::to_string(written) + " of " +
                                           std::to_string(f_.bytes) + " bytes"));
    }
    return {};
  }

  const FileJob& job_;
  const ParamFile& f_;
  const FetchOptions& opts_;
  FetchProgress& progress_;
  int part_fd_ = -1;
  int chunks_fd_ = -1;
  std::uint64_t existing_ = 0;
  std::atomic<std::uint64_t> downloaded_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> range_unsupported_{false};
  std::mutex mu_;
  std::string error_;
};

// The length of `f` at its source: a 1-byte ranged GET whose 206 names the whole length
// (Content-Range: bytes 0-0/N). Retried like a chunk; a source that ignores ranges cannot be
// sized this way, and the manifest must then give "bytes".
tl::expected<std::uint64_t, std::string> source_size(const ParamFile& f, const FetchOptions& opts) {
  std::mt19937_64 rng(std::hash<std::string>{}(f.name));
  std::string last_error;
  const int attempts = std::max(1, opts.chunk_attempts);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (opts.cancelled && opts.cancelled()) return tl::unexpected(std::string("cancelled"));
    const auto req = file_get(opts, f.url, market::ByteRange{0, 0});
    std::uint64_t body = 0;
    auto result = market::http_get_stream(opts.http, req, [&](const char*, std::size_t n) {
      body += n;
      return body <= 1;
    });
    if (!result && result.error().status == 200) {
      return tl::unexpected(f.url + " ignores byte ranges, so its size cannot be asked: give " +
                            "\"bytes\" for " + f.name + " in the manifest");
    }
    if (result && result->status == 206) {
      if (!result->range_total || *result->range_total == 0) {
        return tl::unexpected(f.url + " answered a ranged GET without the file's length " +
                              "(Content-Range: bytes 0-0/N)");
      }
      if (*result->range_total > kMaxParamFileBytes) {
        return tl::unexpected(f.url + " claims " + std::to_string(*result->range_total) +
                              " bytes for " + f.name + ", more than any parameter file (" +
                              std::to_string(kMaxParamFileBytes) + ")");
      }
      return *result->range_total;
    }
    if (result) {
      const int status = result->status;
      if (market::refused_for_good(status)) {
        return tl::unexpected("HTTP " + std::to_string(status) + " asking the size of " + f.name +
                              " at " + f.url + error_body_suffix(result->error_body));
      }
      last_error = "HTTP " + std::to_string(status);
    } else {
      last_error = market::describe(result.error());
    }
    if (!pause_before_retry(attempt, attempts, opts, rng)) {
      return tl::unexpected(std::string("cancelled"));
    }
  }
  return tl::unexpected("asking the size of " + f.name + " at " + f.url + " failed " +
                        std::to_string(attempts) + " times; last: " + last_error);
}

}  // namespace

std::string param_digest_of(const std::string& data) {
  unsigned char out[BLAKE2B_OUTBYTES];
  blake2b_state state;
  blake2b_init(&state, BLAKE2B_OUTBYTES);
  blake2b_update(&state, reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
  blake2b_final(&state, out, BLAKE2B_OUTBYTES);
  return util::lower_hex(out, 16);
}

tl::expected<std::string, std::string> param_digest(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return tl::unexpected("cannot read " + path + ": " + errno_text(errno));
  blake2b_state state;
  blake2b_init(&state, BLAKE2B_OUTBYTES);
  std::vector<char> buf(4 << 20);
  while (true) {
    const ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return tl::unexpected("cannot read " + path + ": " + errno_text(errno));
    }
    if (n == 0) break;
    blake2b_update(&state, reinterpret_cast<const std::uint8_t*>(buf.data()),
                   static_cast<std::size_t>(n));
  }
  unsigned char out[BLAKE2B_OUTBYTES];
  blake2b_final(&state, out, BLAKE2B_OUTBYTES);
  return util::lower_hex(out, 16);
}

void FetchProgress::set_total(std::uint64_t total, int files) {
  total_ = total;
  files_total_ = files;
}

void FetchProgress::file_done() {
  files_done_.fetch_add(1);
}

void FetchProgress::set_current(const std::string& what) {
  std::lock_guard lock(mu_);
  current_ = what;
}

FetchProgressSnapshot FetchProgress::snapshot(double now) {
  FetchProgressSnapshot s;
  s.done_bytes = done_.load();
  s.total_bytes = total_.load();
  s.files_done = files_done_.load();
  s.files_total = files_total_.load();
  const std::uint64_t fetched = s.done_bytes - std::min(s.done_bytes, existing_.load());
  std::lock_guard lock(mu_);
  s.current = current_;
  samples_.emplace_back(now, fetched);
  while (samples_.size() > 2 && now - samples_[1].first >= 10) samples_.pop_front();
  const auto& [t0, b0] = samples_.front();
  if (now - t0 >= 0.5 && fetched >= b0) {
    s.bytes_per_s = static_cast<double>(fetched - b0) / (now - t0);
    if (s.bytes_per_s > 0 && s.total_bytes >= s.done_bytes) {
      s.eta_s = static_cast<double>(s.total_bytes - s.done_bytes) / s.bytes_per_s;
    }
  }
  return s;
}

tl::expected<FetchSummary, std::string> fetch_params(const std::vector<ParamFile>& files,
                                                     const FetchOptions& opts,
                                                     FetchProgress& progress) {
  if (opts.dir.empty()) return tl::unexpected(std::string("no parameter directory given"));
  std::error_code ec;
  fs::create_directories(opts.dir, ec);
  if (ec) return tl::unexpected("cannot create " + opts.dir + ": " + ec.message());
  auto log = [&](const std::string& line) {
    if (opts.log) opts.log(line);
  };

  // Sizes the manifest leaves out come from an earlier verification, else from the source.
  std::vector<ParamFile> sized = files;
  for (auto& f : sized) {
    if (f.bytes > 0) continue;
    const std::string final_path = opts.dir + "/" + f.name;
    if (auto known = verified_size(final_path, opts.dir + "/." + f.name + ".verified", f.digest)) {
      f.bytes = *known;
      continue;
    }
    progress.set_current("sizing " + f.name);
    auto size = source_size(f, opts);
    if (!size) return tl::unexpected(f.name + ": " + size.error());
    f.bytes = *size;
    log(f.name + ": " + std::to_string(f.bytes) + " bytes at " + f.url);
  }

  FetchSummary summary;
  std::vector<FileJob> jobs;
  for (const auto& f : sized) {
    FileJob j;
    j.file = &f;
    j.final_path = opts.dir + "/" + f.name;
    j.part_path = j.final_path + ".part";
    j.chunks_path = j.final_path + ".part.chunks";
    j.marker_path = opts.dir + "/." + f.name + ".verified";
    jobs.push_back(std::move(j));
    summary.bytes += f.bytes;
    summary.paths.push_back(opts.dir + "/" + f.name);
  }
  progress.set_total(summary.bytes, static_cast<int>(sized.size()));

  // Files already in place (a restart after the fetch finished) are verified, not fetched.
  std::vector<const FileJob*> todo;
  for (const auto& j : jobs) {
    struct stat st {};
    if (stat(j.final_path.c_str(), &st) == 0) {
      if (static_cast<std::uint64_t>(st.st_size) == j.file->bytes) {
        if (marker_matches(j)) {
          progress.add_existing(j.file->bytes);
          progress.file_done();
          continue;
        }
        progress.set_current("verifying " + j.file->name);
        auto digest = j.file->digest.empty() ? tl::expected<std::string, std::string>(std::string())
                                             : param_digest(j.final_path);
        if (digest && *digest == j.file->digest) {
          write_marker(j);
          progress.add_existing(j.file->bytes);
          progress.file_done();
          continue;
        }
        log(j.file->name + " on disk does not match its digest; fetching it again");
      } else {
        log(j.file->name + " on disk has " + std::to_string(st.st_size) + " bytes, expected " +
            std::to_string(j.file->bytes) + "; fetching it again");
      }
      remove_quietly(j.final_path);
      remove_quietly(j.marker_path);
    }
    todo.push_back(&j);
  }

  double need = 0;
  for (const auto* j : todo) {
    const double reserved =
        static_cast<double>(std::min<std::uint64_t>(allocated_bytes(j->part_path), j->file->bytes));
    need += static_cast<double>(j->file->bytes) - reserved;
  }
  if (!todo.empty()) {
    const auto free = opts.free_gib ? opts.free_gib(opts.dir) : statvfs_free_gib(opts.dir);
    if (!free) {
      log("cannot read the free space in " + opts.dir + "; fetching anyway");
    } else if (*free < need / kGiB + opts.reserve_gib) {
      std::ostringstream ss;
      ss.setf(std::ios::fixed);
      ss.precision(1);
      ss << "not enough disk space in " << opts.dir << " for the parameters: need " << need / kGiB
         << " GiB more (+" << opts.reserve_gib << " GiB reserve), " << *free << " GiB free";
      return tl::unexpected(ss.str());
    }
  }

  for (const auto* j : todo) {
    const ParamFile& f = *j->file;
    if (f.digest.empty()) log(f.name + " has no digest in the manifest: only its size is checked");
    for (int attempt = 0;; ++attempt) {
      progress.set_current("fetching " + f.name);
      FileDownload download(*j, opts, progress);
      auto r = download.run();
      summary.downloaded += download.downloaded();
      if (!r) return tl::unexpected(f.name + ": " + r.error());
      progress.set_current("verifying " + f.name);
      auto digest = f.digest.empty() ? tl::expected<std::string, std::string>(std::string())
                                     : param_digest(j->part_path);
      if (!digest) return tl::unexpected(digest.error());
      if (*digest == f.digest) {
        fs::rename(j->part_path, j->final_path, ec);
        if (ec) return tl::unexpected("cannot rename " + j->part_path + ": " + ec.message());
        remove_quietly(j->chunks_path);
        write_marker(*j);
        progress.file_done();
        break;
      }
      remove_quietly(j->part_path);
      remove_quietly(j->chunks_path);
      progress.sub_existing(download.existing());
      progress.sub_bytes(f.bytes - download.existing());
      if (attempt == 0) {
        log(f.name + ": digest mismatch (expected " + f.digest + ", got " + *digest +
            "); fetching it once more");
        summary.refetched++;
        continue;
      }
      return tl::unexpected("parameter " + f.name + " is corrupt at its source: digest " + *digest +
                            " after fetching it twice, expected " + f.digest +
                            " (first 16 bytes of BLAKE2b-512) from " + f.url);
    }
  }
  progress.set_current("");
  return summary;
}

}  // namespace pf::agent
