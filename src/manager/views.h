// JSON views of the fleet's records: the one place that decides how a core type looks on the
// wire (operator API, CLI --json, dashboard). Credentials never appear: an InstanceRecord's
// secret and token hashes are left out on purpose.
#pragma once

#include <array>
#include <nlohmann/json.hpp>

#include "core/fleet.h"
#include "core/job.h"
#include "core/offer.h"
#include "core/ranking.h"
#include "manager/jobs_report.h"
#include "manager/manager.h"

namespace pf::manager {

// Every lifecycle state in lifecycle order, so summaries list states that have no instances.
inline constexpr std::array<core::InstanceState, 9> kAllInstanceStates{
    core::InstanceState::Renting,    core::InstanceState::Booting,
    core::InstanceState::Registered, core::InstanceState::FetchingParams,
    core::InstanceState::WarmingUp,  core::InstanceState::Benchmarking,
    core::InstanceState::Proving,    core::InstanceState::Destroying,
    core::InstanceState::Destroyed,
};

// Every Offer field under its struct name.
nlohmann::json to_json(const core::Offer& offer);
// {decision, rate, low, high, samples, break_even_rate, reason}
nlohmann::json to_json(const core::Verdict& verdict);
// Every field but secret_hash/token_hash. Unset optionals and deadline_at == 0 are null;
// plan_json is embedded as "plan" (null when empty).
nlohmann::json to_json(const core::InstanceRecord& record);
// data_json is embedded as "data".
nlohmann::json to_json(const core::InstanceEvent& event);
nlohmann::json to_json(const core::ProofSample& sample);
// The host key is flattened: machine_id, gpu_name, num_gpus.
nlohmann::json to_json(const core::BenchRun& run);
nlohmann::json to_json(const core::HostSummary& summary);
// evidence_json is embedded as "evidence"; expires_at null = until removed.
nlohmann::json to_json(const core::BadHost& entry);
// by_state lists every state (0 where none); cost_per_proof null when nothing is proving.
nlohmann::json to_json(const FleetSummary& summary);
// A gateway job as the operator sees it: every field, times as epoch seconds (0 = not yet →
// null), plus "timeliness" (core/job_latency.h) at `now`, "earned_usd" under `prices`, and
// "queue_wait_s" / "end_to_end_s" (null until known). Inputs and proofs stay on disk.
nlohmann::json to_json(const core::Job& job, double now, const core::PriceConfig& prices);
// The "jobs" section of GET /api/v1/fleet and the dashboard's summary (see docs).
nlohmann::json to_json(const JobsReport& report);
// The ranked-offer row of `proverfleet offers --json` and GET /api/v1/offers.
// A machine's history, as each offers row carries it ("did this machine fail before?").
nlohmann::json to_json(const core::MachineHistory& history);
nlohmann::json to_json(const core::RankedOffer& ranked);

// The fleet watch's findings: {checked_at, instances: [alert], fleet: [{kind, reason, since}]}
// where an alert is {instance_id, kind, drop_warranted, reason, since, acted}.
nlohmann::json to_json(const core::Alert& alert);
nlohmann::json to_json(const core::AlertsView& alerts);
// The hands-on part of an instance's detail (GET /api/v1/instances/{id}): "live" (the agent's
// last prover/GPU report, null before one), "ssh" ({commands, proxy_host, proxy_port,
// direct_host, direct_port}, null when the market said nothing), "alerts" (the instance's) and
// "pending_commands" (tuning not yet sent).
void add_hands_on(nlohmann::json& detail, Manager& manager, std::int64_t id);

// Parses stored JSON text for embedding; text that is not JSON is kept as a string, "" is null.
nlohmann::json embed_json_text(const std::string& text);

}  // namespace pf::manager
