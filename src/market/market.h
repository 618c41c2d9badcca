// The Market interface: what proverfleet needs from a GPU marketplace.
// VastMarket implements it over vast.ai's REST API; the same client talks to market-sim.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "core/billing.h"
#include "core/offer.h"

namespace pf::market {

enum class ErrorKind {
  OfferGone,        // no_such_ask: taken or changed between search and create; move on
  NotFound,         // no such instance
  RateLimited,      // 429 after every retry
  Transport,        // connection refused, timeout, reset (after retries where allowed)
  BadResponse,      // non-JSON, truncated, oversized or wrong-shaped body
  Unauthorized,     // 401/403 or "Invalid user key"
  InvalidArgument,  // rejected before anything was sent (or 400 invalid_args)
  CreateUnknown,    // a create's reply was lost and reconciliation could not find the instance
  MarketError,      // any other failure: message carries the market's msg
  NotLeader,        // refused before sending: this replica does not hold the leader lease
};

const char* to_string(ErrorKind kind);

struct MarketError {
  ErrorKind kind = ErrorKind::MarketError;
  int http_status = 0;  // 0 when no HTTP reply was received
  std::string code;     // market's "error" field, e.g. "no_such_ask"
  std::string message;  // human-readable; includes the market's msg where there was one
};

template <typename T>
using Result = tl::expected<T, MarketError>;

struct SearchRequest {
  // The filter object (vast JSON query: {"field": {"op": value}, ...}). order/type/limit
  // below are always sent explicitly; keys of the same name in `query` are overridden.
  nlohmann::json query = nlohmann::json::object();
  std::vector<std::pair<std::string, std::string>> order = {{"dph_total", "asc"}};
  std::string type = "on-demand";
  int limit = 1000;
  // The disk size search prices into dph_total: the disk a create then rents (CreateRequest).
  double allocated_storage_gb = core::kDefaultDiskGb;
};

struct SearchResult {
  std::vector<core::Offer> offers;
  // One line per offer skipped (unusable: no id) or tolerated with data flags.
  std::vector<std::string> warnings;
};

struct CreateRequest {
  std::int64_t offer_id = 0;
  std::string image;
  double disk_gb = core::kDefaultDiskGb;
  std::string label;  // must be unique per create: reconciliation finds the instance by it
  std::map<std::string, std::string> env;
  std::string onstart;
  std::string runtype = "args";
  // An interruptible rental at this bid, $/hour for the whole offer (vast `price`: its presence
  // alone makes the instance interruptible; without it the rental is on-demand at dph_total).
  // kMinBidPrice..kMaxBidPrice.
  std::optional<double> bid_price;
};
inline constexpr double kMinBidPrice = core::kMinBidUsdPerHour;  // vast's `price` range
inline constexpr double kMaxBidPrice = core::kMaxBidUsdPerHour;

struct CreateResult {
  std::int64_t instance_id = 0;
  bool reconciled = false;  // the reply was lost; the instance was found by its label
  // Reconciliation only: other instances that carry the same label (lowest id is returned in
  // instance_id). Normally empty; non-empty means a label was reused or a create was
  // duplicated, and the caller decides which to keep: none is destroyed automatically.
  std::vector<std::int64_t> also_found;
};

// An instance as the market reports it. Unknown/absent fields are empty/zero.
struct Instance {
  std::int64_t id = 0;
  std::int64_t machine_id = 0;
  std::string label;
  std::string actual_status;  // "" while null (provisioning)
  std::string intended_status;
  std::string cur_state;
  std::string next_state;
  std::string status_msg;
  std::string gpu_name;
  int num_gpus = 0;
  double dph_total = 0;
  double start_date = 0;  // epoch seconds
  double end_date = 0;    // the host's contract end, epoch seconds; 0: not said
  bool is_bid = false;    // an interruptible (bid) rental
  // How to reach the machine by SSH (vast: proxy `ssh_host`/`ssh_port`; direct: `public_ipaddr`
  // and the host port mapped to 22/tcp). Empty / 0 when the market does not say.
  std::string ssh_host;
  int ssh_port = 0;
  std::string public_ip;
  int direct_ssh_port = 0;
  nlohmann::json raw;  // the whole record, for display
};

class Market {
 public:
  virtual ~Market() = default;
  virtual Result<SearchResult> search_offers(const SearchRequest& request) = 0;
  // Never re-sent. On a lost or ambiguous reply the implementation reconciles by label.
  virtual Result<CreateResult> create_instance(const CreateRequest& request) = 0;
  // Every instance of the account (all pages); label filters server-side when given.
  virtual Result<std::vector<Instance>> list_instances(
      const std::optional<std::string>& label = std::nullopt) = 0;
  // nullopt when the market says the instance does not exist.
  virtual Result<std::optional<Instance>> show_instance(std::int64_t id) = 0;
  // Success also when the instance is already gone (no_such_instance).
  virtual Result<void> destroy_instance(std::int64_t id) = 0;
  virtual Result<void> set_label(std::int64_t id, const std::string& label) = 0;
  // An interruptible instance's new bid, $/hour (kMinBidPrice..kMaxBidPrice).
  virtual Result<void> change_bid(std::int64_t id, double price) = 0;
};

}  // namespace pf::market
