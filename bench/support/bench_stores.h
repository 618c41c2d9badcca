// Bench helper: runs one measurement on the stores `serve --db` opens — the one URL a bench was
// given (--db), or else a SQLite file in `dir` and then a database on a local PostgreSQL server
// started here (tests/support/pg_server.h: initdb in a temporary directory, fsync off), which
// lives until the runs are over. Header-only.
//
//   return pf::bench::on_bench_stores("heartbeat_bench", opt.db, dir,
//       [&](const std::string& suffix, const std::string& url) { ... print figures ... });
//
// `suffix` is "sqlite" or "pg" (figure names end in it). A run that throws is reported on
// stderr, the next one still runs, and the result is 1.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "store/store_url.h"
#include "support/pg_server.h"
#include "support/temp_dir.h"

namespace pf::bench {

inline std::string store_suffix(const std::string& url) {
  return pf::store::is_postgres_url(url) ? "pg" : "sqlite";
}

inline int on_bench_stores(
    const char* bench, const std::string& db, pf::testing::TempDir& dir,
    const std::function<void(const std::string& suffix, const std::string& url)>& measure) {
  int status = 0;
  auto run = [&](const std::string& suffix, const std::function<std::string()>& url) {
    try {
      measure(suffix, url());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s (%s): %s\n", bench, suffix.c_str(), e.what());
      status = 1;
    }
  };
  if (!db.empty()) {
    run(store_suffix(db), [&] { return db; });
    return status;
  }
  run("sqlite", [&] { return dir.file("bench.db"); });
  std::unique_ptr<pf::test::PgServer> pg;
  run("pg", [&] {
    pg = std::make_unique<pf::test::PgServer>();
    return pg->url("postgres");
  });
  return status;
}

}  // namespace pf::bench
