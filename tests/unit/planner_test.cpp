// The prover planner against cuzk's published RAM sweep (reference cuzk.md §5: one RTX 5070 Ti,
// 96 cores; 128 GiB ran pw2, 256 pw7, 384 pw10, 512 pw12) and its generated TOML against the
// keys the pinned cuzk's config.rs reads.
#include "core/planner.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/text.h"

namespace pf::core {
namespace {

PlanInput box(double ram, double cores = 96, int gpus = 1, bool pce = true) {
  PlanInput in;
  in.ram_gib = ram;
  in.cores = cores;
  in.gpus = gpus;
  in.pce_cached = pce;
  return in;
}

bool any_reason_contains(const ProverPlan& p, const std::string& text) {
  for (const auto& r : p.reasons) {
    if (r.find(text) != std::string::npos) return true;
  }
  return false;
}

struct SweepPoint {
  double ram;
  int published_pw;     // concurrent partitions cuzk's docs ran successfully at this RAM
  int expected_p;       // ours: ⌊(RAM − 75) / 14⌋, at most 14 per GPU
  int expected_gw;      // 2 once ≥ 10 partitions per GPU
  int expected_warmup;  // no PCE file yet: 14 GiB extraction transient on top
};

void PrintTo(const SweepPoint& s, std::ostream* os) {
  *os << s.ram << " GiB";
}

class PlannerSweep : public ::testing::TestWithParam<SweepPoint> {};

TEST_P(PlannerSweep, FitsTheMemoryAndRunsAtLeastWhatCuzkRan) {
  const SweepPoint s = GetParam();
  auto plan = plan_prover(box(s.ram), PlanLimits{});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->partitions, s.expected_p);
  EXPECT_GE(plan->partitions, s.published_pw);
  // The model peak, plus the headroom, stays inside the real limit; the budget is the peak.
  EXPECT_LE(plan->expected_peak_gib + 5, s.ram);
  EXPECT_DOUBLE_EQ(plan->expected_peak_gib, 70 + 14.0 * plan->partitions);
  EXPECT_DOUBLE_EQ(plan->total_budget_gib, plan->expected_peak_gib);
  EXPECT_LE(plan->total_budget_gib, s.ram);
  EXPECT_EQ(plan->gpu_workers_per_device, s.expected_gw);
  EXPECT_EQ(plan->warmup_partitions, s.expected_warmup);
  EXPECT_LE(plan->warmup_budget_gib + 5, s.ram);
  EXPECT_EQ(plan->synthesis_threads, 96);
  EXPECT_EQ(plan->gpu_threads, 32);
  EXPECT_EQ(plan->gpus, 1);
  EXPECT_FALSE(plan->reasons.empty());
}

INSTANTIATE_TEST_SUITE_P(CuzkRamSweep, PlannerSweep,
                         ::testing::Values(SweepPoint{128, 2, 3, 1, 2},
                                           SweepPoint{256, 7, 12, 2, 11},
                                           SweepPoint{384, 10, 14, 2, 14},
                                           SweepPoint{512, 12, 14, 2, 14}),
                         [](const ::testing::TestParamInfo<SweepPoint>& point) {
                           return std::to_string(static_cast<int>(point.param.ram)) + "GiB";
                         });

TEST(Planner, TheWarmupAt128GiBIsTheFieldsHandFix) {
  // The field ran the first proof by hand with partition_workers=2 on 128 GiB boxes.
  auto plan = plan_prover(box(128, 96, 1, /*pce=*/false), PlanLimits{});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->warmup_partitions, 2);
  EXPECT_DOUBLE_EQ(plan->warmup_budget_gib, 70 + 14 + 2 * 14);
  EXPECT_TRUE(any_reason_contains(*plan, "no PCE file yet"));
}

TEST(Planner, BigBoxesAreCappedPerGpuAndSayWhy) {
  auto plan = plan_prover(box(512), PlanLimits{});
  ASSERT_TRUE(plan);
  EXPECT_TRUE(any_reason_contains(*plan, "per GPU"));
  auto two = plan_prover(box(512, 96, 2), PlanLimits{});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->partitions, 28);  // memory allows ⌊(512 − 75) / 14⌋ = 31; 14 per GPU
}

TEST(Planner, FewCoresCapThePartitions) {
  auto plan = plan_prover(box(256, 8), PlanLimits{});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->partitions, 4);
  EXPECT_EQ(plan->synthesis_threads, 8);
  EXPECT_EQ(plan->gpu_threads, 8);
  EXPECT_EQ(plan->gpu_workers_per_device, 1);
  EXPECT_TRUE(any_reason_contains(*plan, "cores"));
  PlanLimits no_core_cap;
  no_core_cap.cores_per_partition = 0;
  EXPECT_EQ(plan_prover(box(256, 8), no_core_cap)->partitions, 12);
}

TEST(Planner, ProofsInFlightCoverThePartitions) {
  EXPECT_EQ(plan_prover(box(128), PlanLimits{})->proofs_in_flight, 2);           // 3 partitions
  EXPECT_EQ(plan_prover(box(256), PlanLimits{})->proofs_in_flight, 3);           // 12 partitions
  EXPECT_EQ(plan_prover(box(1024, 192, 4), PlanLimits{})->proofs_in_flight, 7);  // 56
}

TEST(Planner, AnExternalCapIsHonoured) {
  PlanLimits lim;
  lim.partition_cap = 5;
  auto plan = plan_prover(box(256), lim);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->partitions, 5);
  EXPECT_DOUBLE_EQ(plan->total_budget_gib, 140);
  EXPECT_TRUE(any_reason_contains(*plan, "capped at 5"));
}

TEST(Planner, TooLittleMemoryIsAClearError) {
  auto plan = plan_prover(box(80), PlanLimits{});
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().find("80 GiB"), std::string::npos) << plan.error();
  EXPECT_NE(plan.error().find("89 GiB"), std::string::npos) << plan.error();
  EXPECT_TRUE(plan_prover(box(89), PlanLimits{}));
}

TEST(Planner, BadInputsAreErrorsNamingTheInput) {
  auto no_gpu = plan_prover(box(256, 32, 0), PlanLimits{});
  ASSERT_FALSE(no_gpu);
  EXPECT_NE(no_gpu.error().find("GPU"), std::string::npos);
  auto no_cores = plan_prover(box(256, 0), PlanLimits{});
  ASSERT_FALSE(no_cores);
  EXPECT_NE(no_cores.error().find("cores"), std::string::npos);
  auto nan_ram = plan_prover(box(std::nan("")), PlanLimits{});
  ASSERT_FALSE(nan_ram);
  EXPECT_NE(nan_ram.error().find("RAM"), std::string::npos);
}

TEST(Planner, OomBacksOffUntilTheFloorThenFails) {
  const PlanInput in = box(256);
  auto plan = plan_prover(in, PlanLimits{});
  ASSERT_TRUE(plan);
  std::vector<int> seen = {plan->partitions};
  while (true) {
    auto next = plan_after_oom(in, PlanLimits{}, seen.back());
    if (!next) {
      EXPECT_NE(next.error().find("floor"), std::string::npos) << next.error();
      break;
    }
    EXPECT_LT(next->partitions, seen.back());
    EXPECT_LE(next->warmup_partitions, next->partitions);
    EXPECT_TRUE(any_reason_contains(*next, "killed for memory at " + std::to_string(seen.back())));
    seen.push_back(next->partitions);
    ASSERT_LT(seen.size(), 20u);
  }
  EXPECT_EQ(seen, (std::vector<int>{12, 9, 6, 4, 3, 2, 1}));
}

TEST(Planner, OomDuringTheWarmupBacksOffFromTheWarmupSize) {
  auto next = plan_after_oom(box(256, 96, 1, false), PlanLimits{}, 11);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->partitions, 8);
  EXPECT_EQ(next->warmup_partitions, 8);
}

// The keys the pinned cuzk reads: every field of extern/cuzk/cuzk-core/src/config.rs in
// filecoin-project/curio at commit 0ba6cbcae0348ad781973bbd65faaa90fdcb6be1 (the commit
// deploy/agent-image/Dockerfile builds), read with the reference search tools. Its structs
// derive serde::Deserialize without deny_unknown_fields: a key outside this list is dropped
// without a word, which is how max_parallel_synthesis (in notes about a later cuzk, not in this
// one) would have gone unnoticed. Deprecated fields it still parses but ignores are kept apart.
constexpr const char* kPinnedCurioCommit = "0ba6cbcae0348ad781973bbd65faaa90fdcb6be1";

using KeySet = std::map<std::string, std::set<std::string>>;

const KeySet& pinned_cuzk_keys() {
  static const KeySet keys = {
      {"daemon", {"listen", "status_listen"}},
      {"memory", {"total_budget", "safety_margin", "eviction_min_idle"}},
      {"gpus", {"devices", "gpu_threads", "gpu_workers_per_device"}},
      {"scheduler", {"max_batch_size", "max_batch_wait_ms", "sort_by_type"}},
      {"synthesis", {"threads"}},
      {"pipeline",
       {"enabled", "synthesis_lookahead", "synthesis_concurrency", "slot_size",
        "max_gpu_queue_depth"}},
      {"srs", {"param_cache"}},
      {"logging", {"level", "format"}}};
  return keys;
}

// Parsed but ignored (a warning at start): writing one would configure nothing.
const KeySet& deprecated_cuzk_keys() {
  static const KeySet keys = {{"memory", {"pinned_budget", "working_memory_budget"}},
                              {"synthesis", {"partition_workers"}},
                              {"srs", {"preload"}}};
  return keys;
}

// What we write, exactly: a new key must be checked against the pinned config.rs first.
const KeySet& written_keys() {
  static const KeySet keys = {{"daemon", {"listen", "status_listen"}},
                              {"srs", {"param_cache"}},
                              {"memory", {"total_budget"}},
                              {"gpus", {"devices", "gpu_threads", "gpu_workers_per_device"}},
                              {"synthesis", {"threads"}},
                              {"pipeline", {"enabled"}},
                              {"logging", {"level"}}};
  return keys;
}

KeySet keys_of(const toml::table& t) {
  KeySet out;
  for (const auto& [section, value] : t) {
    auto& keys = out[std::string(section.str())];
    if (const auto* table = value.as_table()) {
      for (const auto& [key, v] : *table) keys.insert(std::string(key.str()));
    }
  }
  return out;
}

TEST(Planner, GeneratedCuzkTomlUsesExactlyThePinnedCuzkKeys) {
  auto plan = plan_prover(box(256, 64, 2), PlanLimits{});
  ASSERT_TRUE(plan);
  CuzkEndpoints ep;
  ep.param_cache = "/data/zk/params with \"quotes\"";
  for (bool warmup : {false, true}) {
    const std::string text = cuzk_config_toml(*plan, warmup, ep);
    toml::table t;
    try {
      t = toml::parse(text);
    } catch (const toml::parse_error& e) {
      FAIL() << e.what() << "\n" << text;
    }
    const KeySet written = keys_of(t);
    EXPECT_EQ(written, written_keys()) << text;
    for (const auto& [section, keys] : written) {
      ASSERT_TRUE(pinned_cuzk_keys().count(section)) << "cuzk has no section [" << section << "]";
      for (const auto& key : keys) {
        EXPECT_TRUE(pinned_cuzk_keys().at(section).count(key))
            << "cuzk at " << kPinnedCurioCommit << " does not read " << section << "." << key;
        const auto deprecated = deprecated_cuzk_keys().find(section);
        EXPECT_FALSE(deprecated != deprecated_cuzk_keys().end() && deprecated->second.count(key))
            << section << "." << key << " is deprecated: cuzk ignores it";
      }
    }
    // cuzk parses sizes as an integer before "GiB" (parse_size); "255.5GiB" would fall back to
    // its 50 GiB default.
    const double budget = warmup ? plan->warmup_budget_gib : plan->total_budget_gib;
    std::ostringstream want;
    want << static_cast<long long>(budget) << "GiB";
    EXPECT_EQ(budget, std::floor(budget));
    EXPECT_EQ(t["memory"]["total_budget"].value<std::string>(), want.str());
    EXPECT_EQ(t["gpus"]["gpu_workers_per_device"].value<int64_t>(), plan->gpu_workers_per_device);
    EXPECT_EQ(t["gpus"]["gpu_threads"].value<int64_t>(), 32);
    EXPECT_EQ(t["synthesis"]["threads"].value<int64_t>(), 64);
    const auto* devices = t["gpus"]["devices"].as_array();
    ASSERT_NE(devices, nullptr);
    ASSERT_EQ(devices->size(), 2u);
    EXPECT_EQ((*devices)[1].value<int64_t>(), 1);
    EXPECT_EQ(t["srs"]["param_cache"].value<std::string>(), ep.param_cache);
    EXPECT_EQ(t["daemon"]["listen"].value<std::string>(), "127.0.0.1:9820");
    EXPECT_EQ(t["daemon"]["status_listen"].value<std::string>(), "127.0.0.1:9821");
  }
}

// The budget alone bounds cuzk's concurrent syntheses: the warm-up's is the smaller one.
TEST(Planner, WarmUpBudgetIsSmallerWhenItRunsFewerPartitions) {
  auto plan = plan_prover(box(128, 96, 1, false), PlanLimits{});
  ASSERT_TRUE(plan);
  ASSERT_LT(plan->warmup_partitions, plan->partitions);
  const auto full = toml::parse(cuzk_config_toml(*plan, false, CuzkEndpoints{}));
  const auto warm = toml::parse(cuzk_config_toml(*plan, true, CuzkEndpoints{}));
  EXPECT_EQ(full["memory"]["total_budget"].value<std::string>(),
            fixed(plan->total_budget_gib, 0) + "GiB");
  EXPECT_EQ(warm["memory"]["total_budget"].value<std::string>(),
            fixed(plan->warmup_budget_gib, 0) + "GiB");
}

// The Dockerfile builds the cuzk whose keys are pinned above: moving the pin means checking
// config.rs at the new commit and updating the key sets.
TEST(Planner, AgentImageBuildsThePinnedCuzk) {
  std::ifstream in(std::string(PF_SOURCE_DIR) + "/deploy/agent-image/Dockerfile");
  ASSERT_TRUE(in) << "deploy/agent-image/Dockerfile is missing";
  std::string line, pinned;
  while (std::getline(in, line)) {
    const std::string prefix = "ARG CURIO_COMMIT=";
    if (line.rfind(prefix, 0) == 0) pinned = line.substr(prefix.size());
  }
  EXPECT_EQ(pinned, kPinnedCurioCommit);
}

TEST(Planner, ParsesSizes) {
  EXPECT_DOUBLE_EQ(*parse_gib("256G"), 256);
  EXPECT_DOUBLE_EQ(*parse_gib("256GiB"), 256);
  EXPECT_DOUBLE_EQ(*parse_gib(" 128 gib "), 128);
  EXPECT_DOUBLE_EQ(*parse_gib("1T"), 1024);
  EXPECT_DOUBLE_EQ(*parse_gib("512M"), 0.5);
  EXPECT_DOUBLE_EQ(*parse_gib("96"), 96);
  EXPECT_NEAR(*parse_gib("240GB"), 223.5, 0.05);
  auto bad_unit = parse_gib("12X");
  ASSERT_FALSE(bad_unit);
  EXPECT_NE(bad_unit.error().find("unknown unit"), std::string::npos) << bad_unit.error();
  EXPECT_FALSE(parse_gib("lots"));
  EXPECT_FALSE(parse_gib("-5G"));
  EXPECT_FALSE(parse_gib(""));
}

// Issue 10: inputs past any real machine are refused before anything is sized from them
// (2^31 GPUs used to build a device list until memory ran out).
TEST(Planner, InputsOutsideSaneRangesAreRefused) {
  PlanLimits limits;
  auto gpus = plan_prover(PlanInput{256, 32, 2147483647, true}, limits);
  ASSERT_FALSE(gpus);
  EXPECT_EQ(gpus.error(), "at most 64 GPUs can be planned for, got 2147483647");
  EXPECT_TRUE(plan_prover(PlanInput{256, 32, kMaxPlanGpus, true}, limits));
  auto ram = plan_prover(PlanInput{1e300, 32, 1, true}, limits);
  ASSERT_FALSE(ram);
  EXPECT_NE(ram.error().find("usable RAM must be a positive number of GiB up to 65536"),
            std::string::npos)
      << ram.error();
  auto cores = plan_prover(PlanInput{256, 1e9, 1, true}, limits);
  ASSERT_FALSE(cores);
  EXPECT_NE(cores.error().find("usable cores"), std::string::npos) << cores.error();
  auto nan_ram = plan_prover(PlanInput{std::nan(""), 32, 1, true}, limits);
  EXPECT_FALSE(nan_ram);
}

}  // namespace
}  // namespace pf::core
