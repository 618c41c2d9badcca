#include "agent/param_fetch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "agent/benchmark_input.h"
#include "core/text.h"

namespace pf::agent {
namespace {

using nlohmann::json;

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return core::fixed(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

std::string human_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const auto total = static_cast<long long>(s);
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", total / 3600, (total / 60) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", total / 60, total % 60);
  }
  return buf;
}

}  // namespace

void ParameterFetch::draw_progress_bar() {
  const auto s = progress_.snapshot(steady_seconds());
  if (s.total_bytes == 0) return;
  const double frac = static_cast<double>(s.done_bytes) / static_cast<double>(s.total_bytes);
  constexpr int kWidth = 30;
  const int filled = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
  std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '-') + "] ";
  bar += core::fixed(frac * 100, 1) + "% " + human_bytes(static_cast<double>(s.done_bytes)) +
         " / " + human_bytes(static_cast<double>(s.total_bytes)) + "  " +
         human_bytes(s.bytes_per_s) + "/s  ETA " + (s.eta_s ? human_duration(*s.eta_s) : "?");
  log_.draw_bar(bar);
}

json ParameterFetch::heartbeat_json() {
  if (!started_) return nullptr;
  const auto s = progress_.snapshot(steady_seconds());
  json out = {{"done", s.done_bytes},
              {"total", s.total_bytes},
              {"bytes_per_s", s.bytes_per_s},
              {"files_done", s.files_done},
              {"files_total", s.files_total}};
  if (s.eta_s) out["eta_s"] = *s.eta_s;
  return out;
}

tl::expected<FetchedInputs, std::string> ParameterFetch::fetch(const std::vector<ParamFile>& files,
                                                               const json& offer,
                                                               const ManagerClient& manager,
                                                               std::function<bool()> cancelled) {
  FetchOptions fo;
  fo.dir = options_.param_dir;
  fo.connections = std::max(1, options_.download_connections);
  fo.chunk_bytes = static_cast<std::uint64_t>(std::max(1, options_.download_chunk_mib)) << 20;
  fo.free_gib = options_.free_gib;
  fo.cancelled = std::move(cancelled);
  fo.log = [this](const std::string& line) { log_.line(line); };
  started_ = true;
  std::atomic<bool> fetch_done{false};
  std::thread bar;
  if (options_.progress_bar) {
    log_.begin_bar();
    bar = std::thread([&] {
      while (!fetch_done) {
        draw_progress_bar();
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    });
  }
  const double t0 = clock_.now();
  auto r = fetch_params(files, fo, progress_);
  fetch_done = true;
  if (bar.joinable()) {
    bar.join();
    draw_progress_bar();
    log_.end_bar();
  }
  if (!r) return tl::unexpected(r.error());
  auto input = fetch_benchmark_input_offered(offer, manager, fo);
  if (!input) return tl::unexpected(input.error());
  log_.line("parameters ready: " + std::to_string(files.size()) + " files, " +
            human_bytes(static_cast<double>(r->bytes)) + " (" +
            human_bytes(static_cast<double>(r->downloaded)) + " downloaded)");
  return FetchedInputs{files.size(), std::move(*r), std::move(*input), clock_.now() - t0};
}

tl::expected<std::string, std::string> ParameterFetch::fetch_benchmark_input_offered(
    const json& offer_json, const ManagerClient& manager, FetchOptions fo) {
  auto offer = parse_benchmark_input(offer_json, manager.base_url());
  if (!offer) return tl::unexpected("bad benchmark input from the manager: " + offer.error());
  if (!*offer) return std::string();
  fo.dir = options_.param_dir + "/benchmark-input";
  auto path = fetch_benchmark_input(**offer, fo, manager.authorization_header());
  if (!path) return tl::unexpected(path.error());
  log_.line("benchmark input ready: " + *path + " (" + (*offer)->file.digest + ")");
  return *path;
}

}  // namespace pf::agent
