// `proverfleet migrate --from URL --to URL`: moves a fleet's history to another database (e.g.
// from one machine's SQLite file to the PostgreSQL that replicas share). Both are opened (and
// brought to this build's schema) as serve would open them; the copy is store::copy_store.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/table.h"
#include "store/sql_store.h"
#include "store/store_copy.h"
#include "store/store_url.h"

namespace pf::cli {
namespace {

struct MigrateOptions {
  std::string from;
  std::string to;
  bool json = false;
  bool no_progress = false;
};

std::unique_ptr<store::SqlStore> open_side(const std::string& url, const char* flag) {
  if (store::url_has_password(url)) {
    throw CommandFailed(std::string(flag) +
                        ": a password in a database URL is refused on the command line (every "
                        "local user can read it); put it in PGPASSFILE (a 0600 file) or "
                        "$PGPASSWORD");
  }
  try {
    return store::open_sql_store(url);
  } catch (const std::exception& e) {
    throw CommandFailed(std::string(flag) + ": cannot open " + store::redacted_url(url) + ": " +
                        e.what());
  }
}

void run_migrate(const MigrateOptions& o) {
  if (o.from == o.to) throw CommandFailed("--from and --to name the same database");
  auto source = open_side(o.from, "--from");
  auto target = open_side(o.to, "--to");
  const bool show_progress = !o.no_progress && !o.json && isatty(STDERR_FILENO) == 1;
  std::vector<store::TableCopy> copied;
  try {
    copied = store::copy_store(
        source->connection(), target->connection(), [&](const store::CopyProgress& p) {
          if (!show_progress) return;
          std::cerr << "\r" << p.table << ": " << p.rows_done << " / " << p.rows_total << " rows"
                    << std::string(8, ' ') << (p.rows_done == p.rows_total ? "\n" : "")
                    << std::flush;
        });
  } catch (const std::exception& e) {
    throw CommandFailed("migrate failed, nothing was written to the target: " +
                        std::string(e.what()));
  }
  std::int64_t total = 0;
  for (const auto& c : copied) total += c.target_rows;
  if (o.json) {
    nlohmann::json tables = nlohmann::json::array();
    for (const auto& c : copied) {
      tables.push_back(
          {{"table", c.table}, {"source_rows", c.source_rows}, {"target_rows", c.target_rows}});
    }
    std::cout << nlohmann::json{{"from", store::redacted_url(o.from)},
                                {"to", store::redacted_url(o.to)},
                                {"tables", tables},
                                {"rows", total}}
                     .dump(2)
              << "\n";
    return;
  }
  Table table({{"table"}, {"source rows", Table::Align::Right}, {"copied", Table::Align::Right}});
  for (const auto& c : copied) {
    table.add_row({c.table, std::to_string(c.source_rows), std::to_string(c.target_rows)});
  }
  table.print(std::cout);
  std::cout << "copied " << total << " rows from " << store::redacted_url(o.from) << " to "
            << store::redacted_url(o.to) << "; every table's count matches\n";
}

}  // namespace

void register_migrate(CLI::App& app) {
  auto o = std::make_shared<MigrateOptions>();
  auto* cmd = app.add_subcommand(
      "migrate",
      "Copy a fleet's history (instances, events, samples, bench runs, bad hosts, "
      "jobs, settings) to an empty database");
  cmd->footer(
      "Stop every `serve` on the source first: the copy reads one snapshot of it.\n"
      "Both databases are brought to this build's schema, as `serve` would. The target must be\n"
      "empty; the copy is one transaction (all or nothing), ids are kept, and each table's\n"
      "count is checked. Database URLs: a SQLite file path or sqlite:PATH, postgres://... or\n"
      "postgresql://... (password from PGPASSFILE or $PGPASSWORD, never in the URL).\n"
      "Job inputs are rows (since schema 18) and travel with the copy. A source last served by\n"
      "an older proverfleet keeps them as files in jobs.data_dir/job-inputs: run `serve` on it\n"
      "once first, which moves them into its database.\n"
      "Example: proverfleet migrate --from ./proverfleet.db --to postgres://pf@db1/proverfleet");
  cmd->add_option("--from", o->from, "Database to copy from")->required();
  cmd->add_option("--to", o->to, "Empty database to copy into")->required();
  cmd->add_flag("--json", o->json, "Print the per-table counts as JSON");
  cmd->add_flag("--no-progress", o->no_progress, "No progress lines, even on a terminal");
  cmd->callback([o] { run_migrate(*o); });
}

}  // namespace pf::cli
