// proverfleet.toml: one file for every tunable; see proverfleet.example.toml.
// Strict: an unknown key or a wrong type is an error naming the key, so a typo never
// silently leaves a default in place.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "agent/param_manifest.h"
#include "core/acceptance.h"
#include "core/alerts.h"
#include "core/billing.h"
#include "core/hearing.h"
#include "core/http_limits.h"
#include "core/job_economics.h"
#include "core/job_hedge.h"
#include "core/lifecycle.h"
#include "core/policy.h"
#include "core/ranking.h"
#include "core/rental_terms.h"
#include "core/sprt_acceptance.h"
#include "manager/deploy_defaults.h"
#include "market/rate_limits.h"

namespace pf::cli {

struct MarketSettings {
  std::optional<std::string> vast_url;
  std::optional<std::string> key_file;
  // vast's per-endpoint rate limits the client paces its calls by (market/rate_limits.h):
  // "vast" (the documented table), "off", or ENDPOINT=SECONDS / ENDPOINT=CALLS/SECONDS entries.
  market::RateLimits rate_limits = market::vast_documented_rate_limits();
};

// What the manager puts into every rental and tells every agent.
struct DeploySettings {
  std::string image = manager::kDefaultImage;
  double disk_gb = core::kDefaultDiskGb;
  std::string onstart = manager::kDefaultOnstart;
  double heartbeat_s = 10;
  // The parameter files agents fetch: "builtin:NAME" (params/NAME.json, compiled in), a URL or
  // a file, in lotus' parameters.json shape or as an array of {name, url | cid, bytes, digest}
  // (agent/param_manifest.h). Empty: agents are handed no manifest.
  std::string params_manifest = agent::kDefaultParamsManifest;
  std::string params_gateway = agent::kDefaultParamsGateway;  // fetched as <gateway><cid>
  // The C1 file benchmark proofs prove: read once at start, served to agents at
  // GET /api/v1/agent/benchmark-input. Empty: agents get none (cuzk cannot benchmark).
  std::string benchmark_input;
  // Agent log kept per instance in the store (oldest lines dropped beyond it); survives restarts.
  int log_kib_per_instance = 256;
  // A destroyed instance's agent log, and its audit trail (events: the host page's evidence),
  // are removed this long after its destroy; 0 keeps them for ever.
  double log_retention_days = 30;
  double event_retention_days = 365;
};

// The manager's autopilot: runs core::decide() on the live fleet every interval.
struct AutopilotSettings {
  bool enabled = false;
  // Offers considered, in the `offers` query language; the CLI defaults (verified, rentable,
  // not rented, not external) are added.
  std::string query = "num_gpus>=1";
  double interval_s = 60;
  // A round searches again only when its last search is older (manager/autopilot.h).
  double offers_max_age_s = 15;
  double operator_destroy_cooldown_h = 24;  // machines the operator dropped are left alone
  core::PolicyConfig policy;  // caps; economics and setup come from their own sections
};

// The manager's HTTP front: what one client may hold and how long a request may take
// (core::HttpLimits), and the worker lanes that keep agents and operators from starving each
// other.
struct HttpSettings {
  core::HttpLimits limits;
  int agent_lane_threads = 4;
  int agent_lane_queue = 512;
  int operator_lane_threads = 4;
  int operator_lane_queue = 64;
};

// [gateway]: the cuzk-compatible gRPC endpoint Curio calls (serve --grpc-listen).
struct GatewaySettings {
  std::string listen = "127.0.0.1:9820";  // HOST:PORT; "" or "off": no gateway
  std::string tls_cert;                   // PEM files, both or neither
  std::string tls_key;
  // Replicas: PEM CA certificates a follower trusts for the leader's TLS gateway; "": the
  // replica's own tls_cert (replicas sharing one certificate).
  std::string tls_ca;
  std::vector<std::string> allow;  // client IPs / CIDR blocks; empty: any that reaches it
  // The Curio nodes that call this gateway and each one's [Cuzk] MaxPending: the gateway holds
  // curio_nodes × curio_max_pending open Prove calls (gateway/gateway_server.h).
  int curio_nodes = 1;
  int curio_max_pending = 10;
  int max_pending_window = 0;  // > 0: the open calls to size for instead of that product
  // The operator's own cuzk (HOST:PORT or unix:///path) for WindowPoSt, WinningPoSt and the
  // keep_local kinds; "": those are refused at once (gateway/local_cuzk.h).
  std::string local_cuzk;
  std::vector<std::string> keep_local;  // kinds besides PoSt: "porep-c2", "snap-update"
  // `CLIENT TOKEN` lines (mode 0600): callers that send `authorization: Bearer TOKEN` are that
  // client; calls without one are the "default" cluster (every Curio node).
  std::string client_tokens_file;
  bool require_client_token = false;
  // Replicas: a call a failover would fail is held this long, tried again, before UNAVAILABLE.
  double failover_hold_s = 120;
  // Every client connection is told to reconnect (HTTP/2 GOAWAY) after about this long: how
  // long a serve that handed over to a successor stays to shed its clients (gateway_server.h).
  double max_connection_age_s = 30;
};

// [jobs]: the gateway's job queue (jobs::JobQueueConfig, design §11).
struct JobsSettings {
  int max_input_mib = 256;              // larger inputs are refused (RESOURCE_EXHAUSTED)
  double default_deadline_min = 30;     // a client's ProveTimeout when it names none (Curio: 30)
  double lease_s = 60;                  // a lease no heartbeat renews returns to the queue
  int max_attempts = 3;                 // failed proofs before a job fails
  int strike_after_failures = 2;        // failed proofs in a row on one host → a strike
  int max_open_jobs = 10000;            // queued + running; beyond, submissions are refused
  double retention_h = 24;              // inputs and proofs kept after a job finished/delivered
  double timeline_retention_days = 90;  // job timelines kept this long; 0 = for ever
  std::string data_dir;                 // "" = the database file's directory
  // What a rented machine's proof must be before a client gets it (jobs/proof_check.h):
  // "groth16" (cuzk's proofs), "sim" (a fleet of sim provers: market-sim, the demo), "none".
  std::string proof_check = "groth16";
  // Hedged proving (core/job_hedge.h): hedge, hedge_overdue_factor, hedge_overdue_min_s,
  // hedge_silent_after_s.
  core::HedgeConfig hedging;
};

// [alerts]: the fleet watch (manager/fleet_watch.h): drift, slow downloads and stalls of every
// instance, spend against a budget, missed job deadlines; whether the manager acts on them.
struct AlertsSettings {
  double interval_s = 60;
  core::AlertConfig alerts;
};

// [webhooks]: signed JSON POSTs of the fleet's news (manager/webhooks.h). The shared secret is
// read by serve from $PROVERFLEET_WEBHOOK_SECRET, else from `secret_file` (first line; a file
// other users may read is refused); it is never a config value or a flag.
struct WebhooksSettings {
  std::vector<std::string> urls;  // http:// or https://; empty: no webhooks
  std::string secret_file;
  int max_attempts = 6;
  double retry_base_s = 2;
  double retry_max_s = 300;
  double timeout_s = 10;
  int queue_max = 1000;
};

// [replicas]: several `serve` processes on one database (core/leader_lease.h). One leads and
// runs the loops; a dead leader is replaced within lease_ttl_s × 4/3 (20 s at the default).
struct ReplicasSettings {
  double lease_ttl_s = 15;
};

struct AppConfig {
  core::RankConfig rank;  // predictor priors, economics, setup assumptions
  core::LifecycleConfig lifecycle;
  core::HearingConfig hearing;        // [lifecycle] too: when silence is not evidence
  core::AcceptanceConfig acceptance;  // caps: min/max samples, time, interval
  core::SprtConfig sprt;              // the sequential test's tuning ([acceptance] too)
  core::BidConfig bids;               // [bids]: interruptible rentals (core/rental_terms.h)
  DeploySettings deploy;
  MarketSettings market;
  AutopilotSettings autopilot;
  HttpSettings http;
  GatewaySettings gateway;
  JobsSettings jobs;
  AlertsSettings alerts;
  WebhooksSettings webhooks;
  ReplicasSettings replicas;
  // [prices]: what a delivered job earns per proof kind (porep-c2 defaults to
  // economics.revenue_per_proof_usd, the figure the autopilot scores with).
  core::PriceConfig prices;
  // Break-even means "a proof earns what it costs" (true) or "a proof costs the classic
  // target" (false): for benchmark verdicts and the autopilot's scoring alike.
  bool profit_objective = true;
  std::string source = "built-in defaults";  // which file was read, for messages
};

// What the default fleet policy runs with, from the config: one mapping that `serve` (manager and
// autopilot) and `sim` share, so the simulator measures what the manager would do.
struct FleetSettings {
  double disk_gb = core::kDefaultDiskGb;  // [deploy] disk_gb: what every rental pays storage for
  core::PolicyConfig policy;  // [autopilot] caps, scoring from [economics] / [setup] / [predictor]
  core::AcceptanceConfig acceptance;  // [acceptance] caps
  core::SprtConfig sprt;              // [acceptance] tuning with those caps applied
  core::LifecycleConfig lifecycle;    // [lifecycle], benchmark deadline sized for the caps
  bool profit_objective = true;       // [economics]: break-even against revenue or the target
  core::BidConfig bids;               // [bids]: on-demand or a bid per rental
  core::HedgeConfig hedging;          // [jobs] hedge*: what the job queue hedges
};
FleetSettings fleet_settings(const AppConfig& config);

// Environment variables by name.
using Environment = std::map<std::string, std::string>;
Environment process_environment();

// Reads `path` when given (must exist), else $PROVERFLEET_CONFIG, else ./proverfleet.toml if
// present, else built-in defaults. Then every PROVERFLEET_<SECTION>_<KEY> variable of the
// process environment overrides that key (e.g. PROVERFLEET_ACCEPTANCE_MIN_SAMPLES=8).
tl::expected<AppConfig, std::string> load_config(const std::optional<std::string>& path);

// Parses TOML text (name is used in error messages), with overrides from `env`.
tl::expected<AppConfig, std::string> parse_config(const std::string& text, const std::string& name,
                                                  const Environment& env = {});

}  // namespace pf::cli
