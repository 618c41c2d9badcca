// What this machine really offers the prover. Vast's `cpu_ram` is the offer's share and
// /proc/meminfo inside a container shows the whole host; neither is the limit the kernel
// enforces. The probe reads the cgroup (v2 memory.max / v1 memory.limit_in_bytes, walking up
// the hierarchy), the CPU affinity mask and quota, nvidia-smi and the free disk space.
//
// Every path is read under a configurable root so that tests (and market-sim's simulated
// instances) use fixture trees: <root>/proc/meminfo, <root>/proc/self/cgroup,
// <root>/proc/self/status, <root>/sys/fs/cgroup/..., and <root>/nvidia-smi.csv (recorded
// output of the query below) in place of running nvidia-smi when the root is not "/".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

namespace pf::agent {

struct ProbeOptions {
  std::string root = "/";
  std::string nvidia_smi = "nvidia-smi";  // empty: do not look for GPUs with nvidia-smi
  std::string disk_path;                  // free space checked here; empty: skipped
};

struct MemoryInfo {
  std::string cgroup_version = "none";      // "v2", "v1" or "none"
  std::string cgroup_dir;                   // where the limit was read (under the root)
  std::optional<double> cgroup_limit_gib;   // nullopt: unlimited or no cgroup
  std::optional<double> meminfo_total_gib;  // /proc/meminfo MemTotal
  std::optional<double> meminfo_available_gib;
  double usable_gib = 0;  // the smallest real limit
  std::string usable_source;
};

struct CpuInfo {
  int affinity_cpus = 0;             // CPUs in the affinity mask
  std::optional<double> quota_cpus;  // cpu.max / cfs quota ÷ period; nullopt: no quota
  double usable = 0;
  std::string usable_source;
};

struct GpuInfo {
  int index = 0;
  std::string name;
  double memory_total_mib = 0;
  double memory_used_mib = 0;
  int pcie_gen = 0;
  int pcie_gen_max = 0;
  int pcie_width = 0;
  double sm_clock_mhz = 0;
  double sm_clock_max_mhz = 0;
  double util_pct = 0;
  double temp_c = 0;
  double power_w = 0;
  // Active slowdowns that cost proving speed (thermal, hardware, power brake). The routine
  // power-cap and idle reasons are not throttling in this sense and stay out.
  std::vector<std::string> throttle;
  bool power_capped = false;
};

struct DiskInfo {
  std::string path;
  double free_gib = 0;
};

struct ProbeResult {
  MemoryInfo memory;
  CpuInfo cpu;
  std::vector<GpuInfo> gpus;
  std::optional<DiskInfo> disk;
  std::vector<std::string> warnings;  // what could not be read and what was assumed
};

ProbeResult probe_machine(const ProbeOptions& options);

// Fails only when neither a cgroup limit nor /proc/meminfo can be read.
tl::expected<MemoryInfo, std::string> probe_memory(const std::string& root);
CpuInfo probe_cpu(const std::string& root, std::vector<std::string>* warnings = nullptr);

// The fields nvidia-smi is asked for, in order (--query-gpu=...).
extern const char* const kNvidiaSmiQuery;
// Runs `nvidia-smi --query-gpu=<kNvidiaSmiQuery> --format=csv,noheader,nounits`, or reads
// <root>/nvidia-smi.csv when the root is not "/".
tl::expected<std::vector<GpuInfo>, std::string> query_gpus(const ProbeOptions& options);
// Parses that output; "[N/A]" and "[Not Supported]" read as 0. Errors name the line.
tl::expected<std::vector<GpuInfo>, std::string> parse_nvidia_smi_csv(const std::string& text);

std::optional<DiskInfo> probe_disk(const std::string& path);

// Counters the agent re-reads to tell an OOM kill from a crash and to compare the observed
// peak with the model: the cgroup's oom_kill count (v2 memory.events, v1 memory.oom_control)
// and its peak usage (v2 memory.peak, v1 memory.max_usage_in_bytes).
std::optional<std::int64_t> read_oom_kills(const std::string& root);
std::optional<double> read_cgroup_peak_gib(const std::string& root);

// Peak resident memory of a process (VmHWM in /proc/<pid>/status), GiB.
std::optional<double> process_peak_rss_gib(int pid);

nlohmann::json to_json(const ProbeResult& probe);
// One GPU as a heartbeat reports it: util, memory_used_mib, temp_c, sm_clock_mhz, throttle.
nlohmann::json heartbeat_json(const GpuInfo& gpu);

}  // namespace pf::agent
