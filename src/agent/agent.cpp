// Agent::Impl composes the agent's parts and runs them in order: probe, register, fetch the
// parameters, supervise the prover, shut down. Each part is its own file:
//   agent_log.h         the log (shipped to the manager, and stderr)
//   agent_state.h       what the threads share: phase, stop, commands, counters, plan
//   registration.h      the agent's token, registering, the reply's terms, a 401 settled
//   reporter.h          heartbeats, events and logs to the manager (one thread)
//   manager_commands.h  what a heartbeat reply asks for
//   param_fetch.h       parameters and the benchmark input onto the machine
//   prover_factory.h    the prover by kind
//   machine_plan.h      the probe and the caps on the prover's plan
//   prover_supervisor.h start, warm up, restart and re-plan the prover
//   proof_slots.h       the proofs in flight: the benchmark's or the manager's jobs
#include "agent/agent.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_log.h"
#include "agent/agent_state.h"
#include "agent/json_setting.h"
#include "agent/machine_plan.h"
#include "agent/manager_client.h"
#include "agent/manager_commands.h"
#include "agent/outbox.h"
#include "agent/param_fetch.h"
#include "agent/param_manifest.h"
#include "agent/proof_slots.h"
#include "agent/prover_factory.h"
#include "agent/prover_supervisor.h"
#include "agent/registration.h"
#include "agent/reporter.h"
#include "agent/work_client.h"
#include "agent/work_loop.h"
#include "core/hearing.h"

namespace pf::agent {

namespace fs = std::filesystem;
using nlohmann::json;

struct Agent::Impl {
  explicit Impl(AgentOptions options)
      : o(std::move(options)),
        clock(o.time_scale),
        log(o.log_sink),
        reporter(log, clock,
                 {.heartbeat_body = [this] { return heartbeat_body(); },
                  .on_reply = [this](const HeartbeatReply& r) { on_heartbeat_reply(r); },
                  .on_unauthorized = [this](const CallError& e) { on_unauthorized(e); },
                  .request_stop = [this](const std::string& why) { request_stop(why); }}),
        params(o, log, clock) {}

  AgentOptions o;  // param_dir filled in by normalized() before anything reads it
  AgentClock clock;
  AgentLog log;
  AgentState state;
  Reporter reporter;
  ParameterFetch params;
  MachineProbe probe;
  ManagerTerms terms;
  std::string benchmark_input_path;  // the verified local copy, once fetched
  std::unique_ptr<EventOutbox> outbox;
  std::unique_ptr<ManagerClient> manager;
  std::unique_ptr<Registration> registration;
  // Jobs from the manager (issue 12); made with the manager client, before anything proves.
  std::unique_ptr<WorkClient> work_client;
  std::unique_ptr<WorkLoop> work;
  std::unique_ptr<Prover> prover;
  std::atomic<Prover*> prover_ptr{nullptr};  // what the reporter may use, once it exists

  static AgentOptions normalized(AgentOptions options) {
    if (options.param_dir.empty()) options.param_dir = options.state_dir + "/params";
    return options;
  }

  void set_phase(const std::string& p) {
    {
      std::lock_guard lock(state.mu);
      if (state.phase == p) return;
      state.phase = p;
    }
    log.line("phase: " + p);
    reporter.heartbeat_soon();
  }

  // Waits up to `sim_seconds` of agent time; false when a stop was requested meanwhile.
  bool pause(double sim_seconds) { return state.wait_unless_stopped(clock.real(sim_seconds)); }

  void request_stop(const std::string& reason) {
    if (state.request_stop(reason)) reporter.wake();
  }

  void on_unauthorized(const CallError& e) {
    if (registration) registration->on_unauthorized(e);
  }

  bool credentials_refused() const { return registration && registration->credentials_refused(); }

  // --- the heartbeat ---------------------------------------------------------------------------

  json heartbeat_body() {
    json body;
    Prover* current = prover_ptr.load();
    {
      std::lock_guard lock(state.mu);
      body["phase"] = state.phase;
      body["prover"] = {{"kind", current ? current->kind() : std::string()},
                        {"in_flight", state.in_flight},
                        {"completed", state.completed},
                        {"failed", state.failed},
                        {"peak_memory_gib", state.peak_memory_gib}};
      if (state.plan) {
        body["prover"]["partitions"] = state.running_partitions;
        body["prover"]["model_peak_gib"] = state.plan->expected_peak_gib;
      }
    }
    if (json fetch = params.heartbeat_json(); !fetch.is_null()) body["params"] = std::move(fetch);
    if (work) {
      body["phase"] = work->phase_for(body["phase"].get<std::string>());
      body["jobs"] = work->held_json();
    }
    std::optional<std::vector<GpuInfo>> gpus;
    if (current) {
      gpus = current->gpu_samples();
      json status = current->status_json();
      if (!status.is_null()) body["prover"]["status"] = std::move(status);
    }
    if (!gpus && probe.has_gpus) {
      ProbeOptions po{o.probe_root, o.nvidia_smi, ""};
      if (auto g = query_gpus(po)) gpus = std::move(*g);
    }
    if (gpus) {
      json arr = json::array();
      for (const auto& g : *gpus) arr.push_back(heartbeat_json(g));
      body["gpus"] = std::move(arr);
    }
    return body;
  }

  void on_heartbeat_reply(const HeartbeatReply& reply) {
    for (const ManagerCommand& c : parse_manager_commands(reply.commands)) {
      switch (c.kind) {
        case ManagerCommand::Kind::Stop:
          request_stop("the manager sent stop");
          break;
        case ManagerCommand::Kind::Replan: {
          std::lock_guard lock(state.mu);
          if (c.value) {
            state.partitions_command = *c.value;
            log.line("the manager asked for a re-plan at most " + std::to_string(*c.value) +
                     " partitions");
          } else {
            log.line("the manager asked for a re-plan");
          }
          state.replan_requested = true;
          state.cv.notify_all();
          break;
        }
        case ManagerCommand::Kind::SetConcurrency: {
          log.line("the manager set proofs in flight to " + std::to_string(*c.value));
          std::lock_guard lock(state.mu);
          state.concurrency_command = *c.value;
          state.cv.notify_all();
          break;
        }
        case ManagerCommand::Kind::Unknown:
          log.line("ignoring unknown manager command " + c.raw.dump());
          break;
      }
    }
    if (work) work->on_heartbeat(reply.work, reply.drop_jobs);
  }

  // --- the steps -------------------------------------------------------------------------------

  void start_work() {
    WorkClientOptions wo;
    wo.cache_dir = o.state_dir + "/job-inputs";
    wo.retry_max_s = core::kAgentRetryMaxS;
    wo.log = [this](const std::string& line) { log.line(line); };
    wo.on_unauthorized = [this](const CallError& e) { on_unauthorized(e); };
    wo.wait = [this](double seconds) {
      return state.wait_unless_stopped(std::chrono::duration<double>(seconds));
    };
    work_client = std::make_unique<WorkClient>(*manager, std::move(wo));
    WorkLoopOptions lo;
    lo.lease_retry_max_s = core::kAgentRetryMaxS;
    lo.log = [this](const std::string& line) { log.line(line); };
    lo.cancel_proof = [this](std::int64_t job_id) {
      if (Prover* current = prover_ptr.load()) current->cancel(job_id);
    };
    work = std::make_unique<WorkLoop>(*work_client, std::move(lo));
  }

  tl::expected<void, std::string> fetch_parameters() {
    auto files = parse_param_manifest(terms.params_manifest);
    if (!files) return tl::unexpected("bad parameter manifest from the manager: " + files.error());
    set_phase("fetching_params");
    auto fetched = params.fetch(*files, terms.benchmark_input_offer, *manager,
                                [this] { return state.stopping(); });
    if (!fetched) return tl::unexpected(fetched.error());
    benchmark_input_path = fetched->benchmark_input_path;
    reporter.emit_simple("params_done", "parameters fetched and verified",
                         {{"files", fetched->files},
                          {"bytes", fetched->params.bytes},
                          {"downloaded", fetched->params.downloaded},
                          {"refetched", fetched->params.refetched},
                          {"seconds", fetched->seconds}});
    return {};
  }

  // Runs the prover until a stop; an error when it cannot go on.
  tl::expected<void, std::string> supervise() {
    auto made = make_prover(prover_kind(o, terms.prover_settings),
                            {o, terms.prover_settings, benchmark_input_path, clock,
                             [this](const std::string& line) { log.prover_line(line); }});
    if (!made) return tl::unexpected(made.error());
    prover = std::move(*made);
    prover_ptr = prover.get();
    ProofSlots slots(
        state, *prover, work.get(), reporter, log,
        {terms.max_samples, o.concurrency, setting<int>(terms.prover_settings, "concurrency")});
    ProverSupervisor supervisor(
        o, terms, state, probe, *prover, slots, reporter, log,
        {.set_phase = [this](const std::string& p) { set_phase(p); },
         .pause = [this](double sim_seconds) { return pause(sim_seconds); }});
    return supervisor.run();
  }

  int shutdown(int code) {
    set_phase("exiting");
    if (prover) prover->stop();
    // Proofs already made are worth delivering; unfinished jobs' leases end with this agent.
    if (work) work->stop(std::chrono::milliseconds(static_cast<std::int64_t>(o.drain_s * 1000)));
    std::string reason;
    {
      std::lock_guard lock(state.mu);
      reason = state.stop_reason.empty() ? "exiting" : state.stop_reason;
    }
    log.line("exiting: " + reason);
    reporter.emit_simple("exiting", reason);
    reporter.stop();
    // Refused credentials: nothing would be taken, so the events stay journaled.
    if (!credentials_refused()) reporter.drain(o.drain_s);
    return credentials_refused() ? kAgentFailed : code;
  }

  int fail(const std::string& message) {
    log.line("error: " + message);
    reporter.emit_simple("error", message);
    set_phase("failed");
    if (o.exit_on_failure) return shutdown(kAgentFailed);
    // Stay observable: heartbeats go on until the manager sends stop (or a signal comes).
    state.wait_for_stop();
    return shutdown(kAgentStopped);
  }

  int run() {
    if (o.manager_url.empty() || o.deployment.empty() || o.secret.empty()) {
      log.line("error: the manager URL, deployment id and secret are required");
      return kAgentFailed;
    }
    std::error_code ec;
    if (fs::create_directories(o.state_dir, ec) && !ec) {
      // It will hold our bearer token and the event journal: ours alone.
      fs::permissions(o.state_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    }
    if (ec) {
      log.line("error: cannot create the state directory " + o.state_dir + ": " + ec.message());
      return kAgentFailed;
    }
    auto token = load_or_create_agent_token(o.state_dir, log);
    if (!token) {
      log.line("error: " + token.error());
      return kAgentFailed;
    }
    const auto epoch_ms =
        static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    auto box = EventOutbox::open(o.state_dir, epoch_ms);
    if (!box) {
      log.line("error: " + box.error());
      return kAgentFailed;
    }
    outbox = std::move(*box);
    if (outbox->pending_count() > 0) {
      log.line(std::to_string(outbox->pending_count()) +
               " events from an earlier run wait for delivery");
    }
    market::HttpOptions http;
    http.connect_timeout_s = 10;
    http.request_timeout_s = 30;  // a hung manager must not stall heartbeats for long
    manager = std::make_unique<ManagerClient>(o.manager_url, http);
    registration = std::make_unique<Registration>(
        *manager, log, [this](const std::string& why) { request_stop(why); });
    reporter.attach(*manager, *outbox);
    start_work();

    probe.refresh({o.probe_root, o.nvidia_smi, o.param_dir});
    log.line("probe: " + probe_summary(probe.result));
    for (const auto& w : probe.result.warnings) log.line("probe: " + w);

    json register_body = {{"deployment", o.deployment},
                          {"secret", o.secret},
                          {"hardware", to_json(probe.result)},
                          {"agent_version", o.agent_version},
                          {"token", *token}};
    if (auto code = registration->register_until_done(
            std::move(register_body), terms,
            [this](double sim_seconds) { return pause(sim_seconds); }, clock.scale())) {
      return *code;
    }
    reporter.start(terms.heartbeat_s);

    if (state.stopping()) return shutdown(kAgentStopped);
    if (auto r = fetch_parameters(); !r) {
      if (state.stopping()) return shutdown(kAgentStopped);
      return fail("parameters: " + r.error());
    }
    if (state.stopping()) return shutdown(kAgentStopped);
    if (auto r = supervise(); !r) {
      if (state.stopping()) return shutdown(kAgentStopped);
      return fail(r.error());
    }
    return shutdown(kAgentStopped);
  }
};

Agent::Agent(AgentOptions options)
    : impl_(std::make_unique<Impl>(Impl::normalized(std::move(options)))) {}

Agent::~Agent() {
  impl_->reporter.stop();
  if (impl_->work) impl_->work->stop(std::chrono::milliseconds(0));
}

int Agent::run() {
  return impl_->run();
}

void Agent::request_stop(const std::string& reason) {
  impl_->log.line("stop requested: " + reason);
  impl_->request_stop(reason);
}

}  // namespace pf::agent
