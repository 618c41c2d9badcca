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

}  // namespace
}  // namespace pf::core
