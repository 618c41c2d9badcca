#include "core/learned_predictor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

// An offer with plenty of RAM, cores and PCIe for its GPUs unless told otherwise.
Offer offer(std::int64_t machine, const std::string& gpu, int gpus = 1) {
  Offer o;
  o.id = machine * 10;
  o.machine_id = machine;
  o.gpu_name = gpu;
  o.num_gpus = gpus;
  o.cpu_ram_gib = 75 + 14 * 10 * gpus + 10;  // full partitions
  o.cpu_cores = 64 * gpus;
  o.cpu_cores_effective = 64 * gpus;
  o.pcie_bw_gbs = 25 * gpus;
  o.inet_down_mbps = 1000;
  o.dph_total = 0.4;
  o.reliability = 0.99;
  derive_offer_fields(o);
  return o;
}

Measurement measured(const Offer& o, double rate, double at, bool contended = false,
                     bool throttled = false) {
  Measurement m;
  m.offer = o;
  m.run.host = {o.machine_id, o.gpu_name, o.num_gpus};
  m.run.instance_id = o.machine_id;
  m.run.rate = rate;
  m.run.low = rate * 0.9;
  m.run.high = rate * 1.1;
  m.run.samples = 6;
  m.run.at = at;
  m.run.contended = contended;
  m.run.throttled = throttled;
  m.our_others_on_machine = contended ? 1 : 0;
  return m;
}

LearnedPredictorConfig config_with_prior(const std::string& gpu, double rate) {
  LearnedPredictorConfig cfg;
  cfg.base.priors = {{gpu, rate, 0.3, "spec sheet"}};
  return cfg;
}

TEST(LearnedPredictor, WithoutHistoryItIsThePrior) {
  LearnedPredictorConfig cfg;
  const FleetKnowledge k = learn_fleet({}, cfg);
  const Offer o = offer(1, "RTX 4090", 2);
  const Prediction p = predict_offer(o, k, cfg);
  EXPECT_EQ(p.source, "prior");
  EXPECT_DOUBLE_EQ(p.rate, predict_from_prior(o, cfg.base).rate);
  EXPECT_LT(p.low, p.rate);
  EXPECT_GT(p.high, p.rate);
}

TEST(LearnedPredictor, LearnsThatAModelUnderperformsItsSpecSheet) {
  // The spec sheet says 55/hr; every measured host does about 26.
  const auto cfg = config_with_prior("RTX 5090", 55);
  std::vector<Measurement> history;
  const double rates[] = {24, 27, 25.5, 26.5, 27.5, 25};
  for (int i = 0; i < 6; ++i) history.push_back(measured(offer(100 + i, "RTX 5090"), rates[i], i));
  const FleetKnowledge k = learn_fleet(history, cfg);
  const Prediction p = predict_offer(offer(999, "RTX 5090"), k, cfg);
  EXPECT_EQ(p.source, "model");
  // Shrunk toward the prior a little, but far nearer the data.
  EXPECT_LT(std::abs(p.rate - 26), std::abs(p.rate - 55) / 4);
  ASSERT_TRUE(k.model("rtx 5090"));
  EXPECT_EQ(k.model("RTX 5090")->hosts, 6);
  EXPECT_THAT(p.reasons.front(), HasSubstr("fleet data from 6 host(s)"));
  // More data, closer to the data.
  const Prediction two = predict_offer(
      offer(999, "RTX 5090"),
      learn_fleet(std::vector<Measurement>(history.begin(), history.begin() + 2), cfg), cfg);
  EXPECT_GT(two.rate, p.rate);
}

TEST(LearnedPredictor, HostHistoryComesFirstAndIsAMedianNotAMax) {
  LearnedPredictorConfig cfg;
  const Offer o = offer(15136, "RTX 4090");
  std::vector<Measurement> history{measured(o, 61.4, 1), measured(o, 46.2, 2, /*contended=*/true),
                                   measured(o, 58.0, 3)};
  const FleetKnowledge k = learn_fleet(history, cfg);
  const Prediction p = predict_offer(o, k, cfg);
  EXPECT_EQ(p.source, "host");
  EXPECT_NEAR(p.rate, (61.4 + 58.0) / 2, 1e-9);
  EXPECT_THAT(p.reasons.front(), HasSubstr("median of 2 run(s)"));
  // A host's own runs predict it more tightly than fleet data predicts a new host.
  const Prediction other = predict_offer(offer(1, "RTX 4090"), k, cfg);
  EXPECT_LT(p.high / p.low, other.high / other.low);
}

TEST(LearnedPredictor, LearnsContentionFromOurOwnSecondInstances) {
  LearnedPredictorConfig cfg;
  std::vector<Measurement> history;
  for (int i = 0; i < 8; ++i) {
    const Offer o = offer(200 + i, "RTX 4090");
    history.push_back(measured(o, 60, 2.0 * i));
    history.push_back(measured(o, 60 * 0.67, 2.0 * i + 1, /*contended=*/true));
  }
  const FleetKnowledge k = learn_fleet(history, cfg);
  EXPECT_LT(k.contention_factor, 0.72);
  EXPECT_GT(k.contention_factor, 0.6);
  EXPECT_EQ(k.contention_runs, 8);
  const Offer fresh = offer(200, "RTX 4090");
  const Prediction alone = predict_offer(fresh, k, cfg, 0);
  const Prediction shared = predict_offer(fresh, k, cfg, 1);
  EXPECT_NEAR(shared.rate, alone.rate * k.contention_factor, 1e-9);
  EXPECT_THAT(shared.reasons.back(), HasSubstr("other instance(s) of ours"));
}

TEST(LearnedPredictor, HostSeenOnlyWhileContendedIsCorrectedForIt) {
  LearnedPredictorConfig cfg;
  const Offer o = offer(300, "RTX 3090");
  const FleetKnowledge k =
      learn_fleet(std::vector<Measurement>{measured(o, 30, 1, /*contended=*/true)}, cfg);
  const HostKnowledge* h = k.host({300, "RTX 3090", 1});
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->derived);
  EXPECT_NEAR(h->rate, 30 / k.contention_factor, 1e-6);
}

TEST(LearnedPredictor, OneMeasuredMultiGpuHostMovesTheScalingPriorHalfway) {
  // The 0.7 prior is a guess; one 2-GPU host scaling x1.8 (n^0.85) next to single-GPU hosts
  // of the same model should already carry as much weight as the guess.
  const auto cfg = config_with_prior("A40", 30);
  std::vector<Measurement> history;
  for (int machine = 500; machine < 503; ++machine)
    history.push_back(measured(offer(machine, "A40", 1), 30, machine));
  history.push_back(measured(offer(510, "A40", 2), 30 * std::pow(2, 0.85), 510));
  const FleetKnowledge k = learn_fleet(history, cfg);
  EXPECT_EQ(k.multi_gpu_hosts, 1);
  EXPECT_GT(k.multi_gpu_exponent, 0.76);
  EXPECT_LT(k.multi_gpu_exponent, 0.85);
}

TEST(LearnedPredictor, LearnsSublinearMultiGpuScaling) {
  const auto cfg = config_with_prior("A40", 30);
  std::vector<Measurement> history;
  int machine = 400;
  for (int gpus : {1, 2, 4, 8}) {
    for (int rep = 0; rep < 3; ++rep) {
      history.push_back(measured(offer(machine, "A40", gpus), 30 * std::pow(gpus, 0.4), machine));
      ++machine;
    }
  }
  const FleetKnowledge k = learn_fleet(history, cfg);
  EXPECT_LT(k.multi_gpu_exponent, 0.55);
  EXPECT_GT(k.multi_gpu_exponent, 0.3);
  EXPECT_EQ(k.multi_gpu_hosts, 9);
  const Prediction p = predict_offer(offer(999, "A40", 8), k, cfg);
  const double truth = 30 * std::pow(8, 0.4);
  const double prior_only = predict_from_prior(offer(999, "A40", 8), cfg.base).rate;
  EXPECT_LT(std::abs(p.rate - truth), std::abs(prior_only - truth) / 2);
}

TEST(LearnedPredictor, AHostThatThrottlesIsPredictedAtItsHotRate) {
  LearnedPredictorConfig cfg;
  const Offer o = offer(500, "RTX 4090");
  const FleetKnowledge k = learn_fleet(
      std::vector<Measurement>{measured(o, 60, 1), measured(o, 40, 2, false, /*throttled=*/true)},
      cfg);
  const Prediction p = predict_offer(o, k, cfg);
  EXPECT_NEAR(p.rate, 40, 1e-9);
  EXPECT_THAT(p.reasons.front(), HasSubstr("throttled once hot"));
}

TEST(LearnedPredictor, OrderOfHistoryDoesNotMatter) {
  LearnedPredictorConfig cfg;
  std::vector<Measurement> history;
  for (int i = 0; i < 10; ++i) {
    history.push_back(measured(offer(600 + i % 4, i % 2 ? "RTX 3090" : "RTX 4090", 1 + i % 3),
                               20 + 3 * i, i, i % 3 == 0));
  }
  const FleetKnowledge a = learn_fleet(history, cfg);
  std::reverse(history.begin(), history.end());
  const FleetKnowledge b = learn_fleet(history, cfg);
  EXPECT_NEAR(a.contention_factor, b.contention_factor, 1e-12);
  EXPECT_NEAR(a.multi_gpu_exponent, b.multi_gpu_exponent, 1e-12);
  const Offer o = offer(777, "RTX 4090", 2);
  EXPECT_NEAR(predict_offer(o, a, cfg).rate, predict_offer(o, b, cfg).rate, 1e-9);
}

TEST(LearnedPredictor, JoinsRunsWithTheirInstancesHardware) {
  InstanceRecord rec;
  rec.id = 5;
  rec.offer = offer(700, "L40S");
  BenchRun known;
  known.instance_id = 5;
  known.rate = 40;
  known.contended = true;
  BenchRun unknown;
  unknown.instance_id = 6;
  const auto joined = join_measurements({known, unknown}, {rec});
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].offer.gpu_name, "L40S");
  EXPECT_EQ(joined[0].our_others_on_machine, 1);
}

// --- CPU model and download ratio (issue 13 item 5) -------------------------------------

Offer offer_with_cpu(std::int64_t machine, const std::string& cpu) {
  Offer o = offer(machine, "RTX 4090");
  o.cpu_name = cpu;
  return o;
}

TEST(LearnedPredictor, ASlowCpuLowersPredictionsForItsOffersOnly) {
  const auto cfg = config_with_prior("RTX 4090", 58);
  std::vector<Measurement> history;
  // Hosts with an old Broadwell run at ~60% of the model; the EPYC hosts at ~100%.
  for (int i = 0; i < 5; ++i) {
    history.push_back(measured(offer_with_cpu(100 + i, "Xeon E5-2683 v4"), 36 + i * 0.5, i));
    history.push_back(measured(offer_with_cpu(200 + i, "AMD EPYC 7502"), 60 + i * 0.5, i));
  }
  const FleetKnowledge k = learn_fleet(history, cfg);
  ASSERT_TRUE(k.cpu("xeon  e5-2683 V4 "));  // names compare case- and blank-insensitively
  EXPECT_LT(k.cpu("Xeon E5-2683 v4")->factor, 0.95);
  EXPECT_GT(k.cpu("AMD EPYC 7502")->factor, 1.0);
  EXPECT_EQ(k.cpu("Xeon E5-2683 v4")->hosts, 5);

  const Prediction slow = predict_offer(offer_with_cpu(999, "Xeon E5-2683 v4"), k, cfg);
  const Prediction fast = predict_offer(offer_with_cpu(998, "AMD EPYC 7502"), k, cfg);
  const Prediction unknown = predict_offer(offer_with_cpu(997, "Intel Core i9-13900K"), k, cfg);
  EXPECT_LT(slow.rate, unknown.rate);
  EXPECT_GT(fast.rate, unknown.rate);
  EXPECT_THAT(slow.reasons.back(), HasSubstr("CPU Xeon E5-2683 v4: x0."));
  // Bounded: never beyond the configured limits, however extreme the data.
  EXPECT_GE(slow.rate, unknown.rate * cfg.cpu_factor_min - 1e-9);
  EXPECT_LE(fast.rate, unknown.rate * cfg.cpu_factor_max + 1e-9);
  // A measured machine's own runs already include its CPU: no second correction.
  const Prediction measured_host = predict_offer(offer_with_cpu(100, "Xeon E5-2683 v4"), k, cfg);
  EXPECT_EQ(measured_host.source, "host");
  EXPECT_DOUBLE_EQ(measured_host.rate, 36);
}

TEST(LearnedPredictor, CpuEffectIsShrunkAndClamped) {
  auto cfg = config_with_prior("RTX 4090", 58);
  // One host with an absurdly slow CPU: one host moves the factor only part of the way.
  std::vector<Measurement> history = {measured(offer_with_cpu(1, "Old CPU"), 58 * 0.5, 0)};
  for (int i = 0; i < 4; ++i) {
    history.push_back(measured(offer_with_cpu(10 + i, "Good CPU"), 58, i));
  }
  const FleetKnowledge k = learn_fleet(history, cfg);
  ASSERT_TRUE(k.cpu("Old CPU"));
  EXPECT_GT(k.cpu("Old CPU")->factor, 0.5);  // shrunk toward 1
  EXPECT_LT(k.cpu("Old CPU")->factor, 1.0);
  // With a tight prior sd the same data barely moves it; a huge one hits the clamp.
  cfg.cpu_effect_prior_sd = 0.01;
  EXPECT_GT(learn_fleet(history, cfg).cpu("Old CPU")->factor, 0.98);
  cfg.cpu_effect_prior_sd = 10;
  cfg.cpu_factor_min = 0.8;
  EXPECT_DOUBLE_EQ(learn_fleet(history, cfg).cpu("Old CPU")->factor, 0.8);
}

InstanceRecord downloaded(std::int64_t id, std::int64_t machine, double advertised_mbps,
                          double measured_mbps, double created_at = 0) {
  InstanceRecord r;
  r.id = id;
  r.offer.machine_id = machine;
  r.offer.inet_down_mbps = advertised_mbps;
  r.params_rate_bps = measured_mbps * 1e6 / 8;
  r.created_at = created_at;
  return r;
}

TEST(LearnedPredictor, DownloadFractionLearnsFromTheFleetAndIsBounded) {
  const LearnedPredictorConfig cfg;
  // Nothing measured: the configured fraction.
  const auto none = learn_download_fraction({}, 0.35, cfg);
  EXPECT_DOUBLE_EQ(none.fraction, 0.35);
  EXPECT_EQ(none.machines, 0);
  // Every machine delivers 10% of what it advertises: the fraction falls toward 0.1.
  std::vector<InstanceRecord> slow;
  for (int i = 0; i < 12; ++i) slow.push_back(downloaded(i + 1, 100 + i, 1000, 100));
  const auto learned = learn_download_fraction(slow, 0.35, cfg);
  EXPECT_EQ(learned.machines, 12);
  EXPECT_NEAR(learned.fraction, 0.1, 1e-9);  // the weighted median: 12 machines outweigh 3
  // One machine that crawled does not move it: the configured fraction weighs as 3.
  EXPECT_DOUBLE_EQ(learn_download_fraction({slow.front()}, 0.35, cfg).fraction, 0.35);
  // Fast ones never make setup rosier than configured, unless allowed; then never above 1.
  std::vector<InstanceRecord> fast;
  for (int i = 0; i < 50; ++i) fast.push_back(downloaded(i + 1, 100 + i, 100, 5000));
  EXPECT_DOUBLE_EQ(learn_download_fraction(fast, 0.35, cfg).fraction, 0.35);
  LearnedPredictorConfig may_rise = cfg;
  may_rise.download_fraction_may_rise = true;
  const auto high = learn_download_fraction(fast, 0.35, may_rise);
  EXPECT_GT(high.fraction, 0.35);
  EXPECT_LE(high.fraction, 1.0);
  // One machine counts once, at its latest rental; rows without an advertised speed are skipped.
  std::vector<InstanceRecord> repeated = {
      downloaded(1, 7, 1000, 10, 0), downloaded(2, 7, 1000, 900, 100), downloaded(3, 8, 0, 50, 0)};
  for (int i = 0; i < 4; ++i) repeated.push_back(downloaded(10 + i, 20 + i, 1000, 900));
  const auto one = learn_download_fraction(repeated, 0.35, may_rise);
  EXPECT_EQ(one.machines, 5);
  EXPECT_NEAR(one.fraction, 0.9, 1e-9);  // machine 7's latest (90%) counts, not its old 1%
  // Bounded below as well.
  std::vector<InstanceRecord> crawl;
  for (int i = 0; i < 100; ++i) crawl.push_back(downloaded(i + 1, 100 + i, 10000, 0.001));
  EXPECT_GE(learn_download_fraction(crawl, 0.35, cfg).fraction, cfg.download_fraction_min);
}

}  // namespace
}  // namespace pf::core
