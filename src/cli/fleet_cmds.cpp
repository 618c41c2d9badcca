// The fleet commands: thin clients of a running manager's operator API (proverfleet serve).
// `deploy`, `destroy`, `instances`, `hosts`, `bad-hosts ls|add|rm`, `status`, `jobs`, `money`,
// `autopilot status|pause|resume`, `tune`, `logs`. Human tables by
// default, the API's JSON with --json; an API error is printed as "error: ..." (exit 1).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/manager_client.h"
#include "cli/secrets.h"
#include "cli/table.h"
#include "core/text.h"
#include "market/http_client.h"

namespace pf::cli {
namespace {

using nlohmann::json;

struct ClientFlags {
  std::string manager = kDefaultManagerUrl;
  RefusedSecretFlag token_flag{"--token", "$PROVERFLEET_TOKEN or --token-file PATH", std::nullopt};
  std::string token_file = "operator.token";
  bool json = false;
};

void add_client_flags(CLI::App* cmd, ClientFlags& flags) {
  cmd->add_option("--manager", flags.manager, "Manager base URL")
      ->envname("PROVERFLEET_MANAGER")
      ->capture_default_str();
  add_refused_secret_flag(cmd, flags.token_flag);
  cmd->add_option("--token-file", flags.token_file,
                  "File holding the operator token ('serve' writes operator.token next to its "
                  "database)")
      ->envname("PROVERFLEET_TOKEN_FILE")
      ->capture_default_str();
  cmd->add_flag("--json", flags.json, "Print the API's JSON instead of a table");
}

ManagerClient connect(const ClientFlags& flags) {
  check_refused_secret_flag(flags.token_flag);
  auto token = resolve_operator_token(secret_from_env("PROVERFLEET_TOKEN"), flags.token_file);
  if (!token) throw CommandFailed(token.error());
  auto client = ManagerClient::create(ManagerEndpoint{flags.manager, *token});
  if (!client) throw CommandFailed(client.error());
  return std::move(*client);
}

json ok_or_fail(tl::expected<json, std::string> reply) {
  if (!reply) throw CommandFailed(reply.error());
  return std::move(*reply);
}

void print_json(const json& value) {
  std::cout << value.dump(2) << "\n";
}

// Tolerant field access for display: a missing or null field prints as "-" rather than
// aborting the whole table.
double num(const json& object, const char* key, double fallback = 0) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}
std::optional<double> opt_num(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
std::string str(const json& object, const char* key, const std::string& fallback = "-") {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return fallback;
  }
  return it->get<std::string>();
}
std::string integer(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return "-";
  return std::to_string(it->get<std::int64_t>());
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// 45s, 12m, 3h05m, 2d04h.
std::string duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm", s / 60);
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, (s % 86400) / 3600);
  }
  return buf;
}

std::string ago(const json& object, const char* key) {
  auto at = opt_num(object, key);
  if (!at || *at <= 0) return "-";
  return duration(now_s() - *at) + " ago";
}

std::string money(double usd, int decimals) {
  return (usd < 0 ? "-$" : "$") + core::fixed(std::fabs(usd), decimals);
}

std::string gpu(const json& offer) {
  return str(offer, "gpu_name", "?") + " x" + integer(offer, "num_gpus");
}

void print_instance_line(const json& rec, const std::string& what) {
  const json offer = rec.value("offer", json::object());
  std::cout << "instance " << integer(rec, "id") << " " << what << ": offer "
            << integer(offer, "id") << ", " << gpu(offer) << " at "
            << money(num(offer, "dph_total"), 3) << "/hr, machine " << integer(offer, "machine_id")
            << "; state " << str(rec, "state");
  if (rec.contains("market_id") && rec["market_id"].is_number()) {
    std::cout << ", market instance " << integer(rec, "market_id");
  }
  const std::string reason = str(rec, "destroy_reason", "");
  if (!reason.empty()) std::cout << " (" << reason << ")";
  std::cout << "\n";
}

// ---- deploy / destroy -----------------------------------------------------------------------

void register_deploy(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto offer_id = std::make_shared<std::int64_t>(0);
  auto* cmd = app.add_subcommand(
      "deploy",
      "Rent an offer through the manager (POST /api/v1/instances). The manager re-checks the\n"
      "offer, refuses bad hosts and offers already rented, then creates the instance.");
  cmd->add_option("OFFER_ID", *offer_id, "Offer (ask) id, as 'proverfleet offers' lists it")
      ->required()
      ->check(CLI::PositiveNumber);
  add_client_flags(cmd, *flags);
  cmd->callback([flags, offer_id] {
    auto client = connect(*flags);
    json rec = ok_or_fail(client.post("/api/v1/instances", json{{"offer_id", *offer_id}}));
    if (flags->json) return print_json(rec);
    print_instance_line(rec, "deployed");
  });
}

void register_destroy(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::int64_t>(0);
  auto* cmd = app.add_subcommand(
      "destroy",
      "Destroy an instance (DELETE /api/v1/instances/ID). The manager retries the market's\n"
      "destroy until it is confirmed; the instance shows 'destroying' until then.");
  cmd->add_option("ID", *id, "Instance id (ours, as 'proverfleet instances' lists it)")
      ->required()
      ->check(CLI::PositiveNumber);
  add_client_flags(cmd, *flags);
  cmd->callback([flags, id] {
    auto client = connect(*flags);
    json rec = ok_or_fail(client.del("/api/v1/instances/" + std::to_string(*id)));
    if (flags->json) return print_json(rec);
    print_instance_line(rec, "destroy requested");
  });
}

// ---- instances ------------------------------------------------------------------------------

void print_instances(const json& rows) {
  using A = Table::Align;
  Table t({{"ID", A::Right},
           {"MARKET", A::Right},
           {"GPU"},
           {"MACHINE", A::Right},
           {"$/HR", A::Right},
           {"STATE"},
           {"FOR", A::Right},
           {"RATE/HR", A::Right},
           {"PROOFS B/P", A::Right},
           {"SPENT", A::Right},
           {"NOTE", A::Left, 60}});
  const double now = now_s();
  for (const auto& rec : rows) {
    const json offer = rec.value("offer", json::object());
    std::string rate = "-";
    if (rec.contains("verdict") && rec["verdict"].is_object()) {
      const json& v = rec["verdict"];
      rate = core::fixed(num(v, "rate"), 1) + " (" + str(v, "decision") + ")";
    }
    std::string note = str(rec, "destroy_reason", "");
    if (note.empty()) {
      const std::string status = str(rec, "market_status", "");
      note = status.empty() ? "-" : "market: " + status;
    }
    t.add_row({integer(rec, "id"), integer(rec, "market_id"), gpu(offer),
               integer(offer, "machine_id"), core::fixed(num(offer, "dph_total"), 3),
               str(rec, "state"), duration(now - num(rec, "state_since", now)), rate,
               integer(rec, "proofs_benchmark") + "/" + integer(rec, "proofs_production"),
               money(num(rec, "spend_usd"), 2), note});
  }
  if (t.rows() == 0) {
    std::cout << "no instances\n";
    return;
  }
  t.print(std::cout);
}

void register_instances(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto all = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "instances", "List the fleet's instances (GET /api/v1/instances): live ones by default.");
  cmd->add_flag("--all", *all, "Include destroyed instances");
  add_client_flags(cmd, *flags);
  cmd->callback([flags, all] {
    auto client = connect(*flags);
    json rows = ok_or_fail(client.get(std::string("/api/v1/instances") + (*all ? "?all=1" : "")));
    if (flags->json) return print_json(rows);
    print_instances(rows);
  });
}

// ---- hosts ----------------------------------------------------------------------------------

void register_hosts(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto* cmd = app.add_subcommand(
      "hosts",
      "Measured history per host (GET /api/v1/hosts): robust summaries of every benchmark and\n"
      "production run (median and p10 leave out contended or throttled runs when clean ones\n"
      "exist; MAX is never used).");
  add_client_flags(cmd, *flags);
  cmd->callback([flags] {
    auto client = connect(*flags);
    json rows = ok_or_fail(client.get("/api/v1/hosts"));
    if (flags->json) return print_json(rows);
    using A = Table::Align;
    Table t({{"MACHINE", A::Right},
             {"GPU"},
             {"RUNS", A::Right},
             {"MEDIAN/HR", A::Right},
             {"P10/HR", A::Right},
             {"EWMA/HR", A::Right},
             {"LATEST/HR", A::Right},
             {"LAST RUN", A::Right}});
    for (const auto& h : rows) {
      t.add_row({integer(h, "machine_id"), gpu(h), integer(h, "runs"),
                 core::fixed(num(h, "median"), 1), core::fixed(num(h, "p10"), 1),
                 core::fixed(num(h, "ewma"), 1), core::fixed(num(h, "latest"), 1),
                 ago(h, "last_at")});
    }
    if (t.rows() == 0) {
      std::cout << "no host measurements yet\n";
      return;
    }
    t.print(std::cout);
  });
}

// ---- bad-hosts ------------------------------------------------------------------------------

void register_bad_hosts(CLI::App& app) {
  auto* group = app.add_subcommand(
      "bad-hosts", "Machines the manager will not rent (GET/POST/DELETE /api/v1/bad-hosts).");
  group->require_subcommand(1);

  auto ls_flags = std::make_shared<ClientFlags>();
  auto* ls = group->add_subcommand("ls", "List bad-host entries, expired ones included");
  add_client_flags(ls, *ls_flags);
  ls->callback([ls_flags] {
    auto client = connect(*ls_flags);
    json rows = ok_or_fail(client.get("/api/v1/bad-hosts"));
    if (ls_flags->json) return print_json(rows);
    using A = Table::Align;
    Table t({{"MACHINE", A::Right},
             {"SOURCE"},
             {"ACTIVE"},
             {"STRIKES", A::Right},
             {"ADDED", A::Right},
             {"EXPIRES", A::Right},
             {"REASON", A::Left, 70}});
    const double now = now_s();
    for (const auto& b : rows) {
      std::string expires = "never";
      if (auto at = opt_num(b, "expires_at")) {
        expires = *at > now ? "in " + duration(*at - now) : duration(now - *at) + " ago";
      }
      const bool active = b.value("active", false);
      t.add_row({integer(b, "machine_id"), str(b, "source"), active ? "yes" : "no",
                 integer(b, "strikes"), ago(b, "added_at"), expires, str(b, "reason")});
    }
    if (t.rows() == 0) {
      std::cout << "no bad hosts\n";
      return;
    }
    t.print(std::cout);
  });

  auto add_flags = std::make_shared<ClientFlags>();
  auto machine = std::make_shared<std::int64_t>(0);
  auto reason = std::make_shared<std::string>();
  auto ttl_hours = std::make_shared<std::optional<double>>();
  auto* add = group->add_subcommand("add", "Block a machine: the manager will not rent it");
  add->add_option("MACHINE_ID", *machine, "Machine id (offers and instances show it)")
      ->required()
      ->check(CLI::PositiveNumber);
  add->add_option("--reason", *reason, "Why (kept with the entry)")->required();
  add->add_option("--ttl-hours", *ttl_hours, "Expire the entry after H hours (default: never)")
      ->check(finite_positive(24.0 * 365 * 100));
  add_client_flags(add, *add_flags);
  add->callback([add_flags, machine, reason, ttl_hours] {
    auto client = connect(*add_flags);
    json body = {{"machine_id", *machine}, {"reason", *reason}};
    if (*ttl_hours) body["ttl_hours"] = **ttl_hours;
    json entry = ok_or_fail(client.post("/api/v1/bad-hosts", body));
    if (add_flags->json) return print_json(entry);
    std::cout << "machine " << integer(entry, "machine_id") << " is now a bad host";
    if (auto at = opt_num(entry, "expires_at")) {
      std::cout << " for " << duration(*at - num(entry, "added_at"));
    }
    std::cout << ": " << str(entry, "reason") << "\n";
  });

  auto rm_flags = std::make_shared<ClientFlags>();
  auto rm_machine = std::make_shared<std::int64_t>(0);
  auto* rm = group->add_subcommand(
      "rm", "Unblock a machine (removes operator and automatic entries alike)");
  rm->add_option("MACHINE_ID", *rm_machine, "Machine id")->required()->check(CLI::PositiveNumber);
  add_client_flags(rm, *rm_flags);
  rm->callback([rm_flags, rm_machine] {
    auto client = connect(*rm_flags);
    json reply = ok_or_fail(client.del("/api/v1/bad-hosts/" + std::to_string(*rm_machine)));
    if (rm_flags->json) return print_json(reply);
    std::cout << "machine " << *rm_machine << " is no longer a bad host\n";
  });
}

// ---- status ---------------------------------------------------------------------------------

std::string seconds_or_dash(const json& quantiles, const char* key) {
  auto value = opt_num(quantiles, key);
  return value ? duration(*value) : "-";
}

// The fleet's "jobs" section in a few lines.
void print_jobs_summary(const json& jobs) {
  const json open = jobs.value("open", json::object());
  const json wait = jobs.value("queue_wait_s", json::object());
  const json e2e = jobs.value("end_to_end_s", json::object());
  std::cout << "jobs:       " << integer(open, "queued") << " queued, "
            << static_cast<std::int64_t>(num(open, "assigned") + num(open, "proving"))
            << " in flight, " << integer(jobs, "arrivals_last_hour")
            << " arrived in the last hour; " << integer(jobs, "completed") << " done, "
            << integer(jobs, "failed") << " failed all time\n"
            << "latency:    wait p50 " << seconds_or_dash(wait, "p50") << " p95 "
            << seconds_or_dash(wait, "p95") << ", end-to-end p50 " << seconds_or_dash(e2e, "p50")
            << " p95 " << seconds_or_dash(e2e, "p95") << ", on time ";
  if (auto share = opt_num(jobs, "on_time_share")) {
    std::cout << core::percent(*share);
  } else {
    std::cout << "-";
  }
  std::cout << "\n"
            << "earned:     " << money(num(jobs, "revenue_usd"), 3) << " in the window, ";
  if (auto cpp = opt_num(jobs, "realised_cost_per_proof")) {
    std::cout << money(*cpp, 4) << "/proof realised";
  } else {
    std::cout << "no proof delivered on time";
  }
  std::cout << ", " << core::fixed(num(jobs, "idle_instance_hours"), 1) << " idle instance hours\n";
}

// The fleet watch's alerts ("alerts" of GET /api/v1/fleet), one line each.
void print_alerts(const json& alerts) {
  const json instances = alerts.value("instances", json::array());
  const json fleet = alerts.value("fleet", json::array());
  if (!instances.is_array() || !fleet.is_array()) return;
  if (instances.empty() && fleet.empty()) {
    std::cout << "alerts:     none" << (num(alerts, "checked_at") > 0 ? "" : " (not checked yet)")
              << "\n";
    return;
  }
  std::cout << "alerts:     " << instances.size() + fleet.size() << "\n";
  for (const auto& a : fleet) {
    if (a.is_object())
      std::cout << "  fleet " << str(a, "kind") << ": " << str(a, "reason") << "\n";
  }
  for (const auto& a : instances) {
    if (!a.is_object()) continue;
    std::cout << "  instance " << integer(a, "instance_id") << " " << str(a, "kind")
              << (a.value("drop_warranted", false) ? "" : " (warning)")
              << (a.value("acted", false) ? " [destroyed by the manager]" : "") << ": "
              << str(a, "reason") << " (since " << ago(a, "since") << ")\n";
  }
}

// Replicas (issue 14): which replica answered, whether it leads, and who leads for how long.
void print_replica(const json& replica) {
  if (!replica.is_object()) return;
  std::cout << "replica:    " << str(replica, "replica_id") << " ("
            << (replica.value("leading", false) ? "leader" : "follower") << ")\n";
  const json leader = replica.value("leader", json(nullptr));
  if (!leader.is_object()) {
    std::cout << "leader:     none at the moment (failover in progress, within "
              << core::fixed(num(replica, "failover_bound_s"), 0) << " s)\n";
    return;
  }
  std::cout << "leader:     " << str(leader, "replica_id") << " at " << str(leader, "url")
            << ", epoch " << integer(leader, "epoch") << ", leading for "
            << duration(num(leader, "lease_age_s")) << ", lease renewed "
            << core::fixed(num(leader, "renewed_ago_s"), 1) << " s ago\n";
}

void register_status(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto* cmd = app.add_subcommand(
      "status", "Fleet summary (GET /api/v1/fleet): instances by state, throughput, cost, spend.");
  add_client_flags(cmd, *flags);
  cmd->callback([flags] {
    auto client = connect(*flags);
    json fleet = ok_or_fail(client.get("/api/v1/fleet"));
    if (flags->json) return print_json(fleet);
    const json by_state = fleet.value("by_state", json::object());
    int live = 0, destroyed = 0;
    std::string states;
    for (const auto& [name, count] : by_state.items()) {
      if (!count.is_number_integer() || count.get<int>() == 0) continue;
      if (name == "destroyed") {
        destroyed += count.get<int>();
        continue;
      }
      live += count.get<int>();
      states += (states.empty() ? "" : ", ") + std::to_string(count.get<int>()) + " " + name;
    }
    std::cout << "manager:    " << client.base_url() << "\n";
    print_replica(fleet.value("replica", json(nullptr)));
    std::cout << "instances:  " << live << " live" << (states.empty() ? "" : " (" + states + ")")
              << ", " << destroyed << " destroyed\n"
              << "throughput: " << core::fixed(num(fleet, "proofs_per_hour"), 1)
              << " proofs/hr (accepted instances' measured rates)\n"
              << "cost:       " << money(num(fleet, "dollars_per_hour"), 3) << "/hr";
    if (auto cpp = opt_num(fleet, "cost_per_proof")) {
      std::cout << ", " << money(*cpp, 4) << "/proof";
    }
    std::cout << "\n"
              << "profit:     " << money(num(fleet, "profit_per_hour"), 3) << "/hr ("
              << (str(fleet, "profit_basis") == "jobs_delivered"
                      ? "revenue of jobs delivered on time"
                      : "estimate from measured proofs; no gateway jobs yet")
              << ")\n"
              << "spent:      " << money(num(fleet, "spend_usd"), 2) << " all time, "
              << integer(fleet, "proofs") << " production proofs\n";
    if (const auto it = fleet.find("jobs"); it != fleet.end() && it->is_object()) {
      print_jobs_summary(*it);
    }
    const json pilot = fleet.value("autopilot", json::object());
    std::cout << "autopilot:  "
              << (!pilot.value("enabled", false) ? "off"
                  : pilot.value("paused", false) ? "paused"
                                                 : "on")
              << "\n";
    print_alerts(fleet.value("alerts", json::object()));
  });
}

// ---- jobs -----------------------------------------------------------------------------------

void print_jobs(const json& rows) {
  using A = Table::Align;
  Table t({{"ID", A::Right},
           {"CLIENT", A::Left, 20},
           {"REQUEST", A::Left, 28},
           {"KIND"},
           {"STATE"},
           {"TRIES", A::Right},
           {"INSTANCE", A::Right},
           {"AGE", A::Right},
           {"WAIT", A::Right},
           {"TOTAL", A::Right},
           {"DUE", A::Right},
           {"TIMELY"},
           {"EARNED", A::Right},
           {"NOTE", A::Left, 50}});
  const double now = now_s();
  for (const auto& j : rows) {
    std::string due = "-";
    if (auto at = opt_num(j, "deadline_at")) {
      due = *at > now ? "in " + duration(*at - now) : duration(now - *at) + " ago";
    }
    const auto wait = opt_num(j, "queue_wait_s");
    const auto total = opt_num(j, "end_to_end_s");
    t.add_row({integer(j, "id"), str(j, "client"), str(j, "request_id"), str(j, "kind"),
               str(j, "state"), integer(j, "attempts"), integer(j, "instance_id"),
               duration(now - num(j, "submitted_at", now)), wait ? duration(*wait) : "-",
               total ? duration(*total) : "-", due, str(j, "timeliness"),
               money(num(j, "earned_usd"), 4), str(j, "error")});
  }
  if (t.rows() == 0) {
    std::cout << "no jobs\n";
    return;
  }
  t.print(std::cout);
}

// One job's facts and timeline (GET /api/v1/jobs/{key}).
void print_job(const json& j) {
  const double now = now_s();
  std::cout << "job " << integer(j, "id") << " (request " << str(j, "request_id") << ", "
            << str(j, "kind") << "): " << str(j, "state") << ", " << str(j, "timeliness") << "\n";
  std::cout << "client " << str(j, "client", "-") << "; submitted " << ago(j, "submitted_at");
  if (auto due = opt_num(j, "deadline_at")) {
    std::cout << "; deadline "
              << (*due > now ? "in " + duration(*due - now) : duration(now - *due) + " ago");
  }
  std::cout << "; " << integer(j, "attempts") << " tries; earned " << money(num(j, "earned_usd"), 4)
            << "\n";
  if (!str(j, "error", "").empty()) std::cout << "error: " << str(j, "error") << "\n";
  const json steps = j.value("timeline", json::array());
  if (steps.empty()) {
    std::cout << "no timeline (a job from before timelines were kept)\n";
    return;
  }
  using A = Table::Align;
  Table t({{"AFTER", A::Right},
           {"STEP"},
           {"TRY", A::Right},
           {"INSTANCE", A::Right},
           {"MACHINE", A::Right},
           {"DETAIL", A::Left, 90}});
  const double submitted = num(j, "submitted_at");
  for (const auto& e : steps) {
    t.add_row({duration(num(e, "at", submitted) - submitted), str(e, "kind"), integer(e, "attempt"),
               integer(e, "instance_id"), integer(e, "machine_id"), str(e, "detail")});
  }
  t.print(std::cout);
  if (j.value("timeline_truncated", false)) std::cout << "(the newest steps only)\n";
}

void register_jobs(CLI::App& app) {
  struct JobsFlags {
    ClientFlags client;
    std::string key;
    std::string state, kind, from, request;
    std::int64_t instance = 0, machine = 0;
    bool late = false, at_risk = false;
    int limit = 50;
    std::int64_t cursor = 0;
  };
  auto f = std::make_shared<JobsFlags>();
  auto* cmd = app.add_subcommand(
      "jobs",
      "Proof jobs the gateway took (GET /api/v1/jobs), newest first: state, attempts, the\n"
      "instance holding it, queue wait, end-to-end time, deadline, whether it was on time and\n"
      "what it earned. With a job id or request_id: that job's timeline, every try (lease,\n"
      "instance and machine, input, proving, proof accepted or rejected, requeued and why).");
  cmd->add_option("JOB", f->key, "A job id or request_id: show that job and its timeline");
  cmd->add_option("--state", f->state,
                  "Only jobs in these states, comma-separated (queued, assigned, proving, done, "
                  "failed, cancelled)");
  cmd->add_option("--kind", f->kind,
                  "Only these kinds, comma-separated (porep-c2, snap-update, window-post, "
                  "winning-post)");
  cmd->add_option("--client", f->from, "Only this client's jobs (as the list shows it)");
  cmd->add_option("--request", f->request, "Only request ids starting with this");
  cmd->add_option("--instance", f->instance, "Only jobs this instance held on any try")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--machine", f->machine,
                  "Only jobs any rental of this vast.ai machine held on any try")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--late", f->late,
                "Only late jobs (delivered after, or still open past, the deadline)");
  cmd->add_flag("--at-risk", f->at_risk,
                "Only queued jobs with less time left than jobs have recently needed");
  cmd->add_option("--limit", f->limit, "At most this many jobs (one page)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--cursor", f->cursor,
                  "The next page: jobs older than this job id (what the page before ended with)")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  add_client_flags(cmd, f->client);
  cmd->callback([f] {
    auto client = connect(f->client);
    if (!f->key.empty()) {
      json job = ok_or_fail(client.get("/api/v1/jobs/" + market::url_encode(f->key)));
      if (f->client.json) return print_json(job);
      print_job(job);
      return;
    }
    std::string query = "limit=" + std::to_string(f->limit);
    if (f->cursor > 0) query += "&cursor=" + std::to_string(f->cursor);
    // The filters as flags again, for the command that lists the next page.
    std::string again;
    // The manager names a bad value; the texts travel percent-encoded.
    for (const auto& [key, value] :
         {std::pair{"state", &f->state}, std::pair{"kind", &f->kind}, std::pair{"client", &f->from},
          std::pair{"request", &f->request}}) {
      if (value->empty()) continue;
      query += std::string("&") + key + "=" + market::url_encode(*value);
      again += std::string(" --") + key + " '" + *value + "'";
    }
    for (const auto& [key, id] :
         {std::pair{"instance", f->instance}, std::pair{"machine", f->machine}}) {
      if (id <= 0) continue;
      query += std::string("&") + key + "=" + std::to_string(id);
      again += std::string(" --") + key + " " + std::to_string(id);
    }
    if (f->late) {
      query += "&late=1";
      again += " --late";
    }
    if (f->at_risk) {
      query += "&at_risk=1";
      again += " --at-risk";
    }
    json rows = ok_or_fail(client.get("/api/v1/jobs?" + query));
    if (f->client.json) return print_json(rows);
    print_jobs(rows);
    // A full page may have older jobs behind it (the API's X-Next-Cursor is the same id).
    if (rows.is_array() && static_cast<int>(rows.size()) == f->limit) {
      const auto last = rows.back().value("id", std::int64_t{0});
      if (last > 1) {
        std::cout << "older jobs: proverfleet jobs --limit " << f->limit << " --cursor " << last
                  << again << "\n";
      }
    }
  });
}

// ---- money ----------------------------------------------------------------------------------

void print_money(const json& m) {
  const json total = m.value("total", json::object());
  const json spend = total.value("spend", json::object());
  std::cout << "money over the last " << str(m, "range") << ": revenue "
            << money(num(total, "revenue_usd"), 2) << ", spend "
            << money(num(spend, "total_usd"), 2) << " (compute "
            << money(num(spend, "compute_usd"), 2) << ", storage "
            << money(num(spend, "storage_usd"), 2) << ", bandwidth "
            << money(num(spend, "bandwidth_usd"), 2) << "), profit "
            << money(num(total, "profit_usd"), 2) << "\n";
  std::cout << "jobs delivered on time " << integer(total, "delivered_on_time") << ", late "
            << integer(total, "delivered_late") << "; realised $/proof "
            << (opt_num(total, "cost_per_proof_usd") ? money(num(total, "cost_per_proof_usd"), 4)
                                                     : std::string("-"))
            << " (target " << money(num(m, "target_cost_per_proof_usd"), 4)
            << ", revenue per proof " << money(num(m, "revenue_per_proof_usd"), 4) << ")\n";
  using A = Table::Align;
  Table buckets({{"FROM", A::Right},
                 {"REVENUE", A::Right},
                 {"SPEND", A::Right},
                 {"PROFIT", A::Right},
                 {"ON TIME", A::Right},
                 {"LATE", A::Right}});
  for (const auto& b : m.value("buckets", json::array())) {
    buckets.add_row({ago(b, "from"), money(num(b, "revenue_usd"), 3),
                     money(num(b.value("spend", json::object()), "total_usd"), 3),
                     money(num(b, "profit_usd"), 3), integer(b, "delivered_on_time"),
                     integer(b, "delivered_late")});
  }
  buckets.print(std::cout);
  const json hosts = m.value("hosts", json::array());
  if (hosts.empty()) return;
  std::cout << "\nby machine, losing first:\n";
  std::vector<json> sorted(hosts.begin(), hosts.end());
  std::sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) {
    return num(a, "profit_usd") < num(b, "profit_usd");
  });
  Table t({{"MACHINE", A::Right},
           {"RENTALS", A::Right},
           {"REVENUE", A::Right},
           {"SPEND", A::Right},
           {"PROFIT", A::Right},
           {"$/PROOF", A::Right}});
  for (const auto& h : sorted) {
    t.add_row({integer(h, "machine_id"), integer(h, "rentals"), money(num(h, "revenue_usd"), 3),
               money(num(h.value("spend", json::object()), "total_usd"), 3),
               money(num(h, "profit_usd"), 3),
               opt_num(h, "cost_per_proof_usd") ? money(num(h, "cost_per_proof_usd"), 4) : "-"});
  }
  t.print(std::cout);
}

void register_money(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto range = std::make_shared<std::string>("day");
  auto bucket = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "money",
      "Revenue, spend by what vast.ai billed (compute, storage, bandwidth) and profit over a\n"
      "range (GET /api/v1/money): per hour or day, and per machine, losing first. The same\n"
      "rules as the jobs figures of 'status' and /metrics.");
  cmd->add_option("--range", *range, "hour, day, week or month")
      ->check(CLI::IsMember({"hour", "day", "week", "month"}))
      ->capture_default_str();
  cmd->add_option("--bucket", *bucket, "5m, hour or day (default: the range's own)")
      ->check(CLI::IsMember({"5m", "hour", "day"}));
  add_client_flags(cmd, *flags);
  cmd->callback([flags, range, bucket] {
    auto client = connect(*flags);
    std::string path = "/api/v1/money?range=" + *range;
    if (!bucket->empty()) path += "&bucket=" + *bucket;
    json m = ok_or_fail(client.get(path));
    if (flags->json) return print_json(m);
    print_money(m);
  });
}

// ---- autopilot ------------------------------------------------------------------------------

void print_autopilot(const json& st) {
  const bool enabled = st.value("enabled", false), paused = st.value("paused", false);
  std::cout << "autopilot: "
            << (!enabled ? "off (enable with autopilot.enabled in the config)"
                : paused ? "paused"
                         : "on");
  if (paused && !str(st, "paused_by", "").empty()) {
    std::cout << " (by " << str(st, "paused_by") << ", " << ago(st, "paused_at") << ")";
  }
  std::cout << "\n";
  if (!enabled) return;
  std::cout << "rounds: " << integer(st, "runs") << ", last " << ago(st, "last_run_at")
            << "; rented " << integer(st, "rents") << ", dropped " << integer(st, "drops") << "\n";
  if (!str(st, "last_error", "").empty())
    std::cout << "last error: " << str(st, "last_error") << "\n";
  const json recent = st.value("recent", json::array());
  if (recent.empty()) return;
  using A = Table::Align;
  Table t({{"WHEN", A::Right},
           {"ACTION"},
           {"OFFER", A::Right},
           {"INSTANCE", A::Right},
           {"OK"},
           {"REASON", A::Left, 80}});
  for (const auto& d : recent) {
    t.add_row({ago(d, "at"), str(d, "action"), integer(d, "offer_id"), integer(d, "instance_id"),
               d.value("ok", false) ? "yes" : "no", str(d, "reason")});
  }
  t.print(std::cout);
}

void register_autopilot(CLI::App& app) {
  auto* group = app.add_subcommand(
      "autopilot",
      "The manager's autopilot (GET/POST /api/v1/autopilot): show it, pause or resume it.\n"
      "Pausing stops new rentals and drops; instances keep running and the lifecycle rules\n"
      "(deadlines, verdicts, destroys) still apply. The pause survives a manager restart.");
  group->require_subcommand(1);
  auto add = [&](const char* name, const char* help, std::optional<bool> paused) {
    auto flags = std::make_shared<ClientFlags>();
    auto* cmd = group->add_subcommand(name, help);
    add_client_flags(cmd, *flags);
    cmd->callback([flags, paused] {
      auto client = connect(*flags);
      json st = paused ? ok_or_fail(client.post("/api/v1/autopilot", {{"paused", *paused}}))
                       : ok_or_fail(client.get("/api/v1/autopilot"));
      if (flags->json) return print_json(st);
      print_autopilot(st);
    });
  };
  add("status", "Whether it runs, its last round and its recent decisions", std::nullopt);
  add("pause", "Stop renting and dropping until resumed", true);
  add("resume", "Resume deciding", false);
}

// ---- tune / logs ----------------------------------------------------------------------------

void register_tune(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::int64_t>(0);
  auto concurrency = std::make_shared<std::optional<int>>();
  auto partitions = std::make_shared<std::optional<int>>();
  auto* cmd = app.add_subcommand(
      "tune",
      "Change a running instance's prover (POST /api/v1/instances/ID/tune): proofs in flight\n"
      "(--concurrency, the agent's set_concurrency) and/or a partition cap for a re-plan\n"
      "(--partitions, the agent's replan: it restarts the prover; the memory model and any OOM\n"
      "back-off still bound the plan). Sent with the agent's next heartbeat; recorded as an "
      "event.");
  cmd->add_option("ID", *id, "Instance id (ours, as 'proverfleet instances' lists it)")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--concurrency", *concurrency, "Proofs in flight (1-256)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--partitions", *partitions, "Partition cap for a re-plan (1-640)")
      ->check(CLI::Range(1, 640));
  add_client_flags(cmd, *flags);
  cmd->callback([flags, id, concurrency, partitions] {
    if (!*concurrency && !*partitions) {
      throw CommandFailed("give --concurrency N and/or --partitions M");
    }
    json body = json::object();
    if (*concurrency) body["concurrency"] = **concurrency;
    if (*partitions) body["partitions"] = **partitions;
    auto client = connect(*flags);
    json reply =
        ok_or_fail(client.post("/api/v1/instances/" + std::to_string(*id) + "/tune", body));
    if (flags->json) return print_json(reply);
    std::string sent;
    for (const auto& c : reply.value("commands", json::array())) {
      if (c.is_string()) sent += (sent.empty() ? "" : ", ") + c.get<std::string>();
    }
    std::cout << "instance " << *id << ": queued " << sent << " for the agent's next heartbeat\n";
  });
}

void register_logs(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto id = std::make_shared<std::int64_t>(0);
  auto* cmd = app.add_subcommand(
      "logs",
      "Print an instance's agent log as the manager keeps it (bounded per instance, kept across\n"
      "manager restarts), and how to reach the machine by SSH when the market says.");
  cmd->add_option("ID", *id, "Instance id")->required()->check(CLI::PositiveNumber);
  add_client_flags(cmd, *flags);
  cmd->callback([flags, id] {
    auto client = connect(*flags);
    json detail = ok_or_fail(client.get("/api/v1/instances/" + std::to_string(*id)));
    if (flags->json) {
      return print_json(
          json{{"logs", detail.value("logs", "")}, {"ssh", detail.value("ssh", json())}});
    }
    std::cout << detail.value("logs", "");
    const json ssh = detail.value("ssh", json::object());
    if (ssh.is_object()) {
      for (const auto& c : ssh.value("commands", json::array())) {
        if (c.is_string()) std::cerr << "ssh: " << c.get<std::string>() << "\n";
      }
    }
  });
}

}  // namespace

void register_fleet_commands(CLI::App& app) {
  register_tune(app);
  register_logs(app);
  register_deploy(app);
  register_destroy(app);
  register_instances(app);
  register_hosts(app);
  register_bad_hosts(app);
  register_status(app);
  register_jobs(app);
  register_money(app);
  register_autopilot(app);
}

}  // namespace pf::cli
