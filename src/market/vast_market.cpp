#include "market/vast_market.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "core/text.h"
#include "market/backoff.h"
#include "market/offer_json.h"
#include "util/steady_clock.h"

namespace pf::market {
namespace {

using nlohmann::json;

constexpr std::size_t kSnippetChars = 200;
// Keys shorter than this are not scrubbed from messages: they could match ordinary words.
// Real vast keys are 64 hex characters.
constexpr std::size_t kMinRedactedKeyChars = 8;

bool is_success(int status) {
  return status >= 200 && status < 300;
}

// Statuses worth another try for an idempotent call. 500 is included although vast-cli omits
// it: a repeated read or destroy is harmless and market-sim injects 500s as transient faults.
bool is_retryable_status(int status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

bool is_transient(HttpFailure failure) {
  return failure == HttpFailure::NotConnected || failure == HttpFailure::Timeout ||
         failure == HttpFailure::Connection;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The start of a reply body, safe to print: control characters become spaces and a cut never
// splits a UTF-8 sequence.
std::string snippet(const std::string& body) {
  std::size_t end = std::min(body.size(), kSnippetChars);
  while (end > 0 && end < body.size() && (static_cast<unsigned char>(body[end]) & 0xC0) == 0x80) {
    --end;
  }
  std::string out = body.substr(0, end);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) c = ' ';
  }
  if (end < body.size()) out += "...";
  return out;
}

std::string string_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

double number_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<double>();
}

std::optional<std::int64_t> integer_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  // Some replies carry ids as whole floats (JSON has one number type).
  // Outside ±2^53 a double is no exact id, and casting one beyond int64 is undefined.
  if (it->is_number_float()) {
    const double v = it->get<double>();
    constexpr double kExact = 9007199254740992.0;  // 2^53
    if (v >= -kExact && v <= kExact && v == std::floor(v)) return static_cast<std::int64_t>(v);
  }
  return std::nullopt;
}

// The market's human-readable message: msg, else message, detail or error.
std::string market_message(const json& body) {
  for (const char* key : {"msg", "message", "detail", "error"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (it->is_string()) {
      if (!it->get_ref<const std::string&>().empty()) return it->get<std::string>();
      continue;
    }
    return it->dump();  // e.g. a structured "detail"
  }
  return {};
}

// `"success": false` only; vast leaves the field out of many replies.
bool says_failure(const json& body) {
  if (!body.is_object()) return false;
  auto it = body.find("success");
  return it != body.end() && it->is_boolean() && !it->get<bool>();
}

bool means_gone(const std::string& code) {
  return code == "no_such_instance" || code == "not_found";
}

std::string path_segment(std::int64_t id) {
  return std::to_string(id) + "/";
}

// ---- configuration -----------------------------------------------------------------------

struct CurlUrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};

struct CurlStringDeleter {
  void operator()(char* text) const { curl_free(text); }
};

std::optional<std::string> url_part(CURLU* url, CURLUPart part) {
  char* raw = nullptr;
  if (curl_url_get(url, part, &raw, 0) != CURLUE_OK || raw == nullptr) return std::nullopt;
  std::unique_ptr<char, CurlStringDeleter> owned(raw);
  return std::string(owned.get());
}

// The URL as it may be printed: anything after '?' or '#' could hold a credential, and so could
// a userinfo part.
std::string printable_url(const std::string& url) {
  std::string shown = url.substr(0, url.find_first_of("?#"));
  if (shown.find('@') != std::string::npos) return "(a URL with embedded credentials)";
  return "'" + snippet(shown) + "'";
}

tl::expected<std::string, std::string> normalise_base_url(const std::string& raw,
                                                          const std::string& source) {
  const std::string text = core::trim(raw);
  const std::string what = "malformed vast URL " + printable_url(text) + " (from " + source + ")";
  if (text.empty()) return tl::unexpected("vast URL from " + source + " is empty");
  std::unique_ptr<CURLU, CurlUrlDeleter> url(curl_url());
  if (!url) return tl::unexpected(std::string("out of memory parsing the vast URL"));
  if (const CURLUcode rc = curl_url_set(url.get(), CURLUPART_URL, text.c_str(), 0);
      rc != CURLUE_OK) {
    return tl::unexpected(what + ": " + curl_url_strerror(rc));
  }
  const auto scheme = url_part(url.get(), CURLUPART_SCHEME);
  if (!scheme || (lower(*scheme) != "http" && lower(*scheme) != "https")) {
    return tl::unexpected(what + ": the scheme must be http:// or https://");
  }
  const auto host = url_part(url.get(), CURLUPART_HOST);
  if (!host || host->empty()) return tl::unexpected(what + ": no host");
  if (url_part(url.get(), CURLUPART_USER) || url_part(url.get(), CURLUPART_PASSWORD)) {
    return tl::unexpected(what + ": credentials do not belong in the URL (use VAST_API_KEY)");
  }
  if (url_part(url.get(), CURLUPART_QUERY) || url_part(url.get(), CURLUPART_FRAGMENT)) {
    return tl::unexpected(what + ": it must not carry a query or fragment");
  }
  std::string normalised = text;
  while (!normalised.empty() && normalised.back() == '/') normalised.pop_back();
  return normalised;
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// The key must be usable as a header value; the message names the source, never the key.
tl::expected<std::string, std::string> checked_key(const std::string& raw,
                                                   const std::string& source) {
  const std::string key = core::trim(raw);
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) {
      return tl::unexpected("the vast API key from " + source +
                            " contains whitespace or non-printable characters; expected one "
                            "token on one line");
    }
  }
  return key;
}

enum class KeyFile { Required, Optional };

// nullopt: an optional file that does not exist (or is empty).
tl::expected<std::optional<std::string>, std::string> read_key_file(const std::string& path,
                                                                    KeyFile need) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (!exists && need == KeyFile::Optional && !ec) return std::optional<std::string>{};
  if (std::filesystem::is_directory(path, ec)) {
    return tl::unexpected("cannot read vast API key file '" + path + "': it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return tl::unexpected("cannot read vast API key file '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return tl::unexpected("cannot read vast API key file '" + path + "'");
  auto key = checked_key(content.str(), "'" + path + "'");
  if (!key) return tl::unexpected(key.error());
  if (key->empty()) {
    if (need == KeyFile::Optional) return std::optional<std::string>{};
    return tl::unexpected("vast API key file '" + path + "' is empty");
  }
  return std::optional<std::string>{*key};
}

}  // namespace

tl::expected<VastConfig, std::string> vast_config_from_env(
    const std::optional<std::string>& url_flag, const std::optional<std::string>& key_file_flag) {
  VastConfig config;

  std::string url = config.base_url;
  std::string url_source = "the default";
  if (url_flag) {
    url = *url_flag;
    url_source = "the URL option";
  } else if (auto from_env = env("PROVERFLEET_VAST_URL");
             from_env && !core::trim(*from_env).empty()) {
    url = *from_env;
    url_source = "PROVERFLEET_VAST_URL";
  }
  auto base = normalise_base_url(url, url_source);
  if (!base) return tl::unexpected(base.error());
  config.base_url = *base;

  if (auto from_env = env("VAST_API_KEY"); from_env && !core::trim(*from_env).empty()) {
    auto key = checked_key(*from_env, "VAST_API_KEY");
    if (!key) return tl::unexpected(key.error());
    config.api_key = *key;
    return config;
  }
  if (key_file_flag) {
    auto key = read_key_file(*key_file_flag, KeyFile::Required);
    if (!key) return tl::unexpected(key.error());
    config.api_key = **key;
    return config;
  }
  if (auto home = env("HOME"); home && !home->empty()) {
    for (const char* relative : {"/.config/vastai/vast_api_key", "/.vast_api_key"}) {
      auto key = read_key_file(*home + relative, KeyFile::Optional);
      if (!key) return tl::unexpected(key.error());
      if (*key) {
        config.api_key = **key;
        break;
      }
    }
  }
  return config;
}

tl::expected<json, std::string> parse_vast_reply(std::string_view body) {
  return util::parse_json(body, kVastReplyLimits);
}

tl::expected<Instance, std::string> instance_from_vast_json(const json& record) {
  if (!record.is_object()) return tl::unexpected(std::string("instance record is not an object"));
  const auto id = integer_field(record, "id");
  if (!id || *id <= 0) return tl::unexpected(std::string("instance record has no numeric \"id\""));
  Instance instance;
  instance.id = *id;
  instance.machine_id = integer_field(record, "machine_id").value_or(0);
  instance.label = string_field(record, "label");
  instance.actual_status = string_field(record, "actual_status");
  instance.intended_status = string_field(record, "intended_status");
  instance.cur_state = string_field(record, "cur_state");
  instance.next_state = string_field(record, "next_state");
  instance.status_msg = string_field(record, "status_msg");
  instance.gpu_name = string_field(record, "gpu_name");
  const std::int64_t gpus = integer_field(record, "num_gpus").value_or(0);
  instance.num_gpus = gpus >= 0 && gpus <= 1'000'000 ? static_cast<int>(gpus) : 0;
  instance.dph_total = number_field(record, "dph_total");
  instance.start_date = number_field(record, "start_date");
  instance.end_date = std::max(0.0, number_field(record, "end_date"));
  if (const auto bid = record.find("is_bid"); bid != record.end() && bid->is_boolean())
    instance.is_bid = bid->get<bool>();
  auto port = [](std::optional<std::int64_t> p) {
    return p && *p > 0 && *p <= 65535 ? static_cast<int>(*p) : 0;
  };
  instance.ssh_host = core::trim(string_field(record, "ssh_host"));
  instance.ssh_port = port(integer_field(record, "ssh_port"));
  instance.public_ip = core::trim(string_field(record, "public_ipaddr"));
  // ports: {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "20000"}]}, only while running.
  if (const auto ports = record.find("ports"); ports != record.end() && ports->is_object()) {
    const auto ssh = ports->find("22/tcp");
    if (ssh != ports->end() && ssh->is_array() && !ssh->empty() && (*ssh)[0].is_object()) {
      const json& binding = (*ssh)[0];
      if (auto n = integer_field(binding, "HostPort")) {
        instance.direct_ssh_port = port(n);
      } else if (const std::string text = string_field(binding, "HostPort");
                 !text.empty() && text.size() <= 5 &&
                 text.find_first_not_of("0123456789") == std::string::npos) {
        instance.direct_ssh_port = port(std::stoll(text));
      }
    }
  }
  instance.raw = record;
  return instance;
}

VastMarket::VastMarket(VastConfig config) : config_(std::move(config)) {
  while (!config_.base_url.empty() && config_.base_url.back() == '/') config_.base_url.pop_back();
  config_.api_key = core::trim(config_.api_key);
  http_.connect_timeout_s = config_.connect_timeout_s;
  http_.request_timeout_s = config_.request_timeout_s;
  http_.max_body_bytes = config_.max_body_bytes;
  http_.user_agent = config_.user_agent;
  rng_.seed(config_.jitter_seed != 0 ? config_.jitter_seed : std::random_device{}());
  for (std::size_t i = 0; i < kVastEndpointCount; ++i) {
    RateRule rule = config_.pacing.rules[i];
    if (rule.limits()) rule.window_s += std::max(0.0, config_.pacing_margin_s);
    paced_[i] = RateWindow(rule);
  }
  // The key goes into a header line: anything that could break the line out is refused here,
  // once, and every call reports it (a constructor cannot fail).
  if (!checked_key(config_.api_key, "the configuration")) {
    config_problem_ = error(ErrorKind::Unauthorized, 0, "",
                            "the configured vast API key contains whitespace or non-printable "
                            "characters; nothing was sent");
  } else if (config_.base_url.empty()) {
    config_problem_ = error(ErrorKind::InvalidArgument, 0, "", "the vast base URL is empty");
  }
}

// ---- plumbing -----------------------------------------------------------------------------

MarketError VastMarket::error(ErrorKind kind, int http_status, std::string code,
                              const std::string& message) const {
  MarketError e{kind, http_status, std::move(code), message};
  // A server could echo the key back in a body we quote; scrub it wherever it landed.
  const std::string& key = config_.api_key;
  if (key.size() >= kMinRedactedKeyChars) {
    for (std::string* text : {&e.message, &e.code}) {
      for (auto at = text->find(key); at != std::string::npos; at = text->find(key, at)) {
        text->replace(at, key.size(), "<redacted>");
      }
    }
  }
  return e;
}

HttpRequest VastMarket::to_http(const Call& call) const {
  HttpRequest request;
  request.method = call.method;
  request.url = config_.base_url + call.path;
  char separator = '?';
  for (const auto& [name, value] : call.query) {
    request.url += separator + url_encode(name) + "=" + url_encode(value);
    separator = '&';
  }
  request.headers.emplace_back("Accept: application/json");
  if (!config_.api_key.empty())
    request.headers.push_back("Authorization: Bearer " + config_.api_key);
  if (call.body) {
    request.headers.emplace_back("Content-Type: application/json");
    request.body = call.body->dump();
  }
  return request;
}

Result<void> VastMarket::require_key(const Call& call) const {
  if (!config_.api_key.empty()) return {};
  return tl::unexpected(error(ErrorKind::Unauthorized, 0, "",
                              std::string("vast ") + call.method + " " + call.path +
                                  " needs an API key: set VAST_API_KEY or give a key file"));
}

MarketError VastMarket::reply_error(const Call& call, int status, const std::string& body,
                                    const json* parsed) const {
  std::string code;
  std::string text;
  if (parsed != nullptr && parsed->is_object()) {
    code = string_field(*parsed, "error");
    text = market_message(*parsed);
  } else {
    text = core::trim(body).empty() ? std::string("(empty body)") : snippet(body);
  }

  ErrorKind kind = ErrorKind::MarketError;
  if (status == 401 || status == 403 || lower(text).find("invalid user key") != std::string::npos) {
    kind = ErrorKind::Unauthorized;
  } else if (code == "no_such_ask") {
    kind = ErrorKind::OfferGone;
  } else if (status == 429) {
    kind = ErrorKind::RateLimited;
  } else if (means_gone(code)) {
    kind = ErrorKind::NotFound;
  } else if (code == "invalid_args") {
    kind = ErrorKind::InvalidArgument;
  } else if (status == 502 || status == 503 || status == 504) {
    kind = ErrorKind::Transport;
  }

  std::string message =
      std::string("vast ") + call.method + " " + call.path + ": HTTP " + std::to_string(status);
  if (!code.empty()) message += " " + code;
  if (!text.empty() && text != code) message += ": " + text;
  return error(kind, status, code, message);
}

MarketError VastMarket::transport_error(const Call& call, const HttpError& e, int attempts) const {
  const std::string where = std::string("vast ") + call.method + " " + call.path;
  const std::string tries =
      attempts > 1 ? " (after " + std::to_string(attempts) + " attempts)" : "";
  switch (e.failure) {
    case HttpFailure::Truncated:
      return error(ErrorKind::BadResponse, e.status, "",
                   where + ": reply truncated" +
                       (e.status > 0 ? " (HTTP " + std::to_string(e.status) + ")" : "") + ": " +
                       e.message + tries);
    case HttpFailure::TooLarge:
      return error(ErrorKind::BadResponse, e.status, "", where + ": " + e.message + tries);
    default:
      return error(ErrorKind::Transport, 0, "",
                   where + ": " + to_string(e.failure) + ": " + e.message + tries);
  }
}

void VastMarket::pace(const Call& call) {
  const auto endpoint = vast_endpoint_of(call.method, call.path);
  if (!endpoint) return;
  const auto index = static_cast<std::size_t>(*endpoint);
  const double now = util::steady_seconds();
  double at = now;
  {
    std::lock_guard lock(pace_mutex_);
    at = paced_[index].earliest(now);
    paced_[index].record(at);  // the slot is this call's even while it waits for it
  }
  if (at > now) std::this_thread::sleep_for(std::chrono::duration<double>(at - now));
}

void VastMarket::sleep_before_retry(int retry) {
  double delay = 0;
  {
    std::lock_guard lock(rng_mutex_);
    delay = full_jitter_delay_s(retry, config_.backoff_base_s, config_.backoff_cap_s, rng_);
  }
  if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
}

Result<json> VastMarket::send(const Call& call, bool retry) {
  if (config_problem_) return tl::unexpected(*config_problem_);
  const int attempts = retry ? std::max(1, config_.max_attempts) : 1;
  for (int attempt = 1;; ++attempt) {
    const bool last = attempt >= attempts;
    pace(call);
    auto reply = http_perform(http_, to_http(call));
    if (!reply) {
      if (is_transient(reply.error().failure) && !last) {
        sleep_before_retry(attempt - 1);
        continue;
      }
      return tl::unexpected(transport_error(call, reply.error(), attempt));
    }
    if (is_retryable_status(reply->status) && !last) {
      sleep_before_retry(attempt - 1);
      continue;
    }

    auto parsed = parse_vast_reply(reply->body);
    const json* body = parsed ? &*parsed : nullptr;
    if (!is_success(reply->status)) {
      MarketError e = reply_error(call, reply->status, reply->body, body);
      if (attempt > 1) e.message += " (after " + std::to_string(attempt) + " attempts)";
      return tl::unexpected(std::move(e));
    }
    if (body == nullptr) {
      return tl::unexpected(error(
          ErrorKind::BadResponse, reply->status, "",
          std::string("vast ") + call.method + " " + call.path + ": reply is not JSON (HTTP " +
              std::to_string(reply->status) + ", " + parsed.error() +
              "): " + (core::trim(reply->body).empty() ? "(empty body)" : snippet(reply->body))));
    }
    if (says_failure(*body)) {
      return tl::unexpected(reply_error(call, reply->status, reply->body, body));
    }
    return std::move(*parsed);
  }
}

// ---- search -------------------------------------------------------------------------------

Result<SearchResult> VastMarket::search_offers(const SearchRequest& request) {
  Call call{"POST", "/api/v0/bundles/", {}, std::nullopt};
  if (!request.query.is_object()) {
    return tl::unexpected(error(ErrorKind::InvalidArgument, 0, "",
                                "search query must be a JSON object of filters, got " +
                                    std::string(request.query.type_name())));
  }
  if (request.limit <= 0) {
    return tl::unexpected(
        error(ErrorKind::InvalidArgument, 0, "",
              "search limit must be positive, got " + std::to_string(request.limit)));
  }
  // nlohmann writes NaN and infinity as null, which vast reads as "field is null": a filter
  // that silently means something else. The query parser never makes one; code might.
  if (!util::all_numbers_finite(request.query) || !std::isfinite(request.allocated_storage_gb)) {
    return tl::unexpected(
        error(ErrorKind::InvalidArgument, 0, "", "search query holds a number that is not finite"));
  }
  json body = request.query;
  json order = json::array();
  for (const auto& [field, direction] : request.order) order.push_back({field, direction});
  body["order"] = std::move(order);
  body["type"] = request.type;
  body["limit"] = request.limit;
  body["allocated_storage"] = request.allocated_storage_gb;
  call.body = std::move(body);

  auto reply = send(call, /*retry=*/true);
  if (!reply) return tl::unexpected(reply.error());
  auto offers = reply->find("offers");
  if (!reply->is_object() || offers == reply->end() || !offers->is_array()) {
    return tl::unexpected(error(ErrorKind::BadResponse, 200, "",
                                "vast POST /api/v0/bundles/: reply has no \"offers\" array"));
  }
  SearchResult result;
  result.offers.reserve(offers->size());
  std::size_t index = 0;
  for (const auto& record : *offers) {
    auto offer = offer_from_vast_json(record);
    if (!offer) {
      result.warnings.push_back("offer #" + std::to_string(index) + " skipped: " + offer.error());
    } else {
      if (!offer->data_flags.empty()) {
        std::string line = "offer " + std::to_string(offer->id) + ":";
        for (const auto& flag : offer->data_flags) line += " " + flag + ";";
        line.pop_back();
        result.warnings.push_back(std::move(line));
      }
      result.offers.push_back(std::move(*offer));
    }
    ++index;
  }
  return result;
}

// ---- instances ----------------------------------------------------------------------------

Result<std::vector<Instance>> VastMarket::list_instances(const std::optional<std::string>& label) {
  const json filters = label ? json{{"label", {{"eq", *label}}}} : json::object();
  const json order_by = json::array({{{"col", "id"}, {"dir", "asc"}}});
  std::vector<Instance> instances;
  std::set<std::string> seen_tokens;
  std::optional<std::string> token;
  for (int page = 1; page <= kMaxListPages; ++page) {
    Call call{"GET", "/api/v1/instances/", {}, std::nullopt};
    call.query = {{"limit", std::to_string(kListPageSize)},
                  {"order_by", order_by.dump()},
                  {"select_filters", filters.dump()}};
    // vast-cli sends string parameters raw and everything else JSON-encoded.
    if (token) call.query.emplace_back("after_token", *token);

    auto reply = send(call, /*retry=*/true);
    if (!reply) return tl::unexpected(reply.error());
    const std::string where = "vast GET /api/v1/instances/ page " + std::to_string(page);
    if (!reply->is_object() || !reply->contains("instances")) {
      return tl::unexpected(
          error(ErrorKind::BadResponse, 200, "", where + ": reply has no \"instances\""));
    }
    const json& records = reply->at("instances");
    if (!records.is_null() && !records.is_array()) {
      return tl::unexpected(
          error(ErrorKind::BadResponse, 200, "", where + ": \"instances\" is not an array"));
    }
    if (records.is_array()) {
      for (const auto& record : records) {
        auto instance = instance_from_vast_json(record);
        if (!instance) {
          return tl::unexpected(
              error(ErrorKind::BadResponse, 200, "", where + ": " + instance.error()));
        }
        // The server filters by label; checking again guards against one that ignores it.
        if (label && instance->label != *label) continue;
        instances.push_back(std::move(*instance));
      }
    }

    const auto next = reply->find("next_token");
    if (next == reply->end() || next->is_null() ||
        (next->is_string() && next->get_ref<const std::string&>().empty())) {
      return instances;
    }
    const std::string next_token = next->is_string() ? next->get<std::string>() : next->dump();
    if (!seen_tokens.insert(next_token).second) {
      return tl::unexpected(error(ErrorKind::BadResponse, 200, "",
                                  where + ": the server repeated a paging token; stopping"));
    }
    token = next_token;
  }
  return tl::unexpected(error(ErrorKind::BadResponse, 200, "",
                              "vast GET /api/v1/instances/: more than " +
                                  std::to_string(kMaxListPages) + " pages; stopping"));
}

Result<std::optional<Instance>> VastMarket::show_instance(std::int64_t id) {
  Call call{"GET", "/api/v0/instances/" + path_segment(id), {{"owner", "me"}}, std::nullopt};
  auto reply = send(call, /*retry=*/true);
  if (!reply) {
    if (reply.error().kind == ErrorKind::NotFound) return std::optional<Instance>{};
    return tl::unexpected(reply.error());
  }
  const std::string where = std::string("vast GET ") + call.path;
  if (!reply->is_object() || !reply->contains("instances")) {
    return tl::unexpected(
        error(ErrorKind::BadResponse, 200, "", where + ": reply has no \"instances\""));
  }
  const json& record = reply->at("instances");
  if (record.is_null() || (record.is_array() && record.empty())) return std::optional<Instance>{};
  // The legacy shape is a one-element list; the current one a single object.
  const json& one = record.is_array() && record.size() == 1 ? record[0] : record;
  auto instance = instance_from_vast_json(one);
  if (!instance) {
    return tl::unexpected(error(ErrorKind::BadResponse, 200, "", where + ": " + instance.error()));
  }
  return std::optional<Instance>{std::move(*instance)};
}

Result<void> VastMarket::destroy_instance(std::int64_t id) {
  Call call{"DELETE", "/api/v0/instances/" + path_segment(id), {}, json::object()};
  if (auto ok = require_key(call); !ok) return ok;
  // Retrying is safe: a destroy whose reply was lost answers no_such_instance the next time.
  auto reply = send(call, /*retry=*/true);
  if (!reply && reply.error().kind != ErrorKind::NotFound) return tl::unexpected(reply.error());
  return {};
}

Result<void> VastMarket::set_label(std::int64_t id, const std::string& label) {
  Call call{"PUT", "/api/v0/instances/" + path_segment(id), {}, json{{"label", label}}};
  if (label.size() > kMaxLabelChars) {
    return tl::unexpected(error(ErrorKind::InvalidArgument, 0, "",
                                "label is " + std::to_string(label.size()) +
                                    " characters; vast allows at most " +
                                    std::to_string(kMaxLabelChars)));
  }
  if (auto ok = require_key(call); !ok) return ok;
  auto reply = send(call, /*retry=*/true);  // setting the same label twice is harmless
  if (!reply) return tl::unexpected(reply.error());
  return {};
}

Result<void> VastMarket::change_bid(std::int64_t id, double price) {
  // vast-cli vast.py `change bid` (change__bid) and vastai/api/instances.py change_bid.
  Call call{"PUT",
            "/api/v0/instances/bid_price/" + path_segment(id),
            {},
            json{{"client_id", "me"}, {"price", price}}};
  if (!(price >= kMinBidPrice && price <= kMaxBidPrice)) {
    return tl::unexpected(
        error(ErrorKind::InvalidArgument, 0, "", "change bid: price must be 0.001 to 128 $/hour"));
  }
  if (auto ok = require_key(call); !ok) return ok;
  auto reply = send(call, /*retry=*/true);  // the same bid twice is harmless
  if (!reply) return tl::unexpected(reply.error());
  return {};
}

// ---- create -------------------------------------------------------------------------------

Result<CreateResult> VastMarket::reconcile_create(const CreateRequest& request,
                                                  const std::string& why, bool& none_found) {
  none_found = false;
  const int reads = std::max(1, config_.create_reconcile_reads);
  std::optional<MarketError> last_failure;
  for (int read = 0; read < reads; ++read) {
    // Reads can lag a create, so even the first one waits a little.
    sleep_before_retry(read);
    auto found = list_instances(request.label);
    if (!found) {
      last_failure = found.error();
      continue;
    }
    last_failure.reset();
    if (found->empty()) continue;
    std::vector<std::int64_t> ids;
    for (const auto& instance : *found) ids.push_back(instance.id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    CreateResult result;
    result.instance_id = ids.front();
    result.reconciled = true;
    result.also_found.assign(ids.begin() + 1, ids.end());
    return result;
  }
  const std::string head = "create of offer " + std::to_string(request.offer_id) + " (label '" +
                           request.label + "'): " + why;
  if (last_failure) {
    return tl::unexpected(
        error(ErrorKind::CreateUnknown, 0, "",
              head + "; reconciliation could not list instances: " + last_failure->message +
                  "; an instance may exist: list by this label before "
                  "renting again"));
  }
  none_found = true;
  return tl::unexpected(error(ErrorKind::CreateUnknown, 0, "",
                              head + "; no instance with this label appeared after " +
                                  std::to_string(reads) +
                                  " reads; it may still appear: list by this label before "
                                  "renting again"));
}

Result<CreateResult> VastMarket::create_instance(const CreateRequest& request) {
  Call call{"PUT", "/api/v0/asks/" + path_segment(request.offer_id), {}, std::nullopt};
  auto invalid = [&](const std::string& why) {
    return tl::unexpected(error(ErrorKind::InvalidArgument, 0, "", "create: " + why));
  };
  if (request.offer_id <= 0) return invalid("offer id must be positive");
  if (request.image.empty()) return invalid("image is empty");
  if (request.label.empty()) {
    return invalid(
        "label is empty; a unique label is required to find the instance if the "
        "reply is lost");
  }
  if (request.label.size() > kMaxLabelChars) {
    return invalid("label is " + std::to_string(request.label.size()) +
                   " characters; vast allows at most " + std::to_string(kMaxLabelChars));
  }
  if (!(request.disk_gb > 0) || !std::isfinite(request.disk_gb)) {
    return invalid("disk_gb must be a positive number");
  }
  if (request.bid_price &&
      !(*request.bid_price >= kMinBidPrice && *request.bid_price <= kMaxBidPrice)) {
    return invalid("bid price must be 0.001 to 128 $/hour");
  }
  if (auto ok = require_key(call); !ok) return tl::unexpected(ok.error());
  if (config_problem_) return tl::unexpected(*config_problem_);

  json env_object = json::object();
  for (const auto& [name, value] : request.env) env_object[name] = value;
  json body = {{"client_id", "me"},
               {"image", request.image},
               {"disk", request.disk_gb},
               {"label", request.label},
               {"env", std::move(env_object)}};
  if (!request.onstart.empty()) body["onstart"] = request.onstart;
  if (!request.runtype.empty()) body["runtype"] = request.runtype;
  // Its presence alone makes the rental interruptible (vast-cli vast.py `create instance
  // --bid_price` → "price"; omitted, the rental is on-demand: vast-cli PR #403).
  if (request.bid_price) body["price"] = *request.bid_price;
  call.body = std::move(body);

  const int max_sends = std::max(1, config_.max_attempts);
  bool resent_after_rate_limit = false;
  for (int send_number = 1;; ++send_number) {
    pace(call);
    auto reply = http_perform(http_, to_http(call));
    std::string ambiguity;  // non-empty: the outcome is unknown and must be reconciled
    bool rate_limited = false;

    if (!reply) {
      const HttpError& e = reply.error();
      if (!e.request_may_have_been_sent) {
        // Nothing reached the server, so nothing was created: sending again is safe, and
        // worth it when the cause may pass (not for a bad URL or a TLS verification failure).
        if (is_transient(e.failure) && send_number < max_sends) {
          sleep_before_retry(send_number - 1);
          continue;
        }
        return tl::unexpected(transport_error(call, e, send_number));
      }
      ambiguity = std::string(to_string(e.failure)) + " (" + e.message + ")";
    } else {
      const int status = reply->status;
      const json parsed = parse_vast_reply(reply->body).value_or(json());
      const bool is_object = parsed.is_object();
      const bool claims_success = is_success(status) && is_object && !says_failure(parsed);
      const auto contract = is_object ? integer_field(parsed, "new_contract") : std::nullopt;

      if (contract && *contract > 0 && claims_success) return CreateResult{*contract, false, {}};
      if (contract && *contract > 0) {
        // A failure that still created an instance, in a state we did not ask for (vast does
        // this for an under-priced bid: a stopped instance that bills storage).
        const MarketError failure = reply_error(call, status, reply->body, &parsed);
        std::string message =
            failure.message + "; the market still created instance " + std::to_string(*contract);
        auto destroyed = destroy_instance(*contract);
        message += destroyed ? ", which was destroyed"
                             : ", and destroying it failed: " + destroyed.error().message +
                                   " (destroy it by hand)";
        return tl::unexpected(error(ErrorKind::MarketError, status, failure.code, message));
      }

      if (is_success(status)) {
        if (is_object && !claims_success) {
          // An explicit refusal without a contract: nothing was created.
          return tl::unexpected(reply_error(call, status, reply->body, &parsed));
        }
        ambiguity = is_object ? "HTTP " + std::to_string(status) + " reply without new_contract"
                              : "HTTP " + std::to_string(status) + " reply is not JSON: " +
                                    (core::trim(reply->body).empty() ? "(empty body)"
                                                                     : snippet(reply->body));
      } else {
        const MarketError failure =
            reply_error(call, status, reply->body, &parsed);  // only an object is read
        if (failure.kind == ErrorKind::OfferGone || failure.kind == ErrorKind::Unauthorized) {
          return tl::unexpected(failure);
        }
        if (status == 429) {
          rate_limited = true;
          ambiguity = failure.message;
        } else if (status >= 400 && status < 500) {
          // A definite rejection: nothing was created, and the same request would be
          // rejected again.
          return tl::unexpected(failure);
        } else {
          ambiguity = failure.message;
        }
      }
    }

    bool none_found = false;
    auto reconciled = reconcile_create(request, ambiguity, none_found);
    if (reconciled || !none_found) return reconciled;
    if (rate_limited && !resent_after_rate_limit && send_number < max_sends) {
      // A 429 is the limiter refusing before the create ran, and reconciliation confirmed that
      // nothing was created: one more send, after a pause, is safe.
      resent_after_rate_limit = true;
      sleep_before_retry(send_number);
      continue;
    }
    if (rate_limited) {
      return tl::unexpected(error(ErrorKind::RateLimited, 429, "",
                                  ambiguity + "; no instance was created (checked by label)"));
    }
    return reconciled;
  }
}

}  // namespace pf::market
