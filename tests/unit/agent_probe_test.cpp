// The probe against fixture trees (tests/fixtures/probe/README.md): cgroup v1 and v2, no limit,
// a limit below /proc/meminfo on an ancestor cgroup, and recorded nvidia-smi output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/probe.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;

std::string probe_fixture(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/probe/" + name;
}

class TempTree {
 public:
  TempTree() {
    path_ = fs::temp_directory_path() /
            ("pf_probe_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempTree() { fs::remove_all(path_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(AgentProbe, CgroupV2LimitBelowHostMemoryIsTheUsableFigure) {
  auto m = probe_memory(probe_fixture("cgroup-v2"));
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->cgroup_version, "v2");
  ASSERT_TRUE(m->cgroup_limit_gib);
  EXPECT_DOUBLE_EQ(*m->cgroup_limit_gib, 256.0);
  ASSERT_TRUE(m->meminfo_total_gib);
  EXPECT_NEAR(*m->meminfo_total_gib, 503.8, 0.1);
  EXPECT_DOUBLE_EQ(m->usable_gib, 256.0);
  EXPECT_NE(m->usable_source.find("memory.max"), std::string::npos) << m->usable_source;

  const CpuInfo c = probe_cpu(probe_fixture("cgroup-v2"));
  EXPECT_EQ(c.affinity_cpus, 128);
  ASSERT_TRUE(c.quota_cpus);
  EXPECT_DOUBLE_EQ(*c.quota_cpus, 32.0);
  EXPECT_DOUBLE_EQ(c.usable, 32.0);
  EXPECT_EQ(c.usable_source, "cgroup cpu quota");

  EXPECT_EQ(read_oom_kills(probe_fixture("cgroup-v2")), 1);
  auto peak = read_cgroup_peak_gib(probe_fixture("cgroup-v2"));
  ASSERT_TRUE(peak);
  EXPECT_DOUBLE_EQ(*peak, 160.0);
}

TEST(AgentProbe, CgroupV1FollowsTheProcessCgroupPathAndSkipsTheUnlimitedRoot) {
  auto m = probe_memory(probe_fixture("cgroup-v1"));
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->cgroup_version, "v1");
  EXPECT_NE(m->cgroup_dir.find("docker/3f2a"), std::string::npos) << m->cgroup_dir;
  ASSERT_TRUE(m->cgroup_limit_gib);
  EXPECT_DOUBLE_EQ(*m->cgroup_limit_gib, 128.0);
  EXPECT_DOUBLE_EQ(m->usable_gib, 128.0);

  const CpuInfo c = probe_cpu(probe_fixture("cgroup-v1"));
  EXPECT_EQ(c.affinity_cpus, 64);  // 0-31,64-95
  ASSERT_TRUE(c.quota_cpus);
  EXPECT_DOUBLE_EQ(*c.quota_cpus, 16.0);
  EXPECT_DOUBLE_EQ(c.usable, 16.0);

  EXPECT_EQ(read_oom_kills(probe_fixture("cgroup-v1")), 2);
  auto peak = read_cgroup_peak_gib(probe_fixture("cgroup-v1"));
  ASSERT_TRUE(peak);
  EXPECT_DOUBLE_EQ(*peak, 110.0);
}

TEST(AgentProbe, NoCgroupLimitFallsBackToMeminfo) {
  auto m = probe_memory(probe_fixture("unlimited"));
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->cgroup_version, "v2");
  EXPECT_FALSE(m->cgroup_limit_gib);
  EXPECT_NEAR(m->usable_gib, 62.8, 0.1);
  EXPECT_NE(m->usable_source.find("/proc/meminfo"), std::string::npos);

  const CpuInfo c = probe_cpu(probe_fixture("unlimited"));
  EXPECT_FALSE(c.quota_cpus);  // "max 100000"
  EXPECT_DOUBLE_EQ(c.usable, 16.0);
  EXPECT_EQ(c.usable_source, "affinity mask");
  EXPECT_FALSE(read_cgroup_peak_gib(probe_fixture("unlimited")));
}

TEST(AgentProbe, LimitOnAnAncestorCgroupBelowMeminfoWins) {
  // The container's own memory.max is "max"; its pod's is 75 GiB, the host shows 376 GiB:
  // the field's "75 GB advertised vs 376 GB seen".
  auto m = probe_memory(probe_fixture("limit-below-meminfo"));
  ASSERT_TRUE(m) << m.error();
  EXPECT_NE(m->cgroup_dir.find("kubepods/pod7/ctr"), std::string::npos) << m->cgroup_dir;
  ASSERT_TRUE(m->cgroup_limit_gib);
  EXPECT_DOUBLE_EQ(*m->cgroup_limit_gib, 75.0);
  EXPECT_NEAR(*m->meminfo_total_gib, 376.0, 0.1);
  EXPECT_DOUBLE_EQ(m->usable_gib, 75.0);
  EXPECT_DOUBLE_EQ(probe_cpu(probe_fixture("limit-below-meminfo")).usable, 14.0);
  EXPECT_EQ(read_oom_kills(probe_fixture("limit-below-meminfo")), 0);
}

TEST(AgentProbe, CgroupLimitAboveHostMemoryIsNotTheUsableFigure) {
  TempTree t;
  t.write("proc/meminfo", "MemTotal:       16777216 kB\n");  // 16 GiB
  t.write("sys/fs/cgroup/cgroup.controllers", "memory\n");
  t.write("sys/fs/cgroup/memory.max", "68719476736\n");  // 64 GiB
  auto m = probe_memory(t.root());
  ASSERT_TRUE(m) << m.error();
  ASSERT_TRUE(m->cgroup_limit_gib);
  EXPECT_GT(*m->cgroup_limit_gib, 16.0);
  EXPECT_DOUBLE_EQ(m->usable_gib, 16.0);
}

TEST(AgentProbe, NothingReadableIsAClearError) {
  TempTree t;
  auto m = probe_memory(t.root());
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("/proc/meminfo"), std::string::npos) << m.error();
}

TEST(AgentProbe, RecordedNvidiaSmiOutputParses) {
  ProbeOptions o;
  o.root = probe_fixture("cgroup-v1");
  auto gpus = query_gpus(o);
  ASSERT_TRUE(gpus) << gpus.error();
  ASSERT_EQ(gpus->size(), 2u);
  const GpuInfo& a = (*gpus)[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.name, "NVIDIA A40");
  EXPECT_DOUBLE_EQ(a.memory_total_mib, 46068);
  EXPECT_DOUBLE_EQ(a.memory_used_mib, 12034);
  EXPECT_EQ(a.pcie_gen, 4);
  EXPECT_EQ(a.pcie_width, 16);
  EXPECT_DOUBLE_EQ(a.sm_clock_mhz, 1410);
  EXPECT_DOUBLE_EQ(a.util_pct, 98);
  EXPECT_DOUBLE_EQ(a.temp_c, 89);
  // 0x64 = hw thermal | sw thermal | sw power cap: the power cap is not a slowdown.
  EXPECT_EQ(a.throttle, (std::vector<std::string>{"sw_thermal_slowdown", "hw_thermal_slowdown"}));
  EXPECT_TRUE(a.power_capped);
  const GpuInfo& b = (*gpus)[1];
  EXPECT_EQ(b.pcie_gen, 3);  // running below its max (4)
  EXPECT_EQ(b.pcie_gen_max, 4);
  EXPECT_TRUE(b.throttle.empty());
  EXPECT_TRUE(b.power_capped);

  const auto hb = heartbeat_json(a);
  EXPECT_EQ(hb["util"], 98.0);
  EXPECT_EQ(hb["throttle"].size(), 2u);
}

TEST(AgentProbe, NotAvailableFieldsReadAsZero) {
  ProbeOptions o;
  o.root = probe_fixture("unlimited");
  auto gpus = query_gpus(o);
  ASSERT_TRUE(gpus) << gpus.error();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].name, "NVIDIA RTX PRO 4000 Blackwell");
  EXPECT_EQ((*gpus)[0].pcie_gen, 0);
  EXPECT_DOUBLE_EQ((*gpus)[0].power_w, 0);
  EXPECT_TRUE((*gpus)[0].throttle.empty());
}

TEST(AgentProbe, MalformedNvidiaSmiOutputNamesTheLine) {
  auto r = parse_nvidia_smi_csv("0, GPU, 1, 2\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("line 1"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("4 fields"), std::string::npos) << r.error();
  auto bad_mask = parse_nvidia_smi_csv("0, NVIDIA X, 1, 2, 3, 4, 16, 5, 6, 7, 8, 9.0, zz\n");
  ASSERT_FALSE(bad_mask);
  EXPECT_NE(bad_mask.error().find("hex mask"), std::string::npos) << bad_mask.error();
  auto empty = parse_nvidia_smi_csv("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(AgentProbe, RunsNvidiaSmiAndFallsBackToTheNewFieldName) {
  // A stand-in nvidia-smi that, like newer drivers, refuses the old throttle field name.
  TempTree t;
  t.write(
      "nvidia-smi",
      "#!/bin/sh\n"
      "case \"$1\" in *clocks_throttle_reasons*) "
      "echo 'Field \"clocks_throttle_reasons.active\" is not a valid field to query.'; exit 2;; "
      "esac\n"
      "echo '0, NVIDIA H200, 143771, 0, 5, 5, 16, 345, 1980, 0, 29, 74.10, 0x0000000000000001'\n");
  fs::permissions(t.root() + "/nvidia-smi", fs::perms::owner_all);
  ProbeOptions o;
  o.root = "/";
  o.nvidia_smi = t.root() + "/nvidia-smi";
  auto gpus = query_gpus(o);
  ASSERT_TRUE(gpus) << gpus.error();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ((*gpus)[0].memory_total_mib, 143771);

  o.nvidia_smi = t.root() + "/no-such-nvidia-smi";
  auto missing = query_gpus(o);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("no-such-nvidia-smi"), std::string::npos) << missing.error();
}

TEST(AgentProbe, MissingRecordedGpuQueryIsAWarningNotAFailure) {
  TempTree t;
  t.write("proc/meminfo", "MemTotal:       16777216 kB\n");
  ProbeOptions o;
  o.root = t.root();
  o.disk_path = t.root() + "/params/not-yet";
  const ProbeResult r = probe_machine(o);
  EXPECT_DOUBLE_EQ(r.memory.usable_gib, 16.0);
  EXPECT_TRUE(r.gpus.empty());
  bool warned = false;
  for (const auto& w : r.warnings) warned = warned || w.find("nvidia-smi.csv") != std::string::npos;
  EXPECT_TRUE(warned);
  ASSERT_TRUE(r.disk);  // measured at the nearest existing ancestor
  EXPECT_GT(r.disk->free_gib, 0);
  const auto j = to_json(r);
  EXPECT_EQ(j["memory"]["usable_gib"], 16.0);
  EXPECT_TRUE(j["memory"]["cgroup_limit_gib"].is_null());
  EXPECT_TRUE(j["gpus"].is_array());
}

}  // namespace
}  // namespace pf::agent
