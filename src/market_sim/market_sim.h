// MarketSim: the state of a simulated vast.ai market over a scenario — a TEST DOUBLE and demo
// backend, not a model of vast's internals. It answers the vast.ai endpoints proverfleet uses
// (wire shapes of /work/shared/reference/vast-api.md §2, §4-§7) as JSON values; the HTTP
// shell (market_sim_server.h) only maps them onto HTTP.
//
// Pure: no clock, no threads, no I/O. Every call takes the scenario time `now_h`; callers pass
// non-decreasing times. Not thread-safe; the HTTP shell serialises calls with one mutex.
//
// Instance timeline, from the one truth model (scenario::rental_timeline; t0 = creation time):
//   loading  from t0 until boot = t0 + boot_min/60 (never_boots: loading forever)
//   running  from boot
//   exited   after failure.after_h hours of proving (failure kind crash), the prover starting
//            once params.bytes are down at download_mbps: boot + download + after_h, as the
//            policy simulator has it
//   offline  from boot + failure.after_h            (failure kind offline; overrides the rest)
//   stopped  while the client has stopped it ({"state":"stopped"}); the timeline does not pause
// Billing: the price listed when the instance was created (/2 dph_changes move the listing,
// not running rentals) per scenario hour from boot until destroy, except while stopped or
// offline (storage and bandwidth are not modelled). The balance may go negative; instances
// are not stopped at zero.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scenario/bid_market.h"
#include "scenario/scenario.h"
#include "scenario/truth_model.h"

namespace pf::market_sim {

// The test double speaks the scenario model's vocabulary.
using scenario::FailureKind;
using scenario::Scenario;
using scenario::ScenarioOffer;
using scenario::Truth;

// An API error as vast sends it: HTTP status + {"success": false, "error": code, "msg": msg}.
struct ApiError {
  int http_status = 400;
  std::string code;
  std::string msg;

  nlohmann::json body() const;
};

template <typename T>
using ApiResult = tl::expected<T, ApiError>;

struct MarketSimOptions {
  double start_balance_usd = 1000;
  // Epoch-second timestamps (start_date) = epoch_at_zero_s + now_h * epoch_s_per_h; the CLI
  // maps scenario hours onto wall-clock time (3600 / time scale seconds per hour).
  double epoch_at_zero_s = 1'750'000'000;
  double epoch_s_per_h = 3600;
  // Instance ids are handed out from here upwards, far from the scenarios' offer ids so that
  // mixing the two up in a client shows.
  std::int64_t first_instance_id = 90'000'001;
};

// What acting out a created instance takes (market-sim --spawn-agents): when its container
// starts and when it goes away on its own, in scenario hours, and what the create asked it to
// run.
struct InstanceLaunch {
  std::int64_t id = 0;
  std::size_t offer_index = 0;  // into scenario().offers
  double created_h = 0;
  double boot_h = 0;     // +inf: never boots
  double failure_h = 0;  // the container dies (crash: exited, offline: gone); +inf: never
  // Live instances of the account on the same machine created before this one (asked right
  // after the create: its neighbours then). Each multiplies the proof rate by `contention`;
  // the count changes as instances come and go (co_tenants(), the spawner's co_tenants file).
  int co_tenants = 0;
  std::string onstart;
  nlohmann::json env = nlohmann::json::object();  // string values only (create checks)
};

inline constexpr int kMaxInstancesPerPage = 25;
inline constexpr std::size_t kMaxLabelChars = 256;
inline constexpr double kMinDiskGb = 8;

class MarketSim {
 public:
  explicit MarketSim(Scenario scenario, MarketSimOptions options = {});

  const Scenario& scenario() const { return scenario_; }
  const MarketSimOptions& options() const { return options_; }

  // Offers rentable at now_h: inside [listed_from_h, listed_until_h) and not rented by a live
  // instance; in scenario order, as vast JSON plus the listing flags vast serves (rentable,
  // rented, external, ask_contract_id, reliability, verification).
  std::vector<nlohmann::json> listed_offers(double now_h) const;

  // POST /api/v0/bundles/ with a vast search query -> {"offers": [...]}.
  // 400 invalid_args when the query is malformed.
  ApiResult<nlohmann::json> search_offers(const nlohmann::json& query, double now_h) const;

  // PUT /api/v0/asks/{ask_id}/ -> {"success": true, "new_contract": id, "instance_api_key": k}.
  // 400 invalid_args naming the field; 404 no_such_ask when the offer is unknown, rented or
  // outside its listing window.
  ApiResult<nlohmann::json> create_instance(std::int64_t ask_id, const nlohmann::json& body,
                                            double now_h);

  // GET /api/v1/instances/ given its query parameters (values JSON-encoded as vast takes them;
  // a bare string is accepted too): limit (1..25, larger is capped, default 25), after_token,
  // order_by ([{"col":"id","dir":"asc"|"desc"}] only), select_filters ({col: {op: value}} on
  // stored columns; computed ones such as dph_total -> 400). label_counts counts every live
  // instance of the account by label (unlabelled ones are not counted).
  ApiResult<nlohmann::json> list_instances(const std::map<std::string, std::string>& params,
                                           double now_h) const;

  // GET /api/v0/instances/{id}/ -> {"instances": {...}}, or {"instances": null} when the
  // instance is unknown or destroyed.
  nlohmann::json show_instance(std::int64_t id, double now_h) const;

  // PUT /api/v0/instances/{id}/ with {"label": "..."} and/or {"state": "stopped"|"running"}
  // -> {"success": true}. 404 no_such_instance; 400 label_too_long / invalid_args.
  // PUT /api/v0/instances/bid_price/{id}/ {"client_id": "me", "price": X}: an interruptible
  // instance's new bid, billed for compute from now (vast-cli `change bid`). 400 invalid_price
  // for a price outside [0.001, 128], invalid_args for an on-demand instance.
  ApiResult<nlohmann::json> change_bid(std::int64_t id, const nlohmann::json& body, double now_h);
  ApiResult<nlohmann::json> update_instance(std::int64_t id, const nlohmann::json& body,
                                            double now_h);

  // DELETE /api/v0/instances/{id}/ -> {"success": true}; 404 no_such_instance when unknown or
  // already destroyed. The offer is listed again if still inside its window.
  ApiResult<nlohmann::json> destroy_instance(std::int64_t id, double now_h);

  // GET /api/v0/users/current/ -> id, username, email, credit, balance, ...
  nlohmann::json current_user(double now_h) const;

  // The launch of a live instance; nullopt when unknown or destroyed.
  std::optional<InstanceLaunch> launch(std::int64_t id) const;
  // Our other live instances on the machine of live instance `id` now (0 when unknown): the
  // contention its proofs see.
  int co_tenants(std::int64_t id) const;
  // Whether live instance `id`'s container is stopped at now_h: by its client (PUT state
  // "stopped") or by the market (outbid, contract ended). False when unknown or destroyed.
  bool container_stopped(std::int64_t id, double now_h) const;
  // Offers (indices into scenario().offers) rented by live instances, ascending.
  std::vector<std::size_t> rented_offer_indices() const;

  double spent_usd(double now_h) const;
  double balance_usd(double now_h) const { return options_.start_balance_usd - spent_usd(now_h); }
  std::size_t instances_created() const { return instances_.size(); }
  std::size_t live_instances() const;

 private:
  struct SimInstance {
    std::int64_t id = 0;
    std::size_t offer_index = 0;
    double created_h = 0;
    double dph = 0;  // the price listed at creation, paid for the instance's life
    std::optional<double> destroyed_h;
    std::optional<std::string> label;
    std::string image;
    double disk_gb = kMinDiskGb;
    nlohmann::json env = nlohmann::json::object();
    std::string onstart;
    std::string runtype;
    nlohmann::json args;  // list of strings or null
    bool is_bid = false;
    // The bid, $/hour for compute (vast bills an interruptible instance at its bid, storage
    // apart): [from_h, price) in order, the first from creation; empty for on-demand.
    std::vector<std::pair<double, double>> bids;
    std::string api_key;
    // Periods the client stopped the instance: [from, until); until = +inf while stopped.
    std::vector<std::pair<double, double>> stopped;
  };

  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Why the market has an instance stopped at hour t (/3 scenarios: scenario/bid_market.h), if
  // it does.
  using MarketStop = scenario::MarketStop;
  std::optional<MarketStop> market_stop_at(const SimInstance& inst, double t) const;
  // The hours the market kept it stopped, [from, to), from creation to before `until`.
  std::vector<std::pair<double, double>> market_stops(const SimInstance& inst, double until) const;
  double epoch_of(double h) const { return options_.epoch_at_zero_s + h * options_.epoch_s_per_h; }

  bool is_listed(std::size_t offer_index, double now_h) const;
  const SimInstance* find_live(std::int64_t id) const;
  SimInstance* find_live(std::int64_t id);
  double timeline_h(const SimInstance& inst, double scenario::RentalTimeline::*at) const;
  double boot_h(const SimInstance& inst) const;
  double exit_h(const SimInstance& inst) const;
  double offline_h(const SimInstance& inst) const;
  bool stopped_at(const SimInstance& inst, double t) const;
  std::string actual_status(const SimInstance& inst, double now_h) const;
  double billed_hours(const SimInstance& inst, double now_h) const;  // compute: running
  double storage_hours(const SimInstance& inst, double now_h) const;
  nlohmann::json instance_json(const SimInstance& inst, double now_h) const;

  Scenario scenario_;
  MarketSimOptions options_;
  std::unordered_map<std::int64_t, std::size_t> offer_index_by_id_;
  // Live renter of each offer (index as in scenario_.offers), if any.
  std::vector<std::optional<std::int64_t>> renter_of_offer_;
  std::map<std::int64_t, SimInstance> instances_;  // by id; destroyed ones stay for billing
  std::int64_t next_instance_id_;
};

}  // namespace pf::market_sim
