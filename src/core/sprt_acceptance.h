// Sequential acceptance test (Wald's SPRT) on post-warm-up proof intervals.
//
// Each interval between completions is lognormal (the scenario spec and the field agree), so
// x = ln(interval) is normal with sd σ. The test weighs
//   H0: rate = break-even · (1 − reject_margin)   (not worth keeping)
//   H1: rate = break-even · (1 + accept_margin)   (clearly worth keeping)
// and after every proof compares the log-likelihood ratio with ln((1−β)/α) (accept) and
// ln(β/(1−α)) (reject). A host far from break-even decides in min_samples proofs; a marginal
// one runs until max_samples or the time cap and is then judged on its point estimate.
// σ comes from the samples, shrunk toward a configured prior CV while they are few.
//
// Steady state: the agent marks warm-up proofs and the caller leaves them out; on top of that,
// up to max_warmup_discard leading intervals that are outliers against the rest are dropped,
// and a run that is still getting slower (first half vs second half) is not accepted before
// the caps, where the later half alone is judged. A host that goes silent for stall_factor
// break-even intervals is rejected without waiting for the caps.
#pragma once

#include "core/acceptance.h"

namespace pf::core {

struct SprtConfig {
  double alpha = 0.05;  // P(accept | rate at the H0 point)
  double beta = 0.10;   // P(reject | rate at the H1 point)
  double accept_margin = 0.12;
  double reject_margin = 0.0;
  int min_samples = 3;
  int max_samples = 24;
  double max_seconds = 2 * 3600;  // time cap, from the start of the benchmark phase
  double prior_cv = 0.2;          // per-proof CV assumed before samples speak
  double prior_weight = 3;        // ... worth this many samples
  int max_warmup_discard = 2;
  double warmup_outlier_sd = 3;  // a leading interval this many σ above the rest is warm-up
  double trend_sd = 2.5;         // slowdown between halves, in standard errors, that blocks accept
  double stall_factor = 4;       // silence of this many break-even intervals rejects
  // At the caps the point estimate must clear break-even by this much to be accepted.
  double cap_accept_margin = 0.03;
  double z = 1.645;  // interval reported in the verdict
};

// `tuning` with the sample and time caps every acceptance test shares taken from `caps`.
SprtConfig with_caps(SprtConfig tuning, const AcceptanceConfig& caps);

class SprtAcceptance final : public Acceptance {
 public:
  explicit SprtAcceptance(SprtConfig config) : config_(config) {}
  Verdict evaluate(const BenchmarkInput& input) const override;
  double interval_z() const override { return config_.z; }
  const SprtConfig& config() const { return config_; }

 private:
  SprtConfig config_;
};

}  // namespace pf::core
