#include "agent/probe.h"

#include <sched.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/process.h"
#include "core/text.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
constexpr double kGiB = 1024.0 * 1024 * 1024;
// cgroup v1 reports "no limit" as a page-rounded LONG_MAX; anything this large is no limit.
constexpr double kUnlimitedBytes = 1152921504606846976.0;  // 2^60

std::string under(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return r + path;
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<double> parse_number(const std::string& text) {
  const std::string t = core::trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// The value after `key` in "key value" lines (memory.events, memory.oom_control, meminfo).
std::optional<double> keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string k;
    words >> k;
    if (!k.empty() && k.back() == ':') k.pop_back();
    if (k != key) continue;
    double v = 0;
    if (words >> v) return v;
  }
  return std::nullopt;
}

// The cgroup path of this process for a controller ("" = the v2 unified line), from
// /proc/self/cgroup; "/" when unknown.
std::string self_cgroup_path(const std::string& root, const std::string& controller) {
  auto text = read_text(under(root, "/proc/self/cgroup"));
  if (!text) return "/";
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = core::trim(line.substr(b + 1));
    if (controller.empty()) {
      if (line.rfind("0::", 0) == 0) return path.empty() ? "/" : path;
      continue;
    }
    std::istringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ',')) {
      if (c == controller) return path.empty() ? "/" : path;
    }
  }
  return "/";
}

// This process's cgroup directory under `mount`: the path /proc/self/cgroup names when it
// exists there (no cgroup namespace), else the mount itself (namespaced container).
std::string own_dir(const std::string& mount, const std::string& self_path) {
  if (self_path != "/") {
    const std::string candidate = mount + self_path;
    std::error_code ec;
    if (fs::is_directory(candidate, ec)) return candidate;
  }
  return mount;
}

// Directories from `dir` up to `mount` inclusive: a limit anywhere above applies too.
std::vector<std::string> up_to(const std::string& dir, const std::string& mount) {
  std::vector<std::string> out;
  fs::path d(dir);
  const fs::path top(mount);
  for (int guard = 0; guard < 64; ++guard) {
    out.push_back(d.string());
    if (d == top || !d.has_parent_path() || d.parent_path() == d) break;
    if (d.string().size() <= top.string().size()) break;
    d = d.parent_path();
  }
  return out;
}

std::string controller_mount_v1(const std::string& root, const std::vector<std::string>& names,
                                const std::string& marker_file) {
  for (const auto& n : names) {
    const std::string dir = under(root, "/sys/fs/cgroup/" + n);
    std::error_code ec;
    if (fs::exists(dir + "/" + marker_file, ec)) return dir;
  }
  return "";
}

bool is_v2(const std::string& root) {
  std::error_code ec;
  return fs::exists(under(root, "/sys/fs/cgroup/cgroup.controllers"), ec);
}

int count_cpu_list(const std::string& list) {
  int count = 0;
  std::istringstream in(list);
  std::string part;
  while (std::getline(in, part, ',')) {
    part = core::trim(part);
    if (part.empty()) continue;
    const auto dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        std::stoi(part);
        ++count;
      } else {
        const int a = std::stoi(part.substr(0, dash));
        const int b = std::stoi(part.substr(dash + 1));
        if (b >= a) count += b - a + 1;
      }
    } catch (const std::exception&) {
      return 0;
    }
  }
  return count;
}

std::string gib_text(double v) {
  std::ostringstream ss;
  ss.setf(std::ios::fixed);
  ss.precision(1);
  ss << v << " GiB";
  return ss.str();
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) out.push_back(core::trim(field));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

double field_number(const std::string& f) {
  if (f.empty() || f.front() == '[') return 0;  // [N/A], [Not Supported]
  return parse_number(f).value_or(0);
}

}  // namespace

const char* const kNvidiaSmiQuery =
    "index,name,memory.total,memory.used,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,clocks.sm,clocks.max.sm,utilization.gpu,temperature.gpu,"
    "power.draw,clocks_throttle_reasons.active";

tl::expected<MemoryInfo, std::string> probe_memory(const std::string& root) {
  MemoryInfo m;
  if (auto text = read_text(under(root, "/proc/meminfo"))) {
    if (auto kb = keyed_value(*text, "MemTotal")) m.meminfo_total_gib = *kb * 1024 / kGiB;
    if (auto kb = keyed_value(*text, "MemAvailable")) m.meminfo_available_gib = *kb * 1024 / kGiB;
  }
  std::vector<std::string> dirs;
  std::string file;
  if (is_v2(root)) {
    m.cgroup_version = "v2";
    const std::string mount = under(root, "/sys/fs/cgroup");
    m.cgroup_dir = own_dir(mount, self_cgroup_path(root, ""));
    dirs = up_to(m.cgroup_dir, mount);
    file = "memory.max";
  } else if (auto mount = controller_mount_v1(root, {"memory"}, "memory.limit_in_bytes");
             !mount.empty()) {
    m.cgroup_version = "v1";
    m.cgroup_dir = own_dir(mount, self_cgroup_path(root, "memory"));
    dirs = up_to(m.cgroup_dir, mount);
    file = "memory.limit_in_bytes";
  }
  for (const auto& d : dirs) {
    auto text = read_text(d + "/" + file);
    if (!text) continue;
    auto bytes = parse_number(*text);  // "max" (v2, no limit) does not parse
    if (!bytes || *bytes >= kUnlimitedBytes) continue;
    const double g = *bytes / kGiB;
    if (!m.cgroup_limit_gib || g < *m.cgroup_limit_gib) m.cgroup_limit_gib = g;
  }
  if (m.cgroup_limit_gib && (!m.meminfo_total_gib || *m.cgroup_limit_gib <= *m.meminfo_total_gib)) {
    m.usable_gib = *m.cgroup_limit_gib;
    m.usable_source =
        "cgroup " + m.cgroup_version + " " + file + " (" + gib_text(*m.cgroup_limit_gib) + ")";
  } else if (m.meminfo_total_gib) {
    m.usable_gib = *m.meminfo_total_gib;
    m.usable_source = std::string("/proc/meminfo MemTotal (") + gib_text(*m.meminfo_total_gib) +
                      (m.cgroup_limit_gib ? ", below the cgroup limit)" : ", no cgroup limit)");
  } else {
    return tl::unexpected("cannot read memory: no cgroup limit and no " +
                          under(root, "/proc/meminfo"));
  }
  return m;
}

CpuInfo probe_cpu(const std::string& root, std::vector<std::string>* warnings) {
  CpuInfo c;
  if (auto text = read_text(under(root, "/proc/self/status"))) {
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        c.affinity_cpus = count_cpu_list(line.substr(18));
      }
    }
  }
  if (c.affinity_cpus <= 0 && (root.empty() || root == "/")) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) c.affinity_cpus = CPU_COUNT(&set);
  }
  if (c.affinity_cpus <= 0) {
    c.affinity_cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (warnings) {
      warnings->push_back("no CPU affinity list found; assuming " +
                          std::to_string(c.affinity_cpus) + " CPUs");
    }
  }
  auto take_quota = [&](double quota, double period) {
    if (quota <= 0 || period <= 0) return;
    const double cpus = quota / period;
    if (!c.quota_cpus || cpus < *c.quota_cpus) c.quota_cpus = cpus;
  };
  if (is_v2(root)) {
    const std::string mount = under(root, "/sys/fs/cgroup");
    for (const auto& d : up_to(own_dir(mount, self_cgroup_path(root, "")), mount)) {
      auto text = read_text(d + "/cpu.max");
      if (!text) continue;
      std::istringstream in(*text);
      std::string quota, period;
      in >> quota >> period;
      if (quota == "max") continue;
      auto q = parse_number(quota);
      auto p = parse_number(period);
      if (q && p) take_quota(*q, *p);
    }
  } else if (auto mount = controller_mount_v1(root, {"cpu,cpuacct", "cpu", "cpuacct,cpu"},
                                              "cpu.cfs_quota_us");
             !mount.empty()) {
    for (const auto& d : up_to(own_dir(mount, self_cgroup_path(root, "cpu")), mount)) {
      auto q = read_text(d + "/cpu.cfs_quota_us");
      auto p = read_text(d + "/cpu.cfs_period_us");
      if (!q || !p) continue;
      auto qv = parse_number(*q);
      auto pv = parse_number(*p);
      if (qv && pv) take_quota(*qv, *pv);
    }
  }
  if (c.quota_cpus && *c.quota_cpus < c.affinity_cpus) {
    c.usable = *c.quota_cpus;
    c.usable_source = "cgroup cpu quota";
  } else {
    c.usable = c.affinity_cpus;
    c.usable_source = "affinity mask";
  }
  return c;
}

tl::expected<std::vector<GpuInfo>, std::string> parse_nvidia_smi_csv(const std::string& text) {
  std::vector<GpuInfo> gpus;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    line = core::trim(line);
    if (line.empty()) continue;
    const auto f = split_csv_line(line);
    if (f.size() != 13) {
      return tl::unexpected("nvidia-smi output line " + std::to_string(line_no) + " has " +
                            std::to_string(f.size()) + " fields, expected 13 (" +
                            std::string(kNvidiaSmiQuery) + "): '" + line + "'");
    }
    GpuInfo g;
    auto index = parse_number(f[0]);
    if (!index) {
      return tl::unexpected("nvidia-smi output line " + std::to_string(line_no) +
                            ": index is not a number: '" + f[0] + "'");
    }
    g.index = static_cast<int>(*index);
    g.name = f[1];
    g.memory_total_mib = field_number(f[2]);
    g.memory_used_mib = field_number(f[3]);
    g.pcie_gen = static_cast<int>(field_number(f[4]));
    g.pcie_gen_max = static_cast<int>(field_number(f[5]));
    g.pcie_width = static_cast<int>(field_number(f[6]));
    g.sm_clock_mhz = field_number(f[7]);
    g.sm_clock_max_mhz = field_number(f[8]);
    g.util_pct = field_number(f[9]);
    g.temp_c = field_number(f[10]);
    g.power_w = field_number(f[11]);
    const std::string& mask_text = f[12];
    if (!mask_text.empty() && mask_text.front() != '[') {
      char* end = nullptr;
      const unsigned long long mask = std::strtoull(mask_text.c_str(), &end, 16);
      if (end == mask_text.c_str() || *end != '\0') {
        return tl::unexpected("nvidia-smi output line " + std::to_string(line_no) +
                              ": throttle reasons are not a hex mask: '" + mask_text + "'");
      }
      g.power_capped = (mask & 0x4) != 0;
      if (mask & 0x8) g.throttle.push_back("hw_slowdown");
      if (mask & 0x20) g.throttle.push_back("sw_thermal_slowdown");
      if (mask & 0x40) g.throttle.push_back("hw_thermal_slowdown");
      if (mask & 0x80) g.throttle.push_back("hw_power_brake_slowdown");
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

tl::expected<std::vector<GpuInfo>, std::string> query_gpus(const ProbeOptions& options) {
  if (!options.root.empty() && options.root != "/") {
    const std::string path = under(options.root, "/nvidia-smi.csv");
    auto text = read_text(path);
    if (!text) return tl::unexpected("no recorded GPU query at " + path);
    return parse_nvidia_smi_csv(*text);
  }
  if (options.nvidia_smi.empty()) return std::vector<GpuInfo>{};
  auto query = [&](const std::string& fields) {
    return run_capture(
        {options.nvidia_smi, "--query-gpu=" + fields, "--format=csv,noheader,nounits"},
        std::chrono::seconds(20));
  };
  auto run = query(kNvidiaSmiQuery);
  // Newer drivers call the throttle reasons "clock event reasons"; ask again under that name
  // if this one refuses the old one.
  if (run && run->status.code != 0 &&
      (run->out + run->err).find("clocks_throttle_reasons") != std::string::npos) {
    std::string fields = kNvidiaSmiQuery;
    fields.replace(fields.find("clocks_throttle_reasons"), 23, "clocks_event_reasons");
    run = query(fields);
  }
  if (!run) return tl::unexpected(run.error());
  if (run->status.code != 0) {
    return tl::unexpected(options.nvidia_smi + " failed (" + run->status.describe() +
                          "): " + core::trim(run->err.empty() ? run->out : run->err));
  }
  return parse_nvidia_smi_csv(run->out);
}

std::optional<DiskInfo> probe_disk(const std::string& path) {
  if (path.empty()) return std::nullopt;
  fs::path p(path);
  std::error_code ec;
  // The directory may not exist yet; its nearest existing ancestor has the same file system.
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  struct statvfs st {};
  if (statvfs(p.c_str(), &st) != 0) return std::nullopt;
  return DiskInfo{path, static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize) / kGiB};
}

std::optional<std::int64_t> read_oom_kills(const std::string& root) {
  if (is_v2(root)) {
    const std::string mount = under(root, "/sys/fs/cgroup");
    auto text = read_text(own_dir(mount, self_cgroup_path(root, "")) + "/memory.events");
    if (!text) return std::nullopt;
    if (auto v = keyed_value(*text, "oom_kill")) return static_cast<std::int64_t>(*v);
    return std::nullopt;
  }
  const auto mount = controller_mount_v1(root, {"memory"}, "memory.limit_in_bytes");
  if (mount.empty()) return std::nullopt;
  auto text = read_text(own_dir(mount, self_cgroup_path(root, "memory")) + "/memory.oom_control");
  if (!text) return std::nullopt;
  if (auto v = keyed_value(*text, "oom_kill")) return static_cast<std::int64_t>(*v);
  return std::nullopt;
}

std::optional<double> read_cgroup_peak_gib(const std::string& root) {
  std::optional<std::string> text;
  if (is_v2(root)) {
    const std::string mount = under(root, "/sys/fs/cgroup");
    text = read_text(own_dir(mount, self_cgroup_path(root, "")) + "/memory.peak");
  } else if (auto mount = controller_mount_v1(root, {"memory"}, "memory.limit_in_bytes");
             !mount.empty()) {
    text =
        read_text(own_dir(mount, self_cgroup_path(root, "memory")) + "/memory.max_usage_in_bytes");
  }
  if (!text) return std::nullopt;
  auto bytes = parse_number(*text);
  if (!bytes) return std::nullopt;
  return *bytes / kGiB;
}

std::optional<double> process_peak_rss_gib(int pid) {
  auto text = read_text("/proc/" + std::to_string(pid) + "/status");
  if (!text) return std::nullopt;
  auto kb = keyed_value(*text, "VmHWM");
  if (!kb) return std::nullopt;
  return *kb * 1024 / kGiB;
}

ProbeResult probe_machine(const ProbeOptions& options) {
  ProbeResult r;
  if (auto m = probe_memory(options.root)) {
    r.memory = *m;
  } else {
    r.warnings.push_back(m.error());
  }
  r.cpu = probe_cpu(options.root, &r.warnings);
  if (auto g = query_gpus(options)) {
    r.gpus = std::move(*g);
    if (r.gpus.empty() && !options.nvidia_smi.empty()) r.warnings.push_back("no GPU found");
  } else {
    r.warnings.push_back("GPU query: " + g.error());
  }
  r.disk = probe_disk(options.disk_path);
  if (!options.disk_path.empty() && !r.disk) {
    r.warnings.push_back("cannot read free space at " + options.disk_path);
  }
  return r;
}

nlohmann::json to_json(const ProbeResult& p) {
  using nlohmann::json;
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json gpus = json::array();
  for (const auto& g : p.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"memory_total_mib", g.memory_total_mib},
                    {"memory_used_mib", g.memory_used_mib},
                    {"pcie_gen", g.pcie_gen},
                    {"pcie_gen_max", g.pcie_gen_max},
                    {"pcie_width", g.pcie_width},
                    {"sm_clock_mhz", g.sm_clock_mhz},
                    {"sm_clock_max_mhz", g.sm_clock_max_mhz},
                    {"util", g.util_pct},
                    {"temp_c", g.temp_c},
                    {"power_w", g.power_w},
                    {"throttle", g.throttle},
                    {"power_capped", g.power_capped}});
  }
  json out = {
      {"memory",
       {{"usable_gib", p.memory.usable_gib},
        {"source", p.memory.usable_source},
        {"cgroup_version", p.memory.cgroup_version},
        {"cgroup_limit_gib", opt(p.memory.cgroup_limit_gib)},
        {"meminfo_total_gib", opt(p.memory.meminfo_total_gib)},
        {"meminfo_available_gib", opt(p.memory.meminfo_available_gib)}}},
      {"cpu",
       {{"usable", p.cpu.usable},
        {"source", p.cpu.usable_source},
        {"affinity_cpus", p.cpu.affinity_cpus},
        {"quota_cpus", opt(p.cpu.quota_cpus)}}},
      {"gpus", gpus},
      {"disk",
       p.disk ? json{{"path", p.disk->path}, {"free_gib", p.disk->free_gib}} : json(nullptr)},
      {"warnings", p.warnings},
  };
  return out;
}

nlohmann::json heartbeat_json(const GpuInfo& g) {
  return {{"util", std::clamp(g.util_pct, 0.0, 100.0)},
          {"memory_used_mib", std::max(0.0, g.memory_used_mib)},
          {"temp_c", std::clamp(g.temp_c, -100.0, 200.0)},
          {"sm_clock_mhz", std::max(0.0, g.sm_clock_mhz)},
          {"throttle", g.throttle}};
}

}  // namespace pf::agent
