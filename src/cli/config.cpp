#include "cli/config.h"

#include <toml++/toml.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

extern char** environ;

namespace pf::cli {
namespace {

struct ConfigError {
  std::string message;
};

// Sections whose keys may be overridden by PROVERFLEET_<SECTION>_<KEY> variables.
const char* const kSections[] = {"economics", "setup",      "predictor", "market",
                                 "lifecycle", "acceptance", "deploy",    "autopilot"};

std::string env_name(const std::string& path, const char* key) {
  std::string name = "PROVERFLEET_" + path + "_" + key;
  for (auto& c : name)
    c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
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

  void number(const char* key, double& out) {
    const toml::node* n = get(key);
    if (auto text = from_env(key)) {
      out = env_number(key, *text);
      return;
    }
    if (!n) return;
    if (auto v = n->value<double>()) {
      out = *v;
      return;
    }
    fail(key, "a number");
  }
  void positive(const char* key, double& out) {
    double before = out;
    number(key, out);
    if (out <= 0) {
      out = before;
      throw ConfigError{where(key) + " must be > 0"};
    }
  }
  void fraction(const char* key, double& out) {
    number(key, out);
    if (out < 0 || out > 1) throw ConfigError{where(key) + " must be between 0 and 1"};
  }
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
  void optional_number(const char* key, std::optional<double>& out) {
    const bool in_env = env_ && env_->take(path_, key).has_value();
    if (!in_env && (!table_ || !table_->contains(key))) return;
    double v = 0;
    number(key, v);
    out = v;
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
  [[noreturn]] void fail(const char* key, const char* expected) const {
    throw ConfigError{where(key) + " must be " + expected};
  }

  const toml::table* table_;
  std::string path_;
  EnvOverrides* env_;
  std::set<std::string> seen_;
};

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
    r.positive("rate_per_gpu", prior.rate_per_gpu);
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
  top.raw("deploy");
  top.raw("autopilot");
  top.finish();

  TableReader econ(subtable(root, "economics"), "economics", &env);
  econ.positive("revenue_per_proof_usd", cfg.rank.economics.revenue_per_proof_usd);
  econ.positive("target_cost_per_proof_usd", cfg.rank.economics.target_cost_per_proof_usd);
  econ.boolean("profit_objective", cfg.profit_objective);
  econ.finish();

  auto& s = cfg.rank.setup;
  TableReader setup(subtable(root, "setup"), "setup", &env);
  setup.number("boot_h", s.boot_h);
  setup.positive("params_bytes", s.params_bytes);
  setup.fraction("download_speed_fraction", s.download_speed_fraction);
  setup.positive("unknown_download_mbps", s.unknown_download_mbps);
  setup.number("warmup_h", s.warmup_h);
  setup.number("benchmark_proofs", s.benchmark_proofs);
  setup.positive("expected_lifetime_h", s.expected_lifetime_h);
  setup.number("slow_download_h", s.slow_download_h);
  setup.finish();
  if (s.download_speed_fraction <= 0) {
    throw ConfigError{"'setup.download_speed_fraction' must be > 0"};
  }

  auto& p = cfg.rank.predictor;
  TableReader pred(subtable(root, "predictor"), "predictor", &env);
  pred.positive("multi_gpu_exponent", p.multi_gpu_exponent);
  pred.positive("cores_per_gpu_full", p.cores_per_gpu_full);
  pred.number("pcie_slow_gbs_per_gpu", p.pcie_slow_gbs_per_gpu);
  pred.fraction("pcie_slow_factor", p.pcie_slow_factor);
  pred.fraction("band_per_data_flag", p.band_per_data_flag);
  pred.positive("unknown_rate_per_gpu", p.unknown_gpu.rate_per_gpu);
  pred.fraction("unknown_band", p.unknown_gpu.band);
  read_priors(pred.raw("prior"), p);
  pred.finish();

  auto& l = cfg.lifecycle;
  TableReader life(subtable(root, "lifecycle"), "lifecycle", &env);
  life.positive("renting_max_s", l.renting_max_s);
  life.positive("boot_loading_max_s", l.boot_loading_max_s);
  life.positive("boot_register_grace_s", l.boot_register_grace_s);
  life.positive("registered_max_s", l.registered_max_s);
  life.fraction("params_speed_fraction", l.params_speed_fraction);
  life.positive("params_slack", l.params_slack);
  life.positive("params_min_s", l.params_min_s);
  life.positive("params_max_s", l.params_max_s);
  life.positive("params_unknown_mbps", l.params_unknown_mbps);
  life.positive("warmup_max_s", l.warmup_max_s);
  life.positive("bench_slack", l.bench_slack);
  life.positive("bench_min_s", l.bench_min_s);
  life.positive("bench_max_s", l.bench_max_s);
  life.positive("heartbeat_timeout_s", l.heartbeat_timeout_s);
  life.positive("market_unknown_grace_s", l.market_unknown_grace_s);
  life.number("destroy_retry_s", l.destroy_retry_s);
  double crashes = l.max_prover_crashes;
  life.positive("max_prover_crashes", crashes);
  l.max_prover_crashes = static_cast<int>(crashes);
  life.finish();
  if (l.params_min_s > l.params_max_s) {
    throw ConfigError{"'lifecycle.params_min_s' must not exceed 'lifecycle.params_max_s'"};
  }
  if (l.bench_min_s > l.bench_max_s) {
    throw ConfigError{"'lifecycle.bench_min_s' must not exceed 'lifecycle.bench_max_s'"};
  }

  auto& a = cfg.acceptance;
  TableReader acc(subtable(root, "acceptance"), "acceptance", &env);
  double min_s = a.min_samples, max_s = a.max_samples;
  acc.positive("min_samples", min_s);
  acc.positive("max_samples", max_s);
  acc.positive("max_seconds", a.max_seconds);
  acc.positive("z", a.z);
  auto& t = cfg.sprt;
  acc.fraction("alpha", t.alpha);
  acc.fraction("beta", t.beta);
  acc.fraction("accept_margin", t.accept_margin);
  acc.fraction("reject_margin", t.reject_margin);
  acc.positive("prior_cv", t.prior_cv);
  acc.number("prior_weight", t.prior_weight);
  double discard = t.max_warmup_discard;
  acc.number("max_warmup_discard", discard);
  t.max_warmup_discard = static_cast<int>(discard);
  acc.positive("warmup_outlier_sd", t.warmup_outlier_sd);
  acc.positive("trend_sd", t.trend_sd);
  acc.positive("stall_factor", t.stall_factor);
  acc.fraction("cap_accept_margin", t.cap_accept_margin);
  acc.finish();
  if (t.alpha <= 0 || t.beta <= 0 || t.alpha >= 0.5 || t.beta >= 0.5) {
    throw ConfigError{"'acceptance.alpha' and 'acceptance.beta' must be in (0, 0.5)"};
  }
  if (t.prior_weight < 0 || discard < 0) {
    throw ConfigError{"'acceptance.prior_weight' and 'acceptance.max_warmup_discard' must be >= 0"};
  }
  a.min_samples = static_cast<int>(min_s);
  a.max_samples = static_cast<int>(max_s);
  if (a.min_samples > a.max_samples) {
    throw ConfigError{"'acceptance.min_samples' must not exceed 'acceptance.max_samples'"};
  }
  // The lifecycle's benchmark deadline is sized for the acceptance test's sample cap.
  l.bench_max_samples = a.max_samples;

  auto& d = cfg.deploy;
  TableReader dep(subtable(root, "deploy"), "deploy", &env);
  dep.string("image", d.image);
  dep.positive("disk_gb", d.disk_gb);
  dep.string("onstart", d.onstart);
  dep.positive("heartbeat_s", d.heartbeat_s);
  dep.string("params_manifest", d.params_manifest);
  dep.finish();
  if (d.image.empty()) throw ConfigError{"'deploy.image' must not be empty"};

  TableReader market(subtable(root, "market"), "market", &env);
  market.optional_string("vast_url", cfg.market.vast_url);
  market.optional_string("key_file", cfg.market.key_file);
  market.finish();

  auto& ap = cfg.autopilot;
  auto& pol = ap.policy;
  TableReader pilot(subtable(root, "autopilot"), "autopilot", &env);
  pilot.boolean("enabled", ap.enabled);
  pilot.string("query", ap.query);
  pilot.positive("interval_s", ap.interval_s);
  pilot.number("operator_destroy_cooldown_h", ap.operator_destroy_cooldown_h);
  if (ap.operator_destroy_cooldown_h < 0) {
    throw ConfigError{"'autopilot.operator_destroy_cooldown_h' must be >= 0"};
  }
  pilot.positive("max_dollars_per_hour", pol.max_dollars_per_hour);
  double max_instances = pol.max_instances, max_bench = pol.max_concurrent_benchmarks,
         max_rents = pol.max_rents_per_decision;
  pilot.positive("max_instances", max_instances);
  pilot.positive("max_concurrent_benchmarks", max_bench);
  pilot.positive("max_rents_per_decision", max_rents);
  pol.max_instances = static_cast<int>(max_instances);
  pol.max_concurrent_benchmarks = static_cast<int>(max_bench);
  pol.max_rents_per_decision = static_cast<int>(max_rents);
  pilot.optional_number("demand_proofs_per_hour", pol.demand_proofs_per_hour);
  if (pol.demand_proofs_per_hour && *pol.demand_proofs_per_hour <= 0) {
    throw ConfigError{"'autopilot.demand_proofs_per_hour' must be > 0 (leave it out for no limit)"};
  }
  pilot.number("exploration_budget_usd", pol.exploration_budget_usd);
  if (pol.exploration_budget_usd < 0) {
    throw ConfigError{"'autopilot.exploration_budget_usd' must be >= 0"};
  }
  double window_h = pol.exploration_window_s / 3600;
  pilot.positive("exploration_window_h", window_h);
  pol.exploration_window_s = window_h * 3600;
  pilot.number("min_value_usd", pol.min_value_usd);
  pilot.boolean("allow_shared_machines", pol.allow_shared_machines);
  double ttl_h = pol.blocklist.base_ttl_s / 3600;
  pilot.positive("block_base_ttl_h", ttl_h);
  pol.blocklist.base_ttl_s = ttl_h * 3600;
  pilot.fraction("block_max_pool_share", pol.blocklist.max_pool_share);
  pilot.finish();
  // One source of truth for money and setup: the policy scores with the same figures the
  // ranking shows.
  pol.scoring.economics = cfg.rank.economics;
  pol.scoring.profit_objective = cfg.profit_objective;
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

tl::expected<AppConfig, std::string> parse_config(const std::string& text, const std::string& name,
                                                  const Environment& environment) {
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
  std::ifstream in(chosen);
  if (!in) return tl::unexpected("cannot read config file '" + chosen + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_config(buf.str(), chosen, process_environment());
}

}  // namespace pf::cli
