#include "manager/views.h"

#include "util/bounded_json.h"

namespace pf::manager {

using nlohmann::json;

namespace {

json optional_number(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

json embed_json_text(const std::string& text) {
  if (text.empty()) return nullptr;
  // Stored text came from a bounded parse once, but a row may be older than the bounds.
  auto parsed = util::parse_json(text);
  if (!parsed) return text;
  return std::move(*parsed);
}

json to_json(const core::Offer& o) {
  return {
      {"id", o.id},
      {"machine_id", o.machine_id},
      {"host_id", o.host_id},
      {"gpu_name", o.gpu_name},
      {"num_gpus", o.num_gpus},
      {"gpu_ram_gib", o.gpu_ram_gib},
      {"gpu_total_ram_gib", o.gpu_total_ram_gib},
      {"cpu_name", o.cpu_name},
      {"cpu_cores", o.cpu_cores},
      {"cpu_cores_effective", o.cpu_cores_effective},
      {"cpu_ram_gib", o.cpu_ram_gib},
      {"pcie_bw_gbs", o.pcie_bw_gbs},
      {"pci_gen", o.pci_gen},
      {"inet_down_mbps", o.inet_down_mbps},
      {"inet_up_mbps", o.inet_up_mbps},
      {"inet_down_cost_per_gb", o.inet_down_cost_per_gb},
      {"inet_up_cost_per_gb", o.inet_up_cost_per_gb},
      {"disk_space_gb", o.disk_space_gb},
      {"cuda_max_good", o.cuda_max_good},
      {"compute_cap", o.compute_cap},
      {"reliability", o.reliability},
      {"verified", o.verified},
      {"geolocation", o.geolocation},
      {"dph_total", o.dph_total},
      {"dph_base", o.dph_base},
      {"storage_cost_gb_month", o.storage_cost_gb_month},
      {"storage_total_cost_per_hour", o.storage_total_cost_per_hour},
      {"dlperf", o.dlperf},
      {"usable_ram_gib", o.usable_ram_gib},
      {"usable_cores", o.usable_cores},
      {"data_flags", o.data_flags},
  };
}

json to_json(const core::Verdict& v) {
  return {
      {"decision", core::to_string(v.decision)},
      {"rate", v.rate},
      {"low", v.low},
      {"high", v.high},
      {"samples", v.samples},
      {"break_even_rate", v.break_even_rate},
      {"reason", v.reason},
  };
}

json to_json(const core::InstanceRecord& r) {
  return {
      {"id", r.id},
      {"deployment_id", r.deployment_id},
      {"market_id", r.market_id ? json(*r.market_id) : json(nullptr)},
      {"state", core::to_string(r.state)},
      {"created_at", r.created_at},
      {"state_since", r.state_since},
      {"deadline_at", r.deadline_at > 0 ? json(r.deadline_at) : json(nullptr)},
      {"destroy_reason", r.destroy_reason},
      // Typed, for scripts: why it closed without parsing the reason text (null while live).
      {"close_cause", r.close_cause ? json(core::to_string(*r.close_cause)) : json(nullptr)},
      {"destroyed_at", optional_number(r.destroyed_at)},
      {"last_heartbeat_at", r.last_heartbeat_at},
      {"market_status", r.market_status},
      {"market_status_since", r.market_status_since},
      {"market_stopped_s", r.market_stopped_s},
      {"market_stops", r.market_stops},
      {"bid_price", r.bid_price ? json(*r.bid_price) : json(nullptr)},
      {"params_done_bytes", r.params_done_bytes},
      {"params_total_bytes", r.params_total_bytes},
      {"params_rate_bps", r.params_rate_bps},
      {"prover_crashes", r.prover_crashes},
      {"ooms", r.ooms},
      {"oom_partitions", r.oom_partitions},  // smallest plan killed for memory (0: none)
      {"gpu_throttled", r.gpu_throttled},    // the agent ever reported a throttle
      {"proofs_benchmark", r.proofs_benchmark},
      {"proofs_production", r.proofs_production},
      {"gpu_util", r.gpu_util},
      {"peak_memory_gib", r.peak_memory_gib},
      {"spend_usd", r.spend_usd},  // total; the storage and bandwidth parts below, compute the rest
      {"storage_spend_usd", r.storage_spend_usd},
      {"bandwidth_spend_usd", r.bandwidth_spend_usd},
      {"disk_gb", r.disk_gb},
      {"billed_until", r.billed_until},
      {"verdict", r.verdict ? to_json(*r.verdict) : json(nullptr)},
      {"plan", embed_json_text(r.plan_json)},
      {"origin", r.origin},
      {"offer", to_json(r.offer)},
  };
}

json to_json(const core::InstanceEvent& e) {
  return {
      {"id", e.id},     {"instance_id", e.instance_id}, {"at", e.at},
      {"kind", e.kind}, {"message", e.message},         {"data", embed_json_text(e.data_json)},
  };
}

json to_json(const core::ProofSample& s) {
  return {
      {"instance_id", s.instance_id},
      {"seq", s.seq},
      {"at", s.at},
      {"seconds", s.seconds},
      {"gpu_ms", s.gpu_ms},
      {"queue_ms", s.queue_ms},
      {"phase", core::to_string(s.phase)},
  };
}

json to_json(const core::BenchRun& run) {
  return {
      {"id", run.id},
      {"machine_id", run.host.machine_id},
      {"gpu_name", run.host.gpu_name},
      {"num_gpus", run.host.num_gpus},
      {"instance_id", run.instance_id},
      {"at", run.at},
      {"rate", run.rate},
      {"low", run.low},
      {"high", run.high},
      {"samples", run.samples},
      {"kind", run.kind},
      {"contended", run.contended},
      {"throttled", run.throttled},
      {"plan", embed_json_text(run.plan_json)},
  };
}

json to_json(const core::HostSummary& s) {
  return {
      {"machine_id", s.host.machine_id},
      {"gpu_name", s.host.gpu_name},
      {"num_gpus", s.host.num_gpus},
      {"runs", s.runs},
      {"median", s.median},
      {"p10", s.p10},
      {"latest", s.latest},
      {"ewma", s.ewma},
      {"last_at", s.last_at},
  };
}

json to_json(const core::BadHost& b) {
  return {
      {"machine_id", b.machine_id},
      {"reason", b.reason},
      {"evidence", embed_json_text(b.evidence_json)},
      {"added_at", b.added_at},
      {"expires_at", optional_number(b.expires_at)},
      {"strikes", b.strikes},
      {"source", b.source},
  };
}

json to_json(const FleetSummary& s) {
  json by_state = json::object();
  for (auto state : kAllInstanceStates) by_state[core::to_string(state)] = 0;
  for (const auto& [name, count] : s.by_state) by_state[name] = count;
  return {
      {"by_state", by_state},
      {"proofs_per_hour", s.proofs_per_hour},
      {"dollars_per_hour", s.dollars_per_hour},
      {"cost_per_proof", optional_number(s.cost_per_proof)},
      {"profit_per_hour", s.profit_per_hour},
      // Which revenue profit_per_hour counts: "proofs_measured" (no gateway jobs yet: measured
      // rates x revenue per proof, proofs nobody asked for) or "jobs_delivered".
      {"profit_basis", core::to_string(s.profit_basis)},
      {"revenue_per_hour", s.revenue_per_hour},
      {"profit_reason", s.profit_reason},
      {"spend_usd", s.spend_usd},
      {"proofs", s.proofs},
      {"terms",
       {{"bid_instances", s.bid_instances},
        {"on_demand_instances", s.on_demand_instances},
        {"market_stopped", s.market_stopped},
        {"market_stops", s.market_stops},
        {"storage_usd_per_hour", s.storage_usd_per_hour}}},
      {"hearing",
       {{"judging_silence", s.hearing.may_judge_silence},
        {"cause", core::to_string(s.hearing.cause)},
        {"reason", s.hearing.reason},
        {"listening_since", s.hearing.listening_since},
        {"agents_expected", s.hearing.agents_expected},
        {"agents_silent", s.hearing.agents_silent}}},
  };
}

namespace {

json time_or_null(double at) {
  return at > 0 ? json(at) : json(nullptr);
}

json kind_counts(const std::map<core::JobKind, int>& counts) {
  json out = json::object();
  for (auto kind : core::kAllJobKinds) {
    auto it = counts.find(kind);
    out[core::to_string(kind)] = it == counts.end() ? 0 : it->second;
  }
  return out;
}

json quantiles(const core::LatencyQuantiles& q) {
  return {{"count", q.count}, {"p50", optional_number(q.p50)}, {"p95", optional_number(q.p95)}};
}

json prices_json(const core::PriceConfig& prices) {
  json usd = json::object();
  for (auto kind : core::kAllJobKinds) {
    usd[core::to_string(kind)] = optional_number(core::price_usd(prices, kind));
  }
  return {{"currency", core::to_string(prices.currency)},
          {"fil_usd", prices.fil_usd > 0 ? json(prices.fil_usd) : json(nullptr)},
          {"usd_per_proof", usd}};
}

}  // namespace

json to_json(const core::Job& j, double now, const core::PriceConfig& prices) {
  return {
      {"id", j.id},
      {"client", j.client},
      {"request_id", j.request_id},
      {"kind", core::to_string(j.kind)},
      {"priority", j.priority},
      {"state", core::to_string(j.state)},
      {"input_digest", j.input_digest},
      {"input_bytes", j.input_bytes},
      {"attempts", j.attempts},
      {"instance_id", j.instance_id ? json(*j.instance_id) : json(nullptr)},
      {"lease_expires_at",
       core::is_leased(j.state) ? time_or_null(j.lease_expires_at) : json(nullptr)},
      // Hedged proving: the second instance running a copy of this attempt, while it does.
      {"hedge_instance_id", core::is_leased(j.state) && j.hedge_instance_id
                                ? json(*j.hedge_instance_id)
                                : json(nullptr)},
      {"submitted_at", j.submitted_at},
      {"deadline_at", time_or_null(j.deadline_at)},
      {"assigned_at", time_or_null(j.assigned_at)},
      {"started_at", time_or_null(j.started_at)},
      {"finished_at", time_or_null(j.finished_at)},
      {"delivered_at", time_or_null(j.delivered_at)},
      {"proof_digest", j.proof_digest},
      {"error", j.error},
      {"avoid_instances", j.avoid_instances},
      {"rejections", j.rejections},
      {"prove_ms", j.prove_ms},
      {"gpu_ms", j.gpu_ms},
      {"queue_ms", j.queue_ms},
      {"queue_wait_s", optional_number(core::queue_wait_s(j))},
      {"end_to_end_s", optional_number(core::end_to_end_s(j))},
      {"timeliness", core::to_string(core::job_timeliness(j, now).timeliness)},
      {"earned_usd", core::job_revenue_usd(j, prices)},
  };
}

json to_json(const JobsReport& r) {
  json by_state = json::object();
  for (auto state : {core::JobState::Queued, core::JobState::Assigned, core::JobState::Proving}) {
    auto it = r.open_by_state.find(state);
    by_state[core::to_string(state)] = it == r.open_by_state.end() ? 0 : it->second;
  }
  json in_flight = json::object();  // keys are instance ids (JSON object keys are strings)
  for (const auto& [instance, count] : r.in_flight_by_instance) {
    in_flight[std::to_string(instance)] = count;
  }
  const auto& l = r.latency;
  const auto& m = r.money;
  return {
      {"at", r.at},
      {"window", {{"since", r.since}, {"until", r.at}, {"truncated", r.truncated}}},
      {"has_jobs", r.has_jobs},
      {"open", by_state},
      {"queued_by_kind", kind_counts(r.queued_by_kind)},
      {"in_progress_by_kind", kind_counts(r.in_progress_by_kind)},
      {"completed", r.completed},
      {"failed", r.failed},
      {"cancelled", r.cancelled},
      {"arrivals_last_hour", r.arrivals_last_hour},
      {"in_flight_by_instance", in_flight},
      {"queue_wait_s", quantiles(l.queue_wait_s)},
      {"end_to_end_s", quantiles(l.end_to_end_s)},
      {"oldest_queued_s", l.oldest_queued_s},
      {"on_time", l.on_time},
      {"late", l.late},
      {"missed", l.missed},
      {"on_time_share", optional_number(l.on_time_share)},
      {"revenue_usd", m.revenue_usd},
      {"revenue_per_hour", m.revenue_per_hour},
      {"delivered_on_time", m.delivered_on_time},
      {"delivered_late", m.delivered_late},
      {"delivered_unpriced", m.delivered_unpriced},
      {"spend_usd", m.spend_usd},
      {"realised_cost_per_proof", optional_number(m.realised_cost_per_proof)},
      {"idle_instance_hours", m.idle_hours},
      {"prices", prices_json(r.prices)},
  };
}

json to_json(const core::MachineHistory& h) {
  return {
      {"machine_id", h.machine_id},
      {"rentals", h.rentals},
      {"runs", h.runs},
      {"median_rate", optional_number(h.median_rate)},
      {"last_verdict", h.last_verdict},
      {"last_verdict_reason", h.last_verdict_reason},
      {"last_at", h.last_at > 0 ? json(h.last_at) : json(nullptr)},
      {"ooms", h.ooms},
      {"crashes", h.crashes},
      {"bad_host", h.bad_host ? to_json(*h.bad_host) : json(nullptr)},
  };
}

json to_json(const core::RankedOffer& r) {
  const auto& o = r.offer;
  const auto& p = r.prediction;
  const auto& v = r.valuation;
  json reasons = p.reasons;
  for (const auto& s : v.reasons) reasons.push_back(s);
  return {
      {"id", o.id},
      {"machine_id", o.machine_id},
      {"host_id", o.host_id},
      {"gpu_name", o.gpu_name},
      {"num_gpus", o.num_gpus},
      {"dph_total", o.dph_total},
      {"usable_ram_gib", o.usable_ram_gib},
      {"usable_cores", o.usable_cores},
      {"geolocation", o.geolocation},
      {"reliability", o.reliability},
      {"predicted_rate", p.rate},
      {"predicted_rate_low", p.low},
      {"predicted_rate_high", p.high},
      {"prediction_source", p.source},
      {"partitions", p.partitions},
      {"partitions_full", p.partitions_full},
      // One break-even everywhere (core/break_even.h): the objective's rate, which verdicts,
      // deadlines and the autopilot use; min_rate is the same figure under its old name.
      {"min_rate", v.min_rate},
      {"break_even_rate", r.break_even.rate},
      {"break_even_objective", r.break_even.objective()},
      {"revenue_break_even_rate", r.break_even.revenue_rate},
      {"target_break_even_rate", r.break_even.target_rate},
      {"break_evens_differ", r.break_even.differ()},
      {"cpu_name", o.cpu_name},
      {"our_others_on_machine", r.our_others_on_machine},
      {"download_fraction", r.download_fraction},
      {"measured_download_mbps", optional_number(r.measured_download_mbps)},
      {"history", to_json(r.history)},
      {"setup_hours", v.setup_hours},
      {"setup_cost_usd", v.setup_cost_usd},
      {"expected_cost_per_proof", optional_number(v.expected_cost_per_proof)},
      {"expected_profit_per_hour", v.expected_profit_per_hour},
      {"reasons", reasons},
      {"data_flags", o.data_flags},
  };
}

json to_json(const core::Alert& a) {
  return {{"instance_id", a.instance_id},
          {"kind", core::to_string(a.kind)},
          {"drop_warranted", a.drop_warranted},
          {"reason", a.reason},
          {"since", a.since},
          {"acted", a.acted}};
}

json to_json(const core::AlertsView& alerts) {
  json instances = json::array();
  for (const auto& a : alerts.instances) instances.push_back(to_json(a));
  json fleet = json::array();
  for (const auto& f : alerts.fleet) {
    fleet.push_back({{"kind", f.kind}, {"reason", f.reason}, {"since", f.since}});
  }
  return {{"checked_at", alerts.checked_at}, {"instances", instances}, {"fleet", fleet}};
}

void add_hands_on(json& detail, Manager& manager, std::int64_t id) {
  if (const auto live = manager.live_status(id)) {
    detail["live"] = {{"at", live->at}, {"prover", live->prover}, {"gpus", live->gpus}};
  } else {
    detail["live"] = nullptr;
  }
  if (const auto ssh = manager.ssh_endpoints(id)) {
    const auto commands = core::ssh_commands(*ssh);
    detail["ssh"] = {{"commands", commands},
                     {"proxy_host", core::plain_host(ssh->proxy_host) ? ssh->proxy_host : ""},
                     {"proxy_port", ssh->proxy_port},
                     {"direct_host", core::plain_host(ssh->direct_host) ? ssh->direct_host : ""},
                     {"direct_port", ssh->direct_port}};
  } else {
    detail["ssh"] = nullptr;
  }
  json alerts = json::array();
  for (const auto& a : manager.alerts().instances) {
    if (a.instance_id == id) alerts.push_back(to_json(a));
  }
  detail["alerts"] = std::move(alerts);
  detail["pending_commands"] = manager.pending_commands(id);
}

}  // namespace pf::manager
