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
#include "cli/fleet_client.h"
#include "cli/manager_client.h"
#include "cli/secrets.h"
#include "cli/table.h"
#include "core/text.h"
#include "market/http_client.h"

namespace pf::cli {
namespace fleet {
namespace {

using nlohmann::json;

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
}  // namespace fleet

void register_fleet_commands(CLI::App& app) {
  fleet::register_tune(app);
  fleet::register_logs(app);
  fleet::register_deploy(app);
  fleet::register_destroy(app);
  fleet::register_instances(app);
  fleet::register_hosts(app);
  fleet::register_bad_hosts(app);
  fleet::register_status(app);
  fleet::register_jobs(app);
  fleet::register_money(app);
  fleet::register_autopilot(app);
}

}  // namespace pf::cli
