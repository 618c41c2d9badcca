#include "agent/registration.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "agent/agent.h"
#include "agent/json_setting.h"
#include "agent/private_file.h"
#include "core/hearing.h"
#include "core/planner.h"
#include "core/text.h"
#include "market/backoff.h"
#include "util/hex.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kTokenHexChars = 64;

// 32 bytes from the OS in hex: the agent's own bearer token.
tl::expected<std::string, std::string> random_token_hex() {
  unsigned char bytes[32];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    return tl::unexpected(std::string("cannot read /dev/urandom for a token"));
  }
  return util::lower_hex(bytes, sizeof bytes);
}

bool is_token_hex(const std::string& text) {
  return util::is_lower_hex(text, kTokenHexChars);
}

}  // namespace

ManagerTerms parse_register_reply(const json& reply) {
  ManagerTerms terms;
  if (auto hb = setting<double>(reply, "heartbeat_s"); hb && *hb > 0) terms.heartbeat_s = *hb;
  if (reply.contains("prover") && reply["prover"].is_object()) {
    terms.prover_settings = reply["prover"];
  }
  terms.params_manifest =
      reply.contains("params") && !reply["params"].is_null() ? reply["params"] : json::array();
  terms.benchmark_input_offer = reply.value("benchmark_input", json(nullptr));
  if (reply.contains("machine") && reply["machine"].is_object()) {
    const int known = setting<int>(reply["machine"], "oom_partitions").value_or(0);
    if (known > 0 && known <= core::kMaxPlanPartitions) terms.machine_oom_partitions = known;
    if (reply["machine"].contains("memory_model")) {
      const json& mm = reply["machine"]["memory_model"];
      const double per = setting<double>(mm, "per_partition_gib").value_or(0);
      // Outside (0, 64] GiB per partition is not a memory model: ignored.
      if (std::isfinite(per) && per > 0 && per <= 64) terms.machine_per_partition_gib = per;
      terms.machine_memory_reason = setting<std::string>(mm, "reason").value_or("");
    }
  }
  if (reply.contains("benchmark")) {
    terms.max_samples = setting<int>(reply["benchmark"], "max_samples").value_or(0);
  }
  return terms;
}

tl::expected<std::string, std::string> load_or_create_agent_token(const std::string& state_dir,
                                                                  AgentLog& log) {
  const std::string path = state_dir + "/agent-token";
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::ifstream in(path);
    std::string token;
    std::getline(in, token);
    if (!is_token_hex(token)) {
      return tl::unexpected(path + " does not hold an agent token (64 hex digits); remove it " +
                            "only if this instance never registered");
    }
    // Someone loosened it: tighten rather than refuse (the token is ours either way).
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace,
                    ec);
    if (ec) log.line("warning: cannot make " + path + " private (chmod 600): " + ec.message());
    return token;
  }
  auto token = random_token_hex();
  if (!token) return token;
  if (auto w = write_private_file(path, *token + "\n"); !w) return tl::unexpected(w.error());
  return token;
}

std::optional<int> Registration::register_until_done(json body, ManagerTerms& terms,
                                                     const std::function<bool(double)>& pause,
                                                     double time_scale) {
  body_ = std::move(body);
  for (int attempt = 0;; ++attempt) {
    auto r = manager_.register_agent(body_);
    if (r) {
      manager_.set_token((*r)["token"].get<std::string>());
      const json& reply = *r;
      terms = parse_register_reply(reply);
      log_.line("registered as instance " +
                (reply.contains("instance_id") ? reply["instance_id"].dump() : std::string("?")) +
                " (heartbeat every " + core::fixed(terms.heartbeat_s, 1) + " s)");
      return std::nullopt;
    }
    const CallError& e = r.error();
    if (e.kind == CallError::Kind::Gone) {
      log_.line("the manager is destroying this instance: " + e.message);
      return kAgentStopped;
    }
    if (!e.retryable()) {
      log_.line("registration refused: " + e.message);
      return kAgentFailed;
    }
    const double delay =
        market::full_jitter_delay_s(std::min(attempt, 6), 1, core::kAgentRetryMaxS, rng_);
    log_.line("cannot register yet (" + e.message + "); retrying in " + core::fixed(delay, 1) +
              " s");
    if (!pause(delay * time_scale)) return kAgentStopped;
  }
}

void Registration::on_unauthorized(const CallError& e) {
  if (credentials_refused_) return;
  log_.line("the manager rejected our token (" + e.message + "); registering again with it");
  auto r = manager_.register_agent(body_);
  if (r) {
    manager_.set_token((*r)["token"].get<std::string>());
    log_.line("registered again with our token");
  } else if (r.error().kind == CallError::Kind::Gone) {
    request_stop_("the manager is destroying this instance");
  } else if (r.error().retryable()) {
    log_.line("re-registration failed, will retry on the next refusal: " + r.error().message);
  } else {
    credentials_refused_ = true;
    log_.line("error: the manager refused our token and our registration (" + r.error().message +
              "); stopping: this agent can no longer report for the instance");
    request_stop_("the manager refused our token and our registration");
  }
}

}  // namespace pf::agent
