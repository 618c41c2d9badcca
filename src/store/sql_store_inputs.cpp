// SqlStore's job inputs (store/job_input_store.h, issue 29): `job_inputs` and `job_input_chunks`.
#include <algorithm>
#include <exception>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "store/sql_connection.h"
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {
namespace {

using sql::Statement;

StoredInput read_header(const Statement& s) {
  StoredInput in;
  in.digest = s.text("digest");
  in.bytes = s.integer("size_bytes");
  in.chunk_bytes = s.integer("chunk_bytes");
  in.chunks = s.integer("chunks");
  in.written_at = s.real("written_at");
  return in;
}

constexpr const char* kHeaderColumns = "digest, size_bytes, chunk_bytes, chunks, written_at";

}  // namespace

template <typename Fn>
auto SqlStore::on_input_connection(Fn&& fn) {
  if (!input_pool_) {
    std::lock_guard lock(mutex_);
    return fn(*conn_);
  }
  auto borrowed = input_pool_->acquire();
  try {
    return fn(*borrowed);
  } catch (...) {
    borrowed.failed();
    throw;
  }
}

std::optional<StoredInput> SqlStore::job_input(const std::string& digest) {
  return on_input_connection([&](sql::Connection& c) -> std::optional<StoredInput> {
    Statement s(c,
                std::string("SELECT ") + kHeaderColumns + " FROM job_inputs WHERE digest = :digest",
                "reading the header of job input " + digest);
    s.bind_text(":digest", digest);
    if (!s.next()) return std::nullopt;
    return read_header(s);
  });
}

bool SqlStore::claim_job_input(const std::string& digest, std::int64_t bytes, double now) {
  return on_input_connection([&](sql::Connection& c) {
    Statement s(c,
                "UPDATE job_inputs SET written_at = :now WHERE digest = :digest AND "
                "size_bytes = :bytes",
                "claiming job input " + digest);
    s.bind_real(":now", now);
    s.bind_text(":digest", digest);
    s.bind_int(":bytes", bytes);
    s.run();
    return s.changes() > 0;
  });
}

namespace {

// One chunk's own transaction (a statement outside BEGIN is one on both databases). A chunk
// already there is written over: without a header nothing vouches for its bytes (an import whose
// file did not match its name leaves such chunks). Marked written now, so a sweep racing this
// write never takes a chunk the header about to be written counts on.
void write_chunk(sql::Connection& c, const std::string& digest, std::int64_t seq,
                 std::string_view data, double now) {
  Statement s(c,
              "INSERT INTO job_input_chunks (digest, seq, data, written_at) VALUES (:digest, :seq, "
              ":data, :now) ON CONFLICT (digest, seq) DO UPDATE SET data = excluded.data, "
              "written_at = excluded.written_at",
              "writing chunk " + std::to_string(seq) + " of job input " + digest);
  s.bind_text(":digest", digest);
  s.bind_int(":seq", seq);
  s.bind_blob(":data", data);
  s.bind_real(":now", now);
  s.run();
}

}  // namespace

void SqlStore::put_job_input_chunks(const std::string& digest, std::int64_t first_seq,
                                    std::span<const std::string_view> chunks, double now) {
  // Chunks k, k + writers, k + 2 × writers, … of writer k, each on its own pooled connection.
  const auto write_share = [&](std::size_t writer, std::size_t writers) {
    on_input_connection([&](sql::Connection& c) {
      for (std::size_t k = writer; k < chunks.size(); k += writers) {
        write_chunk(c, digest, first_seq + static_cast<std::int64_t>(k), chunks[k], now);
      }
    });
  };
  const std::size_t writers = input_pool_ && conn_->dialect() == sql::Dialect::Postgres
                                  ? std::min(kInputWriters, chunks.size())
                                  : 1;
  if (writers <= 1) {
    write_share(0, 1);
    return;
  }
  // Every writer runs to its end before this returns (a writer's failure does not stop the
  // others: their chunks are harmless without a header, and the sweep takes them).
  std::vector<std::exception_ptr> failures(writers);
  {
    std::vector<std::jthread> others;
    for (std::size_t w = 1; w < writers; ++w) {
      others.emplace_back([&, w] {
        try {
          write_share(w, writers);
        } catch (...) {
          failures[w] = std::current_exception();
        }
      });
    }
    try {
      write_share(0, writers);
    } catch (...) {
      failures[0] = std::current_exception();
    }
  }
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

bool SqlStore::finish_job_input(const StoredInput& input, double now) {
  return on_input_connection([&](sql::Connection& c) {
    // One statement: the header goes in only while every chunk is there.
    Statement s(
        c,
        std::string("INSERT INTO job_inputs (") + kHeaderColumns +
            ") SELECT CAST(:digest AS TEXT), CAST(:bytes AS BIGINT), CAST(:chunk_bytes AS "
            "BIGINT), CAST(:chunks AS BIGINT), CAST(:now AS DOUBLE PRECISION) WHERE (SELECT "
            "COUNT(*) FROM job_input_chunks WHERE digest = CAST(:digest AS TEXT)) = "
            "CAST(:chunks AS BIGINT) ON CONFLICT (digest) DO UPDATE SET written_at = "
            "excluded.written_at",
        "finishing job input " + input.digest);
    s.bind_text(":digest", input.digest);
    s.bind_int(":bytes", input.bytes);
    s.bind_int(":chunk_bytes", input.chunk_bytes);
    s.bind_int(":chunks", input.chunks);
    s.bind_real(":now", now);
    s.run();
    return s.changes() > 0;
  });
}

std::vector<std::pair<std::int64_t, std::string>> SqlStore::job_input_chunks(
    const std::string& digest, std::int64_t first, std::int64_t last) {
  return on_input_connection([&](sql::Connection& c) {
    Statement s(c,
                "SELECT seq, data FROM job_input_chunks WHERE digest = :digest AND seq >= :first "
                "AND seq <= :last ORDER BY seq",
                "reading chunks " + std::to_string(first) + "-" + std::to_string(last) +
                    " of job input " + digest);
    s.bind_text(":digest", digest);
    s.bind_int(":first", first);
    s.bind_int(":last", last);
    s.prefer_binary_results();  // MiBs of bytea: not as hex text twice their size
    std::vector<std::pair<std::int64_t, std::string>> out;
    while (s.next()) out.emplace_back(s.integer("seq"), s.blob("data"));
    return out;
  });
}

InputsSwept SqlStore::drop_job_inputs(double finished_since, double written_before) {
  return on_input_connection([&](sql::Connection& c) {
    InputsSwept swept;
    // What job_inputs_in_use reads, as a subquery: no digest list travels.
    Statement headers(c,
                      std::string("DELETE FROM job_inputs WHERE written_at < :before AND digest "
                                  "NOT IN (") +
                          sql::kJobInputsInUseSql + ")",
                      "removing job inputs no job needs");
    headers.bind_real(":before", written_before);
    headers.bind_real(":since", finished_since);
    headers.run();
    swept.inputs = static_cast<int>(headers.changes());
    Statement chunks(c,
                     "DELETE FROM job_input_chunks WHERE written_at < :before AND digest NOT IN "
                     "(SELECT digest FROM job_inputs)",
                     "removing job input chunks no whole input names");
    chunks.bind_real(":before", written_before);
    chunks.run();
    swept.chunks = chunks.changes();
    // Not inside a transaction of the one connection (input I/O never is; a pooled connection
    // never holds one).
    if (swept.chunks > 0 && c.dialect() == sql::Dialect::Sqlite &&
        (&c != conn_.get() || depth_ == 0)) {
      c.exec("PRAGMA incremental_vacuum", "returning the space of removed job inputs");
    }
    return swept;
  });
}

std::vector<StoredInput> SqlStore::job_inputs() {
  return on_input_connection([&](sql::Connection& c) {
    Statement s(c, std::string("SELECT ") + kHeaderColumns + " FROM job_inputs ORDER BY digest",
                "listing job inputs");
    std::vector<StoredInput> out;
    while (s.next()) out.push_back(read_header(s));
    return out;
  });
}

InputTotals SqlStore::job_input_totals() {
  return on_input_connection([&](sql::Connection& c) {
    Statement s(c, "SELECT COUNT(*) AS n, COALESCE(SUM(size_bytes), 0) AS bytes FROM job_inputs",
                "counting job inputs");
    InputTotals totals;
    if (s.next()) {
      totals.inputs = s.integer("n");
      totals.bytes = s.integer("bytes");
    }
    return totals;
  });
}

}  // namespace pf::store
