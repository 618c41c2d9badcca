#include "core/learned_predictor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <tuple>

#include "core/host_stats.h"
#include "core/text.h"

namespace pf::core {
namespace {

using HostTuple = std::tuple<std::int64_t, std::string, int>;

HostTuple tuple_of(const HostKey& k) {
  return {k.machine_id, k.gpu_name, k.num_gpus};
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What predict_from_prior makes of one GPU-rate unit on this hardware: the product of the
// memory, core and PCIe adjustments and n^exponent. Zero when the memory allows no partition.
double hardware_shape(Offer offer, std::optional<double> ram_gib, double exponent,
                      const PredictorConfig& base) {
  if (ram_gib) offer.usable_ram_gib = *ram_gib;
  offer.data_flags.clear();
  const GpuPrior unit{"", 1, 0, ""};
  return predict_with_prior(offer, base, &unit, exponent, Reasons::Skipped).rate;
}

struct ContendedRun {
  BenchRun run;
  int others = 1;
};

struct HostData {
  HostKey key;
  Offer hardware;
  std::optional<double> ram_gib;
  double latest_at = -1e300;
  std::vector<BenchRun> clean;
  std::vector<ContendedRun> contended;
  std::vector<BenchRun> throttled;  // throttled runs (contended ones corrected, see below)
  std::vector<int> throttled_others;
  double other_factor = 0;  // hardware shape without the GPU-count term
  int gpus = 1;
  // Per round:
  double alone = 0;  // unthrottled rate alone on the machine; 0 = unknown
  bool derived = false;
};

double median_rate(const HostKey& key, std::vector<BenchRun> runs) {
  for (auto& r : runs) r.contended = r.throttled = false;  // already sorted by the caller
  return summarize_host(key, std::move(runs)).median;
}

// CPU names compare case-insensitively with runs of blanks folded ("AMD  EPYC 7502 " and
// "amd epyc 7502" are one CPU).
std::string cpu_key(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

double prior_rate_for(const std::string& gpu_name, const PredictorConfig& base) {
  const GpuPrior* p = find_prior(base, gpu_name);
  return p ? p->rate_per_gpu : base.unknown_gpu.rate_per_gpu;
}

}  // namespace

std::vector<Measurement> join_measurements(const std::vector<BenchRun>& runs,
                                           const std::vector<InstanceRecord>& instances) {
  std::map<std::int64_t, const InstanceRecord*> by_id;
  for (const auto& rec : instances) by_id[rec.id] = &rec;
  std::vector<Measurement> out;
  for (const auto& run : runs) {
    auto it = by_id.find(run.instance_id);
    if (it == by_id.end()) continue;
    Measurement m;
    m.run = run;
    m.offer = it->second->offer;
    m.our_others_on_machine = run.contended ? 1 : 0;
    out.push_back(std::move(m));
  }
  return out;
}

const ModelKnowledge* FleetKnowledge::model(const std::string& gpu_name) const {
  for (const auto& m : models)
    if (iequals(m.gpu_name, gpu_name)) return &m;
  return nullptr;
}

const CpuKnowledge* FleetKnowledge::cpu(const std::string& cpu_name) const {
  const std::string want = cpu_key(cpu_name);
  if (want.empty()) return nullptr;
  for (const auto& c : cpus)
    if (cpu_key(c.cpu_name) == want) return &c;
  return nullptr;
}

const HostKnowledge* FleetKnowledge::host(const HostKey& key) const {
  auto it = std::lower_bound(hosts.begin(), hosts.end(), key,
                             [](const HostKnowledge& h, const HostKey& want) {
                               return tuple_of(h.host) < tuple_of(want);
                             });
  return it != hosts.end() && it->host == key ? &*it : nullptr;
}

FleetKnowledge learn_fleet(std::span<const Measurement> history,
                           const LearnedPredictorConfig& cfg) {
  FleetKnowledge k;
  k.contention_factor = cfg.contention_prior;
  k.multi_gpu_exponent = cfg.base.multi_gpu_exponent;
  k.spread_log_sd = cfg.spread_prior;

  std::map<HostTuple, HostData> hosts;
  for (const auto& m : history) {
    if (!std::isfinite(m.run.rate) || m.run.rate < 0) continue;
    ++k.measurements;
    HostKey key{m.offer.machine_id, m.offer.gpu_name, m.offer.num_gpus};
    auto& h = hosts[tuple_of(key)];
    h.key = key;
    if (m.run.at >= h.latest_at) {
      h.latest_at = m.run.at;
      h.hardware = m.offer;
      h.ram_gib = m.ram_gib;
    }
    const int others =
        m.run.contended ? std::max(1, m.our_others_on_machine) : m.our_others_on_machine;
    if (m.run.throttled) {
      h.throttled.push_back(m.run);
      h.throttled_others.push_back(others);
    } else if (others > 0) {
      h.contended.push_back({m.run, others});
    } else {
      h.clean.push_back(m.run);
    }
  }
  for (auto& [key, h] : hosts) {
    h.gpus = std::max(1, h.key.num_gpus);
    h.other_factor = hardware_shape(h.hardware, h.ram_gib, 0, cfg.base);
  }

  std::map<std::string, ModelKnowledge> models;
  const double w_exp = cfg.exponent_prior_weight * std::log(2.0) * std::log(2.0);
  double spread_sum = 0;
  int spread_n = 0;

  // Contention, exponent and model rates depend on each other; a few alternating rounds settle.
  for (int round = 0; round < 3; ++round) {
    const double c = k.contention_factor;
    for (auto& [key, h] : hosts) {
      h.alone = 0;
      h.derived = false;
      if (!h.clean.empty()) {
        h.alone = median_rate(h.key, h.clean);
      } else if (!h.contended.empty()) {
        std::vector<BenchRun> corrected;
        for (const auto& cr : h.contended) {
          BenchRun r = cr.run;
          r.rate /= std::pow(c, cr.others);
          corrected.push_back(r);
        }
        h.alone = median_rate(h.key, corrected);
        h.derived = true;
      }
    }

    // Model rates and the multi-GPU exponent, alternating.
    for (int inner = 0; inner < 3; ++inner) {
      models.clear();
      std::map<std::string, std::pair<double, int>> sums;  // lower(name) -> (Σx, n)
      std::map<std::string, std::string> display;
      for (const auto& [key, h] : hosts) {
        if (h.alone <= 0 || h.other_factor <= 0) continue;
        const std::string name = lower(h.key.gpu_name);
        display.emplace(name, h.key.gpu_name);
        const double x = std::log(h.alone) - std::log(h.other_factor) -
                         k.multi_gpu_exponent * std::log(static_cast<double>(h.gpus));
        sums[name].first += x;
        sums[name].second += 1;
      }
      std::map<std::string, double> mu;
      for (const auto& [name, s] : sums) {
        const double prior = prior_rate_for(display[name], cfg.base);
        const double m = (cfg.model_prior_weight * std::log(prior) + s.first) /
                         (cfg.model_prior_weight + s.second);
        mu[name] = m;
        models[name] = ModelKnowledge{display[name], std::exp(m), prior, s.second};
      }
      double num = w_exp * cfg.base.multi_gpu_exponent;
      double den = w_exp;
      int multi = 0;
      for (const auto& [key, h] : hosts) {
        if (h.alone <= 0 || h.other_factor <= 0 || h.gpus < 2) continue;
        const double ln_n = std::log(static_cast<double>(h.gpus));
        const double y = std::log(h.alone) - std::log(h.other_factor) - mu[lower(h.key.gpu_name)];
        num += ln_n * y;
        den += ln_n * ln_n;
        ++multi;
      }
      k.multi_gpu_exponent = std::clamp(num / den, 0.2, 1.0);
      k.multi_gpu_hosts = multi;

      spread_sum = 0;
      spread_n = 0;
      for (const auto& [key, h] : hosts) {
        if (h.alone <= 0 || h.other_factor <= 0) continue;
        const double x = std::log(h.alone) - std::log(h.other_factor) -
                         k.multi_gpu_exponent * std::log(static_cast<double>(h.gpus));
        const double r = x - mu[lower(h.key.gpu_name)];
        spread_sum += r * r;
        ++spread_n;
      }
    }

    // Contention: contended runs against what the same host (or its model) does alone.
    double num = cfg.contention_prior_weight * std::log(cfg.contention_prior);
    double den = cfg.contention_prior_weight;
    int runs = 0;
    for (const auto& [key, h] : hosts) {
      if (h.contended.empty()) continue;
      double expected = 0;
      if (!h.clean.empty()) {
        expected = h.alone;
      } else if (h.other_factor > 0) {
        auto it = models.find(lower(h.key.gpu_name));
        double per_gpu =
            it != models.end() ? it->second.rate_per_gpu : prior_rate_for(h.key.gpu_name, cfg.base);
        expected =
            per_gpu * h.other_factor * std::pow(static_cast<double>(h.gpus), k.multi_gpu_exponent);
        // A host seen only contended says little about contention when its alone rate comes
        // from the model: count it at a quarter weight.
      }
      if (expected <= 0) continue;
      const double weight = h.clean.empty() ? 0.25 : 1.0;
      for (const auto& cr : h.contended) {
        if (cr.run.rate <= 0) continue;
        num += weight * cr.others * std::log(cr.run.rate / expected);
        den += weight * cr.others * cr.others;
        ++runs;
      }
    }
    k.contention_factor = std::clamp(std::exp(num / den), 0.3, 1.0);
    k.contention_runs = runs;
  }

  k.spread_log_sd =
      std::sqrt((cfg.spread_prior_weight * cfg.spread_prior * cfg.spread_prior + spread_sum) /
                (cfg.spread_prior_weight + spread_n));

  for (auto& [name, m] : models) k.models.push_back(m);
  std::sort(k.models.begin(), k.models.end(), [](const ModelKnowledge& a, const ModelKnowledge& b) {
    return a.gpu_name < b.gpu_name;
  });

  // CPU effects: each measured host's rate against what its model predicts on its hardware,
  // grouped by CPU; shrunk toward 1 with the weight spread² ÷ prior sd² (in hosts).
  {
    std::map<std::string, std::pair<double, int>> sums;  // cpu key -> (Σ residual, n)
    std::map<std::string, std::string> display;
    for (const auto& [key, h] : hosts) {
      const std::string cpu = cpu_key(h.hardware.cpu_name);
      if (cpu.empty() || h.alone <= 0 || h.other_factor <= 0) continue;
      auto it = models.find(lower(h.key.gpu_name));
      if (it == models.end() || it->second.rate_per_gpu <= 0) continue;
      const double expected = it->second.rate_per_gpu * h.other_factor *
                              std::pow(static_cast<double>(h.gpus), k.multi_gpu_exponent);
      sums[cpu].first += std::log(h.alone) - std::log(expected);
      sums[cpu].second += 1;
      display.emplace(cpu, h.hardware.cpu_name);
    }
    const double tau = std::max(1e-3, cfg.cpu_effect_prior_sd);
    const double weight = k.spread_log_sd * k.spread_log_sd / (tau * tau);
    for (const auto& [cpu, sum] : sums) {
      const double f = std::exp(sum.first / (weight + sum.second));
      k.cpus.push_back(CpuKnowledge{
          display[cpu], std::clamp(f, cfg.cpu_factor_min, cfg.cpu_factor_max), sum.second});
    }
    std::sort(k.cpus.begin(), k.cpus.end(),
              [](const CpuKnowledge& a, const CpuKnowledge& b) { return a.cpu_name < b.cpu_name; });
  }

  const double c = k.contention_factor;
  for (auto& [key, h] : hosts) {
    HostKnowledge hk;
    hk.host = h.key;
    hk.last_at = h.latest_at;
    hk.rate = h.alone;
    hk.derived = h.derived;
    if (h.derived) {
      // Corrected with the final contention factor, not the previous round's.
      std::vector<BenchRun> corrected;
      for (const auto& cr : h.contended) {
        BenchRun r = cr.run;
        r.rate /= std::pow(c, cr.others);
        corrected.push_back(r);
      }
      hk.rate = median_rate(h.key, corrected);
    }
    hk.runs = static_cast<int>(h.derived ? h.contended.size() : h.clean.size());
    if (!h.throttled.empty()) {
      // A throttled run shows what the host sustains once hot; it is the better forecast.
      std::vector<BenchRun> corrected;
      for (std::size_t i = 0; i < h.throttled.size(); ++i) {
        BenchRun r = h.throttled[i];
        r.rate /= std::pow(c, h.throttled_others[i]);
        corrected.push_back(r);
      }
      const double hot = median_rate(h.key, corrected);
      if (hk.rate <= 0 || hot < hk.rate) {
        hk.rate = hot;
        hk.throttles = true;
        hk.runs = static_cast<int>(corrected.size());
      }
    }
    k.hosts.push_back(hk);
  }
  std::sort(k.hosts.begin(), k.hosts.end(), [](const HostKnowledge& a, const HostKnowledge& b) {
    return tuple_of(a.host) < tuple_of(b.host);
  });
  return k;
}

DownloadKnowledge learn_download_fraction(const std::vector<InstanceRecord>& fleet,
                                          double prior_fraction,
                                          const LearnedPredictorConfig& cfg) {
  DownloadKnowledge out;
  const double lo = std::clamp(cfg.download_fraction_min, 1e-4, 1.0);
  out.prior_fraction = std::clamp(std::isfinite(prior_fraction) ? prior_fraction : lo, lo, 1.0);
  out.fraction = out.prior_fraction;
  std::map<std::int64_t, std::pair<double, double>> latest;  // machine -> (created_at, ratio)
  for (const auto& r : fleet) {
    const double advertised = r.offer.inet_down_mbps;
    const double measured = r.params_rate_bps * 8 / 1e6;
    if (!(advertised > 0) || !(measured > 0) || !std::isfinite(advertised) ||
        !std::isfinite(measured)) {
      continue;
    }
    // A ratio beyond [lo/10, 2] is a report error or a cache, not a network: bounded.
    const double ratio = std::clamp(measured / advertised, lo / 10, 2.0);
    auto [it, fresh] = latest.try_emplace(r.offer.machine_id, r.created_at, ratio);
    if (!fresh && r.created_at >= it->second.first) it->second = {r.created_at, ratio};
  }
  // Weighted median of the machines' ratios and the configured fraction (weight w): one
  // machine that crawled, or one that flew, does not move the fleet's figure on its own.
  const double w = std::max(0.0, cfg.download_prior_weight);
  std::vector<std::pair<double, double>> weighted;  // (ratio, weight)
  weighted.emplace_back(out.prior_fraction, w);
  for (const auto& [machine, seen] : latest) weighted.emplace_back(seen.second, 1.0);
  out.machines = static_cast<int>(latest.size());
  std::sort(weighted.begin(), weighted.end());
  const double total = w + out.machines;
  double below = 0;
  for (const auto& [ratio, weight] : weighted) {
    below += weight;
    if (below >= total / 2 && weight > 0) {
      out.fraction = std::clamp(ratio, lo, 1.0);
      break;
    }
  }
  if (!cfg.download_fraction_may_rise) out.fraction = std::min(out.fraction, out.prior_fraction);
  return out;
}

double prediction_log_sd(const Prediction& p, double z) {
  if (p.rate <= 0 || z <= 0) return 0;
  const double low = std::max(p.low, p.rate * 1e-3);
  const double high = std::max(p.high, p.rate);
  return std::log(high / low) / (2 * z);
}

Prediction predict_offer(const Offer& offer, const FleetKnowledge& k,
                         const LearnedPredictorConfig& cfg, int others, Reasons reasons) {
  const bool explain = reasons == Reasons::Written;
  const ModelKnowledge* model = k.model(offer.gpu_name);
  // The fleet's rate for the model, where it has one, in place of the configured prior (its
  // name is never read: the prediction names the offer's model).
  GpuPrior learned;
  if (model && model->hosts > 0) {
    learned.rate_per_gpu = model->rate_per_gpu;
    learned.band = 0.3;
    if (explain) {
      learned.basis = "fleet data from " + std::to_string(model->hosts) + " host(s); prior " +
                      fixed(model->prior_rate_per_gpu, 1);
    }
  }
  Prediction p = predict_with_prior(
      offer, cfg.base, model && model->hosts > 0 ? &learned : find_prior(cfg.base, offer.gpu_name),
      k.multi_gpu_exponent, reasons);
  double s = 0;
  const double flags_sd =
      cfg.base.band_per_data_flag * static_cast<double>(offer.data_flags.size());
  if (model && model->hosts > 0) {
    p.source = "model";
    const double mean_sd = k.spread_log_sd / std::sqrt(model->hosts + cfg.model_prior_weight);
    s = std::sqrt(k.spread_log_sd * k.spread_log_sd + mean_sd * mean_sd) + flags_sd;
  } else {
    p.source = "prior";
    s = prediction_log_sd(p, cfg.band_z);
    // Once the fleet has measured anything, its spread is a better guide than the prior's.
    if (k.measurements > 0) s = std::max(s, k.spread_log_sd + flags_sd);
  }
  if (explain && k.multi_gpu_hosts > 0 && offer.num_gpus > 1) {
    p.reasons.push_back("multi-GPU scaling n^" + fixed(k.multi_gpu_exponent, 2) + " learned from " +
                        std::to_string(k.multi_gpu_hosts) + " multi-GPU host(s)");
  }

  // The CPU's learned effect on its GPU model's rate (a measured host needs none: its own runs
  // include it).
  const HostKnowledge* host = k.host({offer.machine_id, offer.gpu_name, offer.num_gpus});
  if (const CpuKnowledge* cpu = host ? nullptr : k.cpu(offer.cpu_name);
      cpu && cpu->hosts > 0 && std::fabs(cpu->factor - 1) >= 0.005) {
    p.rate *= cpu->factor;
    if (explain)
      p.reasons.push_back("CPU " + cpu->cpu_name + ": x" + fixed(cpu->factor, 2) +
                          " learned from " + std::to_string(cpu->hosts) + " host(s)");
  }

  if (host) {
    p.source = "host";
    p.rate = host->rate;
    s = cfg.host_log_sd / std::sqrt(std::max(1, host->runs));
    if (host->derived) s += 0.1;  // its alone rate leans on the learned contention factor
    if (explain)
      p.reasons.insert(p.reasons.begin(),
                       "host measured before: " + fixed(host->rate, 1) + "/hr (median of " +
                           std::to_string(host->runs) + " run(s)" +
                           (host->derived ? ", corrected for our own contention" : "") +
                           (host->throttles ? ", throttled once hot" : "") + ")");
  }

  if (others > 0) {
    const double f = std::pow(k.contention_factor, others);
    p.rate *= f;
    s += 0.05 * others;
    if (explain)
      p.reasons.push_back(std::to_string(others) + " other instance(s) of ours on machine " +
                          std::to_string(offer.machine_id) + ": x" + fixed(f, 2) +
                          (k.contention_runs > 0
                               ? " (learned from " + std::to_string(k.contention_runs) + " run(s))"
                               : " (prior)"));
  }
  s = std::clamp(s, 0.0, 2.5);
  p.rate = std::max(0.0, p.rate);
  p.low = p.rate * std::exp(-cfg.band_z * s);
  p.high = p.rate * std::exp(cfg.band_z * s);
  return p;
}

}  // namespace pf::core
