#include "agent/work_client.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/private_file.h"
#include "market/backoff.h"
#include "market/http_client.h"
#include "market/http_outcome.h"
#include "util/base64.h"
#include "util/bounded_json.h"
#include "util/sha256.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMaxJobsPerLease = 64;
constexpr double kLeaseReplyGraceS = 30;  // beyond the wait: a busy manager still answers

std::string job_path(std::int64_t id) {
  return "/api/v1/agent/jobs/" + std::to_string(id);
}

}  // namespace

const char* to_string(Delivery::Kind kind) {
  switch (kind) {
    case Delivery::Kind::Applied:
      return "applied";
    case Delivery::Kind::Ignored:
      return "ignored";
    case Delivery::Kind::Refused:
      return "refused";
    case Delivery::Kind::Abandoned:
      return "abandoned";
  }
  return "abandoned";
}

tl::expected<std::vector<LeasedJob>, std::string> parse_leases(const json& reply,
                                                               std::int64_t max_input_bytes) {
  if (!reply.is_object()) return tl::unexpected(std::string("lease reply is not an object"));
  auto jobs = reply.find("jobs");
  if (jobs == reply.end() || !jobs->is_array()) {
    return tl::unexpected(std::string("lease reply has no 'jobs' array"));
  }
  if (jobs->size() > static_cast<std::size_t>(kMaxJobsPerLease)) {
    return tl::unexpected("lease reply has " + std::to_string(jobs->size()) + " jobs (at most " +
                          std::to_string(kMaxJobsPerLease) + ")");
  }
  std::vector<LeasedJob> out;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    const json& j = (*jobs)[i];
    const std::string at = "jobs[" + std::to_string(i) + "]";
    if (!j.is_object()) return tl::unexpected(at + " is not an object");
    auto integer = [&](const char* key, std::int64_t min,
                       std::int64_t max) -> tl::expected<std::int64_t, std::string> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number_integer()) {
        return tl::unexpected(at + "." + key + " must be an integer");
      }
      const auto v = it->get<std::int64_t>();
      if (v < min || v > max) return tl::unexpected(at + "." + key + " is out of range");
      return v;
    };
    auto number = [&](const char* key) -> tl::expected<double, std::string> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
          it->get<double>() < 0) {
        return tl::unexpected(at + "." + key + " must be a non-negative number");
      }
      return it->get<double>();
    };
    LeasedJob job;
    auto id = integer("id", 1, std::numeric_limits<std::int64_t>::max());
    if (!id) return tl::unexpected(id.error());
    auto attempt = integer("attempt", 1, 1'000'000);
    if (!attempt) return tl::unexpected(attempt.error());
    auto bytes = integer("input_bytes", 0, max_input_bytes);
    if (!bytes) return tl::unexpected(bytes.error());
    auto deadline = number("deadline_at");
    if (!deadline) return tl::unexpected(deadline.error());
    auto lease_s = number("lease_s");
    if (!lease_s) return tl::unexpected(lease_s.error());
    auto kind = j.find("kind");
    if (kind == j.end() || !kind->is_string()) return tl::unexpected(at + ".kind must be a string");
    auto parsed_kind = core::parse_job_kind(kind->get<std::string>());
    if (!parsed_kind) return tl::unexpected(at + ".kind is not a known proof kind");
    auto digest = j.find("input_digest");
    if (digest == j.end() || !digest->is_string() ||
        !util::is_sha256_hex(digest->get_ref<const std::string&>())) {
      return tl::unexpected(at + ".input_digest must be 64 lowercase hex digits");
    }
    job.id = *id;
    job.attempt = static_cast<int>(*attempt);
    job.kind = *parsed_kind;
    job.input_digest = digest->get<std::string>();
    job.input_bytes = *bytes;
    job.deadline_at = *deadline;
    job.lease_s = *lease_s;
    out.push_back(std::move(job));
  }
  return out;
}

WorkClient::WorkClient(ManagerClient& manager, WorkClientOptions options)
    : manager_(manager), options_(std::move(options)) {}

void WorkClient::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

std::string WorkClient::cache_path(const std::string& digest) const {
  return options_.cache_dir + "/" + digest;
}

bool WorkClient::wait_retry(int failures) {
  double delay = 0;
  {
    std::lock_guard lock(mu_);
    delay = market::full_jitter_delay_s(std::min(failures, 6), options_.retry_base_s,
                                        options_.retry_max_s, rng_);
  }
  if (options_.wait) return options_.wait(delay);
  std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  return true;
}

CallResult<std::vector<LeasedJob>> WorkClient::lease(int max_jobs) {
  max_jobs = std::clamp(max_jobs, 1, kMaxJobsPerLease);
  const auto wait_ms = options_.lease_wait.count();
  auto r = manager_.post_json("/api/v1/agent/jobs/lease",
                              json{{"max_jobs", max_jobs}, {"wait_ms", wait_ms}},
                              static_cast<double>(wait_ms) / 1000.0 + kLeaseReplyGraceS);
  if (!r) {
    if (r.error().kind == CallError::Kind::Unauthorized && options_.on_unauthorized) {
      options_.on_unauthorized(r.error());
    }
    return tl::unexpected(r.error());
  }
  auto jobs = parse_leases(*r, options_.max_input_bytes);
  if (!jobs) return tl::unexpected(CallError{CallError::Kind::BadReply, 200, jobs.error()});
  return std::move(*jobs);
}

tl::expected<void, InputError> WorkClient::download(const LeasedJob& job, PartInput& held,
                                                    const std::function<bool()>& cancelled) {
  const auto total = static_cast<std::uint64_t>(job.input_bytes);
  const std::string url =
      manager_.base_url() + job_path(job.id) + "/input?attempt=" + std::to_string(job.attempt);
  int failures = 0;
  while (true) {
    if (cancelled && cancelled())
      return tl::unexpected(InputError{InputError::Kind::Cancelled, "cancelled"});
    const std::uint64_t offset = held.bytes.size();
    if (offset == total) return {};
    held.bytes.reserve(static_cast<std::size_t>(total));
    market::HttpStreamRequest request;
    request.url = url;
    request.headers = {manager_.authorization_header()};
    request.range = market::ByteRange{offset, total - 1};
    market::HttpOptions http = manager_.http_options();
    http.request_timeout_s = options_.chunk_timeout_s;
    std::uint64_t received = 0;
    bool overflow = false;
    auto r = market::http_get_stream(http, request, [&](const char* data, std::size_t size) {
      if (offset + received + size > total) {
        overflow = true;
        return false;
      }
      held.append(std::string_view(data, size));
      received += size;
      return true;
    });
    if (overflow) {
      held.reset();
      return tl::unexpected(InputError{
          InputError::Kind::Failed,
          "the manager sent more than the " + std::to_string(total) + " bytes the lease named"});
    }
    if (received > 0) failures = 0;  // progress: a cut transfer resumes where it stopped
    std::string why;
    if (r && r->status >= 200 && r->status < 300) {
      if (received == 0)
        why = "empty reply";
      else
        continue;
    } else if (r) {
      const int status = r->status;
      why = "HTTP " + std::to_string(status) + ": " + r->error_body.substr(0, 200);
      if (status == 404 || status == 409 || status == 410) {
        return tl::unexpected(InputError{InputError::Kind::NotOurs, why});
      }
      if (status == 401) {
        if (options_.on_unauthorized) {
          options_.on_unauthorized(CallError{CallError::Kind::Unauthorized, status, why});
        }
      } else if (status == 416) {
        held.reset();  // the manager says our offset is past its input: start over
      } else if (market::refused_for_good(status)) {
        return tl::unexpected(InputError{InputError::Kind::Failed, "input refused: " + why});
      }
    } else {
      why = market::describe(r.error());
    }
    log("job " + std::to_string(job.id) + " input: " + why + " (at byte " +
        std::to_string(offset + received) + " of " + std::to_string(total) + "); retrying");
    if (!wait_retry(failures++)) {
      return tl::unexpected(InputError{InputError::Kind::Cancelled, "stopping"});
    }
  }
}

WorkClient::DigestLock::DigestLock(WorkClient& client, std::string digest)
    : client_(client), digest_(std::move(digest)) {
  {
    std::lock_guard lock(client_.mu_);
    auto& slot = client_.fetching_[digest_];
    if (!slot) slot = std::make_shared<std::mutex>();
    mutex_ = slot;
  }
  held_ = std::unique_lock(*mutex_);
}

WorkClient::DigestLock::~DigestLock() {
  held_.unlock();
  std::lock_guard lock(client_.mu_);
  if (mutex_.use_count() <= 2) client_.fetching_.erase(digest_);
}

tl::expected<std::shared_ptr<const std::string>, InputError> WorkClient::fetch_input(
    const LeasedJob& job, const std::function<bool()>& cancelled) {
  if (!util::is_sha256_hex(job.input_digest)) {
    return tl::unexpected(InputError{InputError::Kind::Failed, "bad input digest"});
  }
  DigestLock digest_lock(*this, job.input_digest);
  {
    // Verified a moment ago and still on its way to the cache.
    std::lock_guard lock(mu_);
    if (auto it = to_cache_.find(job.input_digest); it != to_cache_.end()) return it->second;
  }
  std::error_code ec;
  fs::create_directories(options_.cache_dir, ec);
  fs::permissions(options_.cache_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  const std::string path = cache_path(job.input_digest);
  const std::string part = path + ".part";
  const auto max = static_cast<std::size_t>(job.input_bytes);
  // A cached copy is checked again: a disk can rot, and a bad input would fail a client's job.
  if (fs::exists(path, ec)) {
    auto bytes = util::read_bounded_file(path, max);
    if (bytes && util::sha256_hex(*bytes) == job.input_digest) {
      fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
      return std::make_shared<const std::string>(std::move(*bytes));
    }
    log("job " + std::to_string(job.id) + ": cached input " + path +
        " does not match its digest; fetching it again");
    fs::remove(path, ec);
  }
  // The bytes arrive in memory and are hashed as they come: the digest is checked on exactly
  // what the prover gets, and the proof waits for no disk. What an earlier run left in the part
  // file is where this one starts; what this one cannot finish is left there for the next.
  PartInput held;
  if (fs::exists(part, ec)) {
    auto prefix = util::read_bounded_file(part, max);
    if (prefix) held.append(*prefix);
    fs::remove(part, ec);
  }
  for (int round = 0; round < 2; ++round) {
    if (auto r = download(job, held, cancelled); !r) {
      if (!held.bytes.empty()) save_part(part, held.bytes);
      return tl::unexpected(r.error());
    }
    const std::string got = held.digest();
    if (got == job.input_digest) {
      auto bytes = std::make_shared<const std::string>(std::move(held.bytes));
      keep_in_cache(job.input_digest, bytes);
      return bytes;
    }
    log("job " + std::to_string(job.id) + ": input digest " + got + " is not the " +
        job.input_digest + " the lease named; " + (round == 0 ? "fetching it again" : "giving up"));
    held.reset();
  }
  return tl::unexpected(
      InputError{InputError::Kind::Failed, "the input's SHA-256 did not match its digest twice"});
}

void WorkClient::save_part(const std::string& part, const std::string& bytes) {
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::error_code ec;
    fs::remove(part, ec);
    log("cannot keep the " + std::to_string(bytes.size()) + " bytes fetched so far in " + part);
  }
}

void WorkClient::keep_in_cache(const std::string& digest,
                               std::shared_ptr<const std::string> bytes) {
  {
    std::lock_guard lock(mu_);
    to_cache_[digest] = std::move(bytes);
    if (!cache_writer_.joinable()) cache_writer_ = std::thread([this] { cache_writer_loop(); });
  }
  cache_cv_.notify_all();
}

void WorkClient::cache_writer_loop() {
  while (true) {
    std::string digest;
    std::shared_ptr<const std::string> bytes;
    {
      std::unique_lock lock(mu_);
      cache_cv_.wait(lock, [&] { return closing_ || !to_cache_.empty(); });
      if (to_cache_.empty()) return;
      digest = to_cache_.begin()->first;
      bytes = to_cache_.begin()->second;
    }
    // Written under a temporary name and renamed: the cache only ever holds whole inputs.
    const std::string path = cache_path(digest);
    const std::string temp = path + ".caching";
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    out.close();
    std::error_code ec;
    if (out) fs::rename(temp, path, ec);
    if (!out || ec) {
      fs::remove(temp, ec);
      log("cannot keep input " + digest + " in the cache " + options_.cache_dir);
    }
    {
      std::lock_guard lock(mu_);
      to_cache_.erase(digest);
    }
    cache_cv_.notify_all();
    evict(digest);
  }
}

void WorkClient::wait_for_cache() {
  std::unique_lock lock(mu_);
  cache_cv_.wait(lock, [&] { return to_cache_.empty(); });
}

WorkClient::~WorkClient() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;  // what is on its way is still written: a restart finds it
  }
  cache_cv_.notify_all();
  if (cache_writer_.joinable()) cache_writer_.join();
}

void WorkClient::evict(const std::string& keep) {
  std::set<std::string> busy;
  {
    std::lock_guard lock(mu_);
    for (const auto& [digest, unused] : fetching_) busy.insert(digest);
    for (const auto& [digest, unused] : to_cache_) busy.insert(digest);
  }
  struct Entry {
    fs::file_time_type at;
    std::uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.cache_dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const std::string name = e.path().filename().string();
    const std::string digest = name.substr(0, name.find('.'));
    const auto bytes = e.file_size(ec);
    if (ec) continue;
    total += bytes;
    if (digest == keep || busy.count(digest)) continue;
    entries.push_back({e.last_write_time(ec), bytes, e.path()});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.at < b.at; });
  for (const auto& e : entries) {
    if (total <= options_.max_cache_bytes) break;
    if (fs::remove(e.path, ec)) total -= e.bytes;
  }
}

Delivery WorkClient::deliver(const std::string& path, const json& body,
                             const std::function<bool()>& cancelled) {
  for (int failures = 0;; ++failures) {
    if (cancelled && cancelled()) return {Delivery::Kind::Abandoned, "cancelled"};
    auto r = manager_.post_json(path, body);
    if (r) {
      const bool applied = r->is_object() && r->value("applied", false);
      std::string reason;
      if (r->is_object() && r->contains("reason") && (*r)["reason"].is_string()) {
        reason = (*r)["reason"].get<std::string>();
      }
      return {applied ? Delivery::Kind::Applied : Delivery::Kind::Ignored, reason};
    }
    const CallError& e = r.error();
    switch (e.kind) {
      case CallError::Kind::BadReply:
        // A 2xx: the manager has it, whatever it wrote back.
        return {Delivery::Kind::Ignored, e.message};
      case CallError::Kind::Gone:
      case CallError::Kind::Rejected:
        return {Delivery::Kind::Refused, e.message};
      case CallError::Kind::Unauthorized:
        if (options_.on_unauthorized) options_.on_unauthorized(e);
        break;
      case CallError::Kind::Unreachable:
      case CallError::Kind::ServerError:
        break;
    }
    log("POST " + path + ": " + e.message + "; retrying");
    if (!wait_retry(failures)) return {Delivery::Kind::Abandoned, "stopping"};
  }
}

Delivery WorkClient::report_started(std::int64_t job_id, int attempt,
                                    const std::function<bool()>& cancelled) {
  return deliver(job_path(job_id) + "/started", json{{"attempt", attempt}}, cancelled);
}

Delivery WorkClient::report_result(const JobReport& report,
                                   const std::function<bool()>& cancelled) {
  json body = {{"attempt", report.attempt}, {"ok", report.ok}};
  if (report.ok) {
    body["proof_b64"] = util::base64_encode(report.proof);
    body["prove_ms"] = report.prove_ms;
    body["gpu_ms"] = report.gpu_ms;
    body["queue_ms"] = report.queue_ms;
  } else {
    body["message"] = report.message.substr(0, 4000);
    body["oom"] = report.oom;
  }
  return deliver(job_path(report.job_id) + "/result", body, cancelled);
}

}  // namespace pf::agent
