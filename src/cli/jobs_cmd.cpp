// `proverfleet jobs`: the gateway's proof jobs through the operator API (GET /api/v1/jobs,
// /api/v1/jobs/{id}): a table of jobs by state, kind, client, machine or instance, or one job with
// its timeline; --json prints the API's JSON.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/fleet_client.h"
#include "cli/table.h"

namespace pf::cli::fleet {
namespace {

using nlohmann::json;

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

}  // namespace

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

}  // namespace pf::cli::fleet
