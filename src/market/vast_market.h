// VastMarket: the Market interface over vast.ai's REST API (and over market-sim, which speaks
// the same subset). Wire formats follow /work/shared/reference/vast-api.md.
//
// Retry policy:
// - Reads (search, list, show), destroys and label changes are idempotent: they are retried on
//   429, 500, 502, 503, 504, connection failures and timeouts, up to max_attempts, with
//   exponential backoff and full jitter (backoff.h). Other 4xx are final.
// - A create is never re-sent blindly. When its outcome is ambiguous (lost or cut reply,
//   timeout after the request may have left, 5xx, 429, non-JSON reply) the client lists the
//   account's instances by the create's label and adopts what it finds. It re-sends only when
//   the request provably did not create anything: it never reached the server, or it was
//   rate-limited (429) and reconciliation found nothing (then at most once).
// - Every call first waits for its endpoint's slot under vast's documented rate limits
//   (rate_limits.h), so several rentals in a row, or a search while the autopilot searches, wait
//   their turn instead of drawing 429s.
//
// The API key travels only in the Authorization header; every error message is scrubbed of it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "market/http_client.h"
#include "market/market.h"
#include "market/rate_limits.h"
#include "util/bounded_json.h"

namespace pf::market {

struct VastConfig {
  std::string base_url = "https://console.vast.ai";
  std::string api_key;  // may be empty: search works without a key, mutations need one
  double connect_timeout_s = 10, request_timeout_s = 60;
  std::size_t max_body_bytes = 64u << 20;             // larger replies are an error, not an OOM
  int max_attempts = 5;                               // reads and destroys
  double backoff_base_s = 1.0, backoff_cap_s = 30.0;  // exponential with full jitter
  int create_reconcile_reads = 5;  // list-by-label attempts after an ambiguous create
  std::uint64_t jitter_seed = 0;   // 0 = random
  std::string user_agent = "proverfleet/0.1";
  // Calls are paced to stay inside these (market/rate_limits.h), each window widened by
  // pacing_margin_s: vast times a call when it arrives, not when it is sent. None here; serve
  // and `offers` set `[market] rate_limits`, whose default is vast's documented table.
  RateLimits pacing;
  double pacing_margin_s = 0.25;
};

// Base URL from url_flag, else env PROVERFLEET_VAST_URL, else the default; it must be an
// http(s) URL with a host and without credentials, query or fragment (a trailing '/' is
// dropped). API key from env VAST_API_KEY, else key_file_flag (which must be readable and
// non-empty), else ~/.config/vastai/vast_api_key or ~/.vast_api_key (vast-cli's places; absent
// files are skipped). Surrounding whitespace is trimmed; a key with inner whitespace or control
// characters is rejected. Errors name the problem and the file, never the key.
tl::expected<VastConfig, std::string> vast_config_from_env(
    const std::optional<std::string>& url_flag, const std::optional<std::string>& key_file_flag);

// Limits for vast's reply bodies: a search returns up to a few thousand offers of ~100 fields.
inline constexpr util::JsonLimits kVastReplyLimits{
    .max_bytes = 64u << 20, .max_depth = 32, .max_values = 8'000'000, .max_string_bytes = 1u << 20};

// A vast reply body parsed with kVastReplyLimits (every reply goes through here).
tl::expected<nlohmann::json, std::string> parse_vast_reply(std::string_view body);

// Parses one instance record of the list/show replies. Fails only without a numeric id.
tl::expected<Instance, std::string> instance_from_vast_json(const nlohmann::json& record);

class VastMarket final : public Market {
 public:
  explicit VastMarket(VastConfig config);

  // POST /api/v0/bundles/. Offers without an id are skipped with a warning.
  Result<SearchResult> search_offers(const SearchRequest& request) override;

  // PUT /api/v0/asks/{id}/. Needs an API key and a non-empty label (InvalidArgument
  // otherwise, before anything is sent).
  // - 404/410 no_such_ask: OfferGone.
  // - A failure reply that still carries new_contract: that instance exists in a state we did
  //   not ask for (vast does this for under-priced bids), so it is destroyed and the call
  //   returns MarketError with the market's msg (and the destroy's failure, if any).
  // - Ambiguous outcome: reconcile by label (see the file comment). One match: that instance,
  //   reconciled=true. Several: the lowest id (the oldest, so the most likely to be the one this
  //   call created) with the rest in also_found, none destroyed: destroying is irreversible,
  //   while a surplus instance is visible to the caller and to any orphan sweep. None:
  //   CreateUnknown.
  Result<CreateResult> create_instance(const CreateRequest& request) override;

  // GET /api/v1/instances/, 25 per page, following next_token (at most kMaxListPages pages; a
  // repeated token is an error). The label filter is applied server-side and checked again
  // here.
  Result<std::vector<Instance>> list_instances(
      const std::optional<std::string>& label = std::nullopt) override;

  // GET /api/v0/instances/{id}/. nullopt for "instances": null or no_such_instance.
  Result<std::optional<Instance>> show_instance(std::int64_t id) override;

  // DELETE /api/v0/instances/{id}/. no_such_instance (any status) counts as success.
  Result<void> destroy_instance(std::int64_t id) override;

  // PUT /api/v0/instances/{id}/ {"label": ...}.
  Result<void> set_label(std::int64_t id, const std::string& label) override;

  // PUT /api/v0/instances/bid_price/{id}/ {"client_id": "me", "price": X}.
  Result<void> change_bid(std::int64_t id, double price) override;

  const VastConfig& config() const { return config_; }

  static constexpr int kMaxListPages = 1000;
  static constexpr int kListPageSize = 25;
  static constexpr std::size_t kMaxLabelChars = 256;

 private:
  struct Call {
    const char* method = "GET";
    std::string path;  // starts with /api/vN/
    std::vector<std::pair<std::string, std::string>> query;
    std::optional<nlohmann::json> body;
  };

  HttpRequest to_http(const Call& call) const;
  // Sends `call`, retrying transient failures when `retry` is set; JSON of a 2xx reply.
  Result<nlohmann::json> send(const Call& call, bool retry);
  Result<void> require_key(const Call& call) const;
  MarketError error(ErrorKind kind, int http_status, std::string code,
                    const std::string& message) const;
  MarketError reply_error(const Call& call, int status, const std::string& body,
                          const nlohmann::json* parsed) const;
  MarketError transport_error(const Call& call, const HttpError& e, int attempts) const;
  void sleep_before_retry(int retry);
  // Waits until `call` may go without breaking its endpoint's limit, and books its slot.
  void pace(const Call& call);

  // Lists by label until something appears or the reads run out. `none_found` is set when
  // every read succeeded and found nothing.
  Result<CreateResult> reconcile_create(const CreateRequest& request, const std::string& why,
                                        bool& none_found);

  VastConfig config_;
  std::optional<MarketError> config_problem_;  // set: every call fails with it, sending nothing
  HttpOptions http_;
  std::mutex rng_mutex_;
  std::mt19937_64 rng_;
  std::mutex pace_mutex_;
  std::array<RateWindow, kVastEndpointCount> paced_;
};

}  // namespace pf::market
