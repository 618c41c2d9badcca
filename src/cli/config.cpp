#include "cli/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/leader_lease.h"
#include "gateway/client_allow.h"
#include "gateway/listen_exposure.h"
#include "jobs/proof_check.h"
#include "util/bounded_json.h"

extern char** environ;

namespace pf::cli {
namespace {

struct ConfigError {
  std::string message;
};

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// The values a numeric key accepts. Every key has finite bounds: a NaN or infinite figure
// would poison every sum it enters (nlohmann then writes it as null), and an absurd one is a
// typo (a 1e12-second timeout, 2^31 instances).
struct Range {
  double min = 0;
  double max = 0;
  bool min_open = false;  // min itself is refused

  bool contains(double v) const { return (min_open ? v > min : v >= min) && v <= max; }
  std::string describe() const {
    if (min == 0 && max == 1) return min_open ? "between 0 and 1 (0 excluded)" : "between 0 and 1";
    return std::string(min_open ? "> " : ">= ") + format_number(min) +
           " and <= " + format_number(max);
  }
};

constexpr Range kFractionRange{0, 1};
constexpr Range positive_up_to(double max) {
  return Range{0, max, true};
}
constexpr Range non_negative_up_to(double max) {
  return Range{0, max};
}
constexpr double kMaxUsd = 1e6;                    // per proof or per hour
constexpr double kMaxBudgetUsd = 1e9;              // totals
constexpr double kMaxSeconds = 365.0 * 24 * 3600;  // any timeout or interval
constexpr double kMaxHours = 10 * 365.0 * 24;      // lifetimes, TTLs, cool-downs
constexpr double kMaxJobInputMb = 65536;           // 64 GB: above any proof input the gateway takes
constexpr double kMaxMbps = 1e6;                   // 1 Tbit/s
constexpr double kMaxFactor = 1000;                // slacks, multipliers, standard deviations
constexpr int kMaxCount = 10'000;                  // samples, instances, crashes
constexpr std::size_t kMaxConfigBytes = 1u << 20;
constexpr std::size_t kMaxAllowEntries = 1024;
constexpr int kMaxPendingWindow = 10'000;

// Sections whose keys may be overridden by PROVERFLEET_<SECTION>_<KEY> variables.
const char* const kSections[] = {
    "economics", "setup", "predictor", "market", "lifecycle", "acceptance", "bids",     "deploy",
    "autopilot", "http",  "gateway",   "jobs",   "prices",    "alerts",     "webhooks", "replicas"};

std::string env_name(const std::string& path, const char* key) {
  std::string name = "PROVERFLEET_" + path + "_" + key;
  for (auto& c : name)
    c = c == '.' || c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// The PROVERFLEET_<SECTION>_* variables of `env`: each must name a key, so a misspelt
// variable is reported instead of silently leaving a default in place.
class EnvOverrides {
 public:
  explicit EnvOverrides(const Environment& env) {
    for (const auto& [name, value] : env) {
      for (const char* section : kSections) {
        std::string prefix = "PROVERFLEET_" + std::string(section) + "_";
        for (auto& c : prefix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (name.rfind(prefix, 0) == 0) unclaimed_[name] = value;
      }
    }
  }
  // The value of the variable for path.key, if set (and marks it as used).
  std::optional<std::string> take(const std::string& path, const char* key) {
    auto it = unclaimed_.find(env_name(path, key));
    if (it == unclaimed_.end()) return std::nullopt;
    std::string value = it->second;
    claimed_.insert(it->first);
    return value;
  }
  void finish() const {
    for (const auto& [name, value] : unclaimed_) {
      if (!claimed_.count(name)) {
        throw ConfigError{"unknown setting in the environment: " + name +
                          " (PROVERFLEET_<SECTION>_<KEY> must name a key of " +
                          "proverfleet.example.toml)"};
      }
    }
  }

 private:
  std::map<std::string, std::string> unclaimed_;
  std::set<std::string> claimed_;
};

// Reads one table, remembering which keys were consumed so leftovers can be reported.
class TableReader {
 public:
  TableReader(const toml::table* table, std::string path, EnvOverrides* env = nullptr)
      : table_(table), path_(std::move(path)), env_(env) {}

  // A numeric key within `range`; NaN, infinity and values outside are refused naming the key
  // (and the variable, for an environment override). The value is left alone when unset.
  void number(const char* key, double& out, const Range& range) {
    const toml::node* n = get(key);
    const std::optional<std::string> text = from_env(key);
    double v = 0;
    if (text) {
      v = env_number(key, *text);
    } else if (!n) {
      return;
    } else if (auto parsed = n->value<double>()) {
      v = *parsed;
    } else {
      fail(key, "a number");
    }
    if (!std::isfinite(v) || !range.contains(v)) {
      throw ConfigError{origin(key, text.has_value()) + " must be a finite number " +
                        range.describe() + ", got " + format_number(v)};
    }
    out = v;
  }
  // A count: a whole number within [min, max].
  void count(const char* key, int& out, int min, int max) {
    double v = out;
    number(key, v, Range{static_cast<double>(min), static_cast<double>(max)});
    if (std::floor(v) != v) {
      throw ConfigError{where(key) + " must be a whole number, got " + format_number(v)};
    }
    out = static_cast<int>(v);
  }
  void fraction(const char* key, double& out) { number(key, out, kFractionRange); }
  void string(const char* key, std::string& out) {
    const toml::node* n = get(key);
    if (auto text = from_env(key)) {
      out = *text;
      return;
    }
    if (!n) return;
    if (auto v = n->value<std::string>()) {
      out = *v;
      return;
    }
    fail(key, "a string");
  }
  void optional_string(const char* key, std::optional<std::string>& out) {
    std::string s;
    const bool in_env = env_ && env_->take(path_, key).has_value();
    if (!in_env && (!table_ || !table_->contains(key))) return;
    string(key, s);
    out = s;
  }
  void boolean(const char* key, bool& out) {
    const toml::node* n = get(key);
    if (auto text = from_env(key)) {
      if (*text == "true" || *text == "1" || *text == "yes") {
        out = true;
      } else if (*text == "false" || *text == "0" || *text == "no") {
        out = false;
      } else {
        throw ConfigError{env_name(path_, key) + " (" + where(key) +
                          ") must be true or false, got '" + *text + "'"};
      }
      return;
    }
    if (!n) return;
    if (auto v = n->value<bool>()) {
      out = *v;
      return;
    }
    fail(key, "true or false");
  }
  void optional_number(const char* key, std::optional<double>& out, const Range& range) {
    const bool in_env = env_ && env_->take(path_, key).has_value();
    if (!in_env && (!table_ || !table_->contains(key))) return;
    double v = range.min_open ? range.max : range.min;
    number(key, v, range);
    out = v;
  }
  // An array of at most `max_items` strings of at most `max_bytes` each; in the environment,
  // comma-separated.
  void string_list(const char* key, std::vector<std::string>& out, std::size_t max_items,
                   std::size_t max_bytes) {
    const toml::node* n = get(key);
    std::vector<std::string> items;
    const std::optional<std::string> text = from_env(key);
    if (text) {
      std::istringstream parts(*text);
      std::string item;
      while (std::getline(parts, item, ',')) {
        const auto first = item.find_first_not_of(' ');
        if (first == std::string::npos) continue;
        items.push_back(item.substr(first, item.find_last_not_of(' ') - first + 1));
      }
    } else if (!n) {
      return;
    } else if (const toml::array* array = n->as_array()) {
      for (const auto& element : *array) {
        const auto value = element.value<std::string>();
        if (!value) fail(key, "an array of strings");
        items.push_back(*value);
      }
    } else {
      fail(key, "an array of strings");
    }
    if (items.size() > max_items) {
      throw ConfigError{origin(key, text.has_value()) + " holds at most " +
                        std::to_string(max_items) + " entries, got " +
                        std::to_string(items.size())};
    }
    for (const auto& item : items) {
      if (item.size() > max_bytes) {
        throw ConfigError{origin(key, text.has_value()) + ": an entry is longer than " +
                          std::to_string(max_bytes) + " bytes"};
      }
    }
    out = std::move(items);
  }
  const toml::node* raw(const char* key) { return get(key); }

  // Every key not read is a typo or an unsupported setting: say which.
  void finish() const {
    if (!table_) return;
    for (const auto& [k, v] : *table_) {
      if (!seen_.count(std::string(k.str()))) {
        throw ConfigError{"unknown key '" + prefix() + std::string(k.str()) + "'"};
      }
    }
  }

 private:
  const toml::node* get(const char* key) {
    seen_.insert(key);
    if (!table_) return nullptr;
    return table_->get(key);
  }
  std::optional<std::string> from_env(const char* key) {
    if (!env_ || path_.empty()) return std::nullopt;
    return env_->take(path_, key);
  }
  double env_number(const char* key, const std::string& text) const {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size()) {
      throw ConfigError{env_name(path_, key) + " (" + where(key) + ") must be a number, got '" +
                        text + "'"};
    }
    return v;
  }
  std::string prefix() const { return path_.empty() ? "" : path_ + "."; }
  std::string where(const char* key) const { return "'" + prefix() + key + "'"; }
  std::string origin(const char* key, bool from_environment) const {
    return from_environment ? env_name(path_, key) + " (" + where(key) + ")" : where(key);
  }
  [[noreturn]] void fail(const char* key, const char* expected) const {
    throw ConfigError{where(key) + " must be " + expected};
  }

  const toml::table* table_;
  std::string path_;
  EnvOverrides* env_;
  std::set<std::string> seen_;
};

// toml++ caps nested values (arrays, inline tables) itself, but builds dotted keys and table
// headers of any depth, and its tables are destroyed recursively: `a.b.b.b... = 1` 100,000
// levels deep crashes it. So the keys' depth is checked on the text first. A scan, not a
// parser: strings and comments are skipped, and only text in key position is counted.
constexpr int kMaxTomlKeyDepth = 32;

std::optional<std::string> toml_key_too_deep(std::string_view text) {
  std::vector<char> open;  // unclosed '[' (array) and '{' (inline table) in values
  bool in_key = true;      // at a line's start, in a header, or after '{' / ',' of a table
  int dots = 0;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      if (open.empty()) {
        in_key = true;
        dots = 0;
      }
    } else if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      const bool basic = c == '"';
      const bool multiline = text.substr(i, 3) == std::string(3, c);
      std::size_t j = i + (multiline ? 3 : 1);
      for (; j < text.size(); ++j) {
        if (basic && text[j] == '\\') {
          ++j;
        } else if (text[j] == '\n') {
          if (!multiline) break;
          ++line;
        } else if (text[j] == c && (!multiline || text.substr(j, 3) == std::string(3, c))) {
          break;
        }
      }
      i = multiline ? j + 2 : j;
    } else if (in_key) {
      if (c == '.' && ++dots > kMaxTomlKeyDepth) {
        return std::to_string(line) + ": key nested deeper than " +
               std::to_string(kMaxTomlKeyDepth) + " levels";
      }
      if (c == '=' || c == ']' || c == '}') {
        in_key = false;
        dots = 0;
        if (c == '}' && !open.empty()) open.pop_back();
      }
    } else if (c == '[' || c == '{') {
      open.push_back(c);
      in_key = c == '{';
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ',' && !open.empty() && open.back() == '{') {
      in_key = true;
    }
  }
  return std::nullopt;
}

const toml::table* subtable(const toml::table& root, const char* key) {
  const toml::node* n = root.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) throw ConfigError{"'" + std::string(key) + "' must be a table"};
  return n->as_table();
}

void read_priors(const toml::node* node, core::PredictorConfig& pred) {
  if (!node) return;
  const toml::array* arr = node->as_array();
  if (!arr) throw ConfigError{"'predictor.prior' must be an array of tables ([[predictor.prior]])"};
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const toml::table* t = (*arr)[i].as_table();
    std::string path = "predictor.prior[" + std::to_string(i) + "]";
    if (!t) throw ConfigError{"'" + path + "' must be a table"};
    TableReader r(t, path);
    core::GpuPrior prior;
    prior.basis = "operator config";
    r.string("gpu_name", prior.gpu_name);
    r.number("rate_per_gpu", prior.rate_per_gpu, positive_up_to(1e6));
    r.fraction("band", prior.band);
    r.string("basis", prior.basis);
    r.finish();
    if (prior.gpu_name.empty()) throw ConfigError{"'" + path + ".gpu_name' is required"};
    if (prior.rate_per_gpu <= 0) throw ConfigError{"'" + path + ".rate_per_gpu' is required"};
    // An operator's prior replaces the built-in one of the same model.
    bool replaced = false;
    for (auto& existing : pred.priors) {
      if (core::find_prior(pred, prior.gpu_name) == &existing) {
        existing = prior;
        replaced = true;
      }
    }
    if (!replaced) pred.priors.push_back(prior);
  }
}

// [prices]: one key per proof kind ("porep-c2" = 0.05), in `currency` (usd, or fil converted
// at fil_usd). porep-c2 left out in USD is [economics] revenue_per_proof_usd, so revenue and the
// autopilot's scoring agree unless the operator says otherwise; other kinds left out earn
// nothing (the jobs view counts them as unpriced).
void read_prices(TableReader prices, double revenue_per_proof_usd, core::PriceConfig& out) {
  std::string currency = core::to_string(out.currency);
  prices.string("currency", currency);
  const auto parsed = core::parse_price_currency(currency);
  if (!parsed) throw ConfigError{"'prices.currency' must be usd or fil, got '" + currency + "'"};
  out.currency = *parsed;
  std::optional<double> fil_usd;
  prices.optional_number("fil_usd", fil_usd, positive_up_to(kMaxUsd));
  for (const auto kind : core::kAllJobKinds) {
    std::optional<double> price;
    prices.optional_number(core::to_string(kind), price, non_negative_up_to(kMaxUsd));
    if (price) out.per_proof[kind] = *price;
  }
  prices.finish();
  if (out.currency == core::PriceCurrency::Fil) {
    if (!fil_usd) throw ConfigError{"'prices.fil_usd' is required when prices.currency is fil"};
    out.fil_usd = *fil_usd;
  } else if (fil_usd) {
    out.fil_usd = *fil_usd;  // kept for display; USD prices do not use it
  }
  if (out.currency == core::PriceCurrency::Usd && !out.per_proof.count(core::JobKind::PorepC2)) {
    out.per_proof[core::JobKind::PorepC2] = revenue_per_proof_usd;
  }
}

void read_alerts_and_webhooks(const toml::table& root, EnvOverrides& env, AppConfig& cfg) {
  auto& al = cfg.alerts;
  TableReader alerts(subtable(root, "alerts"), "alerts", &env);
  alerts.number("interval_s", al.interval_s, Range{1, 86400});
  alerts.boolean("act_on_hand_deployed", al.alerts.act_on_hand_deployed);
  alerts.boolean("act_on_autopilot_rented", al.alerts.act_on_autopilot_rented);
  alerts.number("stall_factor", al.alerts.stall.factor, Range{1, kMaxFactor});
  double stall_min = al.alerts.stall.min_s / 60;
  alerts.number("stall_min_minutes", stall_min, Range{1, 7 * 24 * 60});
  al.alerts.stall.min_s = stall_min * 60;
  alerts.number("budget_dollars_per_hour", al.alerts.budget_dollars_per_hour,
                non_negative_up_to(kMaxUsd));
  alerts.number("budget_usd", al.alerts.budget_usd, non_negative_up_to(kMaxBudgetUsd));
  alerts.finish();

  auto& wh = cfg.webhooks;
  TableReader hooks(subtable(root, "webhooks"), "webhooks", &env);
  hooks.string_list("urls", wh.urls, 16, 2048);
  hooks.string("secret_file", wh.secret_file);
  hooks.count("max_attempts", wh.max_attempts, 1, 100);
  hooks.number("retry_base_s", wh.retry_base_s, Range{0.1, 3600});
  hooks.number("retry_max_s", wh.retry_max_s, Range{0.1, 86400});
  hooks.number("timeout_s", wh.timeout_s, Range{1, 300});
  hooks.count("queue_max", wh.queue_max, 1, 1'000'000);
  hooks.finish();
  for (const auto& url : wh.urls) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      throw ConfigError{"'webhooks.urls': each must start with http:// or https://, got \"" +
                        url.substr(0, 100) + "\""};
    }
  }
}

AppConfig from_table(const toml::table& root, EnvOverrides& env) {
  AppConfig cfg;
  cfg.rank.predictor = core::default_predictor_config();
  TableReader top(&root, "");
  top.raw("economics");
  top.raw("setup");
  top.raw("predictor");
  top.raw("market");
  top.raw("lifecycle");
  top.raw("acceptance");
  top.raw("bids");
  top.raw("deploy");
  top.raw("autopilot");
  top.raw("http");
  top.raw("gateway");
  top.raw("prices");
  top.raw("jobs");
  top.raw("alerts");
  top.raw("webhooks");
  top.raw("replicas");
  top.finish();

  TableReader econ(subtable(root, "economics"), "economics", &env);
  econ.number("revenue_per_proof_usd", cfg.rank.economics.revenue_per_proof_usd,
              positive_up_to(kMaxUsd));
  econ.number("target_cost_per_proof_usd", cfg.rank.economics.target_cost_per_proof_usd,
              positive_up_to(kMaxUsd));
  econ.boolean("profit_objective", cfg.profit_objective);
  double job_input_mb = cfg.rank.economics.job_input_bytes / 1e6;
  econ.number("job_input_mb", job_input_mb, non_negative_up_to(kMaxJobInputMb));
  cfg.rank.economics.job_input_bytes = job_input_mb * 1e6;
  econ.finish();
  read_prices(TableReader(subtable(root, "prices"), "prices", &env),
              cfg.rank.economics.revenue_per_proof_usd, cfg.prices);

  auto& s = cfg.rank.setup;
  TableReader setup(subtable(root, "setup"), "setup", &env);
  setup.number("boot_h", s.boot_h, non_negative_up_to(kMaxHours));
  setup.number("params_bytes", s.params_bytes, positive_up_to(1e15));
  setup.number("download_speed_fraction", s.download_speed_fraction, positive_up_to(1));
  setup.number("unknown_download_mbps", s.unknown_download_mbps, positive_up_to(kMaxMbps));
  setup.number("warmup_h", s.warmup_h, non_negative_up_to(kMaxHours));
  int benchmark_proofs = static_cast<int>(s.benchmark_proofs);
  setup.count("benchmark_proofs", benchmark_proofs, 1, kMaxCount);  // 0 never reaches a verdict
  s.benchmark_proofs = benchmark_proofs;
  setup.number("expected_lifetime_h", s.expected_lifetime_h, positive_up_to(kMaxHours));
  setup.number("slow_download_h", s.slow_download_h, non_negative_up_to(kMaxHours));
  setup.finish();

  auto& p = cfg.rank.predictor;
  TableReader pred(subtable(root, "predictor"), "predictor", &env);
  pred.number("multi_gpu_exponent", p.multi_gpu_exponent, positive_up_to(10));
  pred.number("cores_per_gpu_full", p.cores_per_gpu_full, positive_up_to(4096));
  pred.number("pcie_slow_gbs_per_gpu", p.pcie_slow_gbs_per_gpu, non_negative_up_to(1e4));
  pred.fraction("pcie_slow_factor", p.pcie_slow_factor);
  pred.fraction("band_per_data_flag", p.band_per_data_flag);
  pred.number("unknown_rate_per_gpu", p.unknown_gpu.rate_per_gpu, positive_up_to(1e6));
  pred.fraction("unknown_band", p.unknown_gpu.band);
  read_priors(pred.raw("prior"), p);
  pred.finish();

  auto& l = cfg.lifecycle;
  TableReader life(subtable(root, "lifecycle"), "lifecycle", &env);
  const Range duration = positive_up_to(kMaxSeconds);
  life.number("renting_max_s", l.renting_max_s, duration);
  life.number("boot_loading_max_s", l.boot_loading_max_s, duration);
  life.number("boot_register_grace_s", l.boot_register_grace_s, duration);
  life.number("registered_max_s", l.registered_max_s, duration);
  life.number("params_speed_fraction", l.params_speed_fraction, positive_up_to(1));
  life.number("params_slack", l.params_slack, positive_up_to(kMaxFactor));
  life.number("params_min_s", l.params_min_s, duration);
  life.number("params_max_s", l.params_max_s, duration);
  life.number("params_unknown_mbps", l.params_unknown_mbps, positive_up_to(kMaxMbps));
  life.number("warmup_max_s", l.warmup_max_s, duration);
  life.number("bench_slack", l.bench_slack, positive_up_to(kMaxFactor));
  life.number("bench_min_s", l.bench_min_s, duration);
  life.number("bench_max_s", l.bench_max_s, duration);
  life.number("heartbeat_timeout_s", l.heartbeat_timeout_s, duration);
  life.number("market_unknown_grace_s", l.market_unknown_grace_s, duration);
  life.number("market_stopped_grace_s", l.market_stopped_grace_s, duration);
  life.number("bid_stopped_grace_s", l.bid_stopped_grace_s, duration);
  // 0 would retry a failing destroy on every tick, hammering the market.
  life.number("destroy_retry_s", l.destroy_retry_s, duration);
  life.count("max_prover_crashes", l.max_prover_crashes, 1, kMaxCount);
  life.number("silent_fleet_fraction", cfg.hearing.silent_fleet_fraction, positive_up_to(1));
  life.count("silent_fleet_min_agents", cfg.hearing.silent_fleet_min_agents, 1, kMaxCount);
  life.finish();
  if (l.params_min_s > l.params_max_s) {
    throw ConfigError{"'lifecycle.params_min_s' must not exceed 'lifecycle.params_max_s'"};
  }
  if (l.bench_min_s > l.bench_max_s) {
    throw ConfigError{"'lifecycle.bench_min_s' must not exceed 'lifecycle.bench_max_s'"};
  }

  auto& a = cfg.acceptance;
  TableReader acc(subtable(root, "acceptance"), "acceptance", &env);
  acc.count("min_samples", a.min_samples, 1, kMaxCount);
  acc.count("max_samples", a.max_samples, 1, kMaxCount);
  acc.number("max_seconds", a.max_seconds, duration);
  acc.number("z", a.z, positive_up_to(100));
  auto& t = cfg.sprt;
  acc.fraction("alpha", t.alpha);
  acc.fraction("beta", t.beta);
  acc.fraction("accept_margin", t.accept_margin);
  acc.fraction("reject_margin", t.reject_margin);
  acc.number("prior_cv", t.prior_cv, positive_up_to(10));
  acc.number("prior_weight", t.prior_weight, non_negative_up_to(kMaxCount));
  acc.count("max_warmup_discard", t.max_warmup_discard, 0, kMaxCount);
  acc.number("warmup_outlier_sd", t.warmup_outlier_sd, positive_up_to(kMaxFactor));
  acc.number("trend_sd", t.trend_sd, positive_up_to(kMaxFactor));
  acc.number("stall_factor", t.stall_factor, positive_up_to(kMaxFactor));
  acc.fraction("cap_accept_margin", t.cap_accept_margin);
  acc.finish();
  if (t.alpha <= 0 || t.beta <= 0 || t.alpha >= 0.5 || t.beta >= 0.5) {
    throw ConfigError{"'acceptance.alpha' and 'acceptance.beta' must be in (0, 0.5)"};
  }
  if (a.min_samples > a.max_samples) {
    throw ConfigError{"'acceptance.min_samples' must not exceed 'acceptance.max_samples'"};
  }
  // The lifecycle's benchmark deadline is sized for the acceptance test's sample cap.
  l.bench_max_samples = a.max_samples;

  auto& b = cfg.bids;
  TableReader bids(subtable(root, "bids"), "bids", &env);
  bids.boolean("enabled", b.enabled);
  bids.number("margin_over_min_bid", b.margin_over_min_bid, non_negative_up_to(10));
  bids.number("max_share_of_on_demand", b.max_share_of_on_demand, positive_up_to(1));
  bids.number("prior_preemptions_per_hour", b.prior_preemptions_per_hour, non_negative_up_to(100));
  bids.number("prior_weight_h", b.prior_weight_h, non_negative_up_to(1e5));
  bids.number("stop_h", b.stop_h, non_negative_up_to(1e4));
  bids.number("restart_h", b.restart_h, non_negative_up_to(100));
  bids.fraction("max_preemption_per_proof", b.max_preemption_per_proof);
  bids.number("host_avoid_preemptions_per_hour", b.host_avoid_preemptions_per_hour,
              positive_up_to(1000));
  bids.number("host_min_evidence_h", b.host_min_evidence_h, non_negative_up_to(1e5));
  bids.number("outbid_memory_h", b.outbid_memory_h, non_negative_up_to(1e4));
  bids.number("raise_stopped_after_s", b.raise_stopped_after_s, non_negative_up_to(7 * 86400));
  bids.number("lower_raised_after_h", b.lower_raised_after_h, non_negative_up_to(1e4));
  bids.finish();

  auto& d = cfg.deploy;
  TableReader dep(subtable(root, "deploy"), "deploy", &env);
  dep.string("image", d.image);
  dep.number("disk_gb", d.disk_gb, positive_up_to(1e6));
  dep.string("onstart", d.onstart);
  dep.number("heartbeat_s", d.heartbeat_s, Range{0.1, 3600});
  dep.string("params_manifest", d.params_manifest);
  dep.count("log_kib_per_instance", d.log_kib_per_instance, 1, 64 * 1024);
  dep.number("log_retention_days", d.log_retention_days, Range{0, kMaxHours / 24});
  dep.number("event_retention_days", d.event_retention_days, Range{0, kMaxHours / 24});
  dep.string("params_gateway", d.params_gateway);
  dep.string("benchmark_input", d.benchmark_input);
  dep.finish();
  if (d.image.empty()) throw ConfigError{"'deploy.image' must not be empty"};

  TableReader market(subtable(root, "market"), "market", &env);
  market.optional_string("vast_url", cfg.market.vast_url);
  market.optional_string("key_file", cfg.market.key_file);
  std::optional<std::string> rate_limits;
  market.optional_string("rate_limits", rate_limits);
  market.finish();
  if (rate_limits) {
    auto parsed = market::parse_rate_limits(*rate_limits);
    if (!parsed) throw ConfigError{"'market.rate_limits': " + parsed.error()};
    cfg.market.rate_limits = *parsed;
  }

  auto& h = cfg.http;
  TableReader http(subtable(root, "http"), "http", &env);
  const auto millis = [&http](const char* key, std::chrono::milliseconds& out, double max_s) {
    double seconds = static_cast<double>(out.count()) / 1000;
    http.number(key, seconds, Range{0.1, max_s});
    out = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  };
  const auto size = [&http](const char* key, std::size_t& out, int min, int max) {
    int value = static_cast<int>(out);
    http.count(key, value, min, max);
    out = static_cast<std::size_t>(value);
  };
  size("max_connections", h.limits.max_connections, 1, 1'000'000);
  size("max_connections_per_address", h.limits.max_connections_per_address, 1, 1'000'000);
  millis("head_timeout_s", h.limits.head_timeout, 3600);
  millis("body_timeout_s", h.limits.body_timeout, 3600);
  millis("write_timeout_s", h.limits.write_timeout, 3600);
  millis("keep_alive_timeout_s", h.limits.keep_alive_timeout, 3600);
  int min_kib = static_cast<int>(h.limits.min_transfer_bytes_per_s / 1024);
  http.count("min_transfer_kib_s", min_kib, 1, 1'000'000);
  h.limits.min_transfer_bytes_per_s = static_cast<std::size_t>(min_kib) * 1024;
  http.count("agent_lane_threads", h.agent_lane_threads, 1, 256);
  http.count("agent_lane_queue", h.agent_lane_queue, 1, 1'000'000);
  http.count("operator_lane_threads", h.operator_lane_threads, 1, 256);
  http.count("operator_lane_queue", h.operator_lane_queue, 1, 1'000'000);
  http.finish();
  if (h.limits.max_connections_per_address > h.limits.max_connections) {
    throw ConfigError{"'http.max_connections_per_address' must not exceed 'http.max_connections'"};
  }

  auto& g = cfg.gateway;
  TableReader gateway(subtable(root, "gateway"), "gateway", &env);
  gateway.string("listen", g.listen);
  gateway.string("tls_cert", g.tls_cert);
  gateway.string("tls_key", g.tls_key);
  gateway.string("tls_ca", g.tls_ca);
  gateway.string_list("allow", g.allow, kMaxAllowEntries, 64);
  gateway.count("curio_nodes", g.curio_nodes, 1, 1000);
  gateway.count("curio_max_pending", g.curio_max_pending, 1, kMaxPendingWindow);
  gateway.count("max_pending_window", g.max_pending_window, 0, kMaxPendingWindow);
  gateway.string("local_cuzk", g.local_cuzk);
  gateway.string_list("keep_local", g.keep_local, 4, 32);
  gateway.string("client_tokens_file", g.client_tokens_file);
  gateway.boolean("require_client_token", g.require_client_token);
  gateway.number("failover_hold_s", g.failover_hold_s, Range{0, 3600});
  gateway.number("max_connection_age_s", g.max_connection_age_s, Range{1, 3600});
  gateway.finish();
  if (!g.local_cuzk.empty()) {
    if (auto ok = gateway::check_local_cuzk_address(g.local_cuzk); !ok) {
      throw ConfigError{"'gateway.local_cuzk': " + ok.error()};
    }
  }
  for (const auto& kind : g.keep_local) {
    const auto parsed = core::parse_job_kind(kind);
    if (!parsed) {
      throw ConfigError{"'gateway.keep_local': \"" + kind.substr(0, 32) +
                        "\" is not a proof kind (porep-c2, snap-update, window-post, "
                        "winning-post)"};
    }
  }
  if (g.require_client_token && g.client_tokens_file.empty()) {
    throw ConfigError{
        "'gateway.require_client_token' needs 'gateway.client_tokens_file' (no client could "
        "call otherwise)"};
  }
  if (g.listen != "" && g.listen != "off" && !gateway::listen_host(g.listen)) {
    throw ConfigError{
        "'gateway.listen' must be HOST:PORT (e.g. 127.0.0.1:9820), \"\" or \"off\", "
        "got \"" +
        g.listen.substr(0, 100) + "\""};
  }
  if (g.tls_cert.empty() != g.tls_key.empty()) {
    throw ConfigError{"'gateway.tls_cert' and 'gateway.tls_key' go together: give both or neither"};
  }
  if (!g.tls_ca.empty() && g.tls_cert.empty()) {
    throw ConfigError{
        "'gateway.tls_ca' (what replicas trust for each other's TLS gateway) needs "
        "'gateway.tls_cert' and 'gateway.tls_key'"};
  }
  if (auto allow = gateway::parse_allow_list(g.allow); !allow) {
    throw ConfigError{"'gateway.allow': " + allow.error()};
  }

  auto& j = cfg.jobs;
  TableReader jobs(subtable(root, "jobs"), "jobs", &env);
  // gRPC caps one message below 2 GiB; the request envelope needs a few MiB beside the input.
  jobs.count("max_input_mib", j.max_input_mib, 1, 2000);
  jobs.number("default_deadline_min", j.default_deadline_min, Range{1, 7 * 24 * 60});
  jobs.number("lease_s", j.lease_s, Range{5, 3600});
  jobs.count("max_attempts", j.max_attempts, 1, 100);
  jobs.count("strike_after_failures", j.strike_after_failures, 1, 100);
  jobs.count("max_open_jobs", j.max_open_jobs, 1, 1'000'000);
  jobs.number("retention_h", j.retention_h, Range{0, kMaxHours});
  jobs.number("timeline_retention_days", j.timeline_retention_days, Range{0, kMaxHours / 24});
  jobs.string("data_dir", j.data_dir);
  jobs.string("proof_check", j.proof_check);
  jobs.boolean("hedge", j.hedging.enabled);
  jobs.number("hedge_overdue_factor", j.hedging.overdue_factor, Range{1, 100});
  jobs.number("hedge_overdue_min_s", j.hedging.overdue_min_s, Range{0, 24 * 3600});
  jobs.number("hedge_silent_after_s", j.hedging.silent_after_s, Range{1, 3600});
  jobs.finish();
  if (!jobs::parse_proof_check(j.proof_check)) {
    throw ConfigError{"'jobs.proof_check' must be \"groth16\", \"sim\" or \"none\", got \"" +
                      j.proof_check.substr(0, 32) + "\""};
  }

  read_alerts_and_webhooks(root, env, cfg);

  TableReader replicas(subtable(root, "replicas"), "replicas", &env);
  replicas.number("lease_ttl_s", cfg.replicas.lease_ttl_s,
                  Range{core::kMinLeaseTtlS, core::kMaxLeaseTtlS});
  replicas.finish();

  auto& ap = cfg.autopilot;
  auto& pol = ap.policy;
  TableReader pilot(subtable(root, "autopilot"), "autopilot", &env);
  pilot.boolean("enabled", ap.enabled);
  pilot.string("query", ap.query);
  pilot.number("interval_s", ap.interval_s, Range{0.1, 86400});
  pilot.number("offers_max_age_s", ap.offers_max_age_s, Range{0, 3600});
  pilot.number("operator_destroy_cooldown_h", ap.operator_destroy_cooldown_h,
               non_negative_up_to(kMaxHours));
  pilot.number("max_dollars_per_hour", pol.max_dollars_per_hour, positive_up_to(kMaxUsd));
  pilot.count("max_instances", pol.max_instances, 1, kMaxCount);
  pilot.count("max_concurrent_benchmarks", pol.max_concurrent_benchmarks, 1, kMaxCount);
  pilot.count("max_rents_per_decision", pol.max_rents_per_decision, 1, kMaxCount);
  // Left out: no limit.
  pilot.optional_number("demand_proofs_per_hour", pol.demand_proofs_per_hour, positive_up_to(1e9));
  pilot.number("exploration_budget_usd", pol.exploration_budget_usd,
               non_negative_up_to(kMaxBudgetUsd));
  double window_h = pol.exploration_window_s / 3600;
  pilot.number("exploration_window_h", window_h, positive_up_to(kMaxHours));
  pol.exploration_window_s = window_h * 3600;
  pilot.number("min_value_usd", pol.min_value_usd, Range{-kMaxBudgetUsd, kMaxBudgetUsd});
  pilot.boolean("allow_shared_machines", pol.allow_shared_machines);
  double ttl_h = pol.blocklist.base_ttl_s / 3600;
  pilot.number("block_base_ttl_h", ttl_h, positive_up_to(kMaxHours));
  pol.blocklist.base_ttl_s = ttl_h * 3600;
  pilot.fraction("block_max_pool_share", pol.blocklist.max_pool_share);
  pilot.finish();
  // One source of truth for money and setup: the policy scores with the same figures the
  // ranking shows.
  pol.scoring.economics = cfg.rank.economics;
  pol.scoring.profit_objective = cfg.profit_objective;
  cfg.rank.profit_objective = cfg.profit_objective;  // the offers table's break-even
  pol.scoring.setup = cfg.rank.setup;
  pol.predictor.base = cfg.rank.predictor;
  env.finish();
  return cfg;
}

}  // namespace

Environment process_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

FleetSettings fleet_settings(const AppConfig& config) {
  FleetSettings s;
  s.disk_gb = config.deploy.disk_gb;
  s.policy = config.autopilot.policy;  // scoring already follows [economics], [setup], [predictor]
  s.acceptance = config.acceptance;
  s.sprt = core::with_caps(config.sprt, config.acceptance);
  s.lifecycle = config.lifecycle;
  s.lifecycle.bench_max_samples = config.acceptance.max_samples;
  s.profit_objective = config.profit_objective;
  s.policy.scoring.profit_objective = config.profit_objective;
  s.policy.operator_cooldown_s = config.autopilot.operator_destroy_cooldown_h * 3600;
  s.bids = config.bids;
  s.hedging = config.jobs.hedging;
  return s;
}

tl::expected<AppConfig, std::string> parse_config(const std::string& text, const std::string& name,
                                                  const Environment& environment) {
  if (auto deep = toml_key_too_deep(text)) return tl::unexpected(name + ":" + *deep);
  try {
    toml::table root = toml::parse(text, name);
    EnvOverrides env(environment);
    AppConfig cfg = from_table(root, env);
    cfg.source = name;
    return cfg;
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
        << e.description();
    return tl::unexpected(msg.str());
  } catch (const ConfigError& e) {
    return tl::unexpected(name + ": " + e.message);
  }
}

tl::expected<AppConfig, std::string> load_config(const std::optional<std::string>& path) {
  std::string chosen;
  if (path) {
    chosen = *path;
  } else if (const char* env = std::getenv("PROVERFLEET_CONFIG"); env && *env) {
    chosen = env;
  } else if (std::filesystem::exists("proverfleet.toml")) {
    chosen = "proverfleet.toml";
  } else {
    return parse_config("", "built-in defaults", process_environment());
  }
  // A path that was asked for must be a readable file: a directory reads as empty text, which
  // would silently run on the defaults.
  auto text = util::read_bounded_file(chosen, kMaxConfigBytes);
  if (!text) return tl::unexpected("cannot read config file '" + chosen + "': " + text.error());
  return parse_config(*text, chosen, process_environment());
}

}  // namespace pf::cli
