// Job inputs in the database (issue 29): the bytes a proof request carries (up to hundreds of
// MiB), content-addressed by SHA-256, kept as chunks so that every replica reads what any replica
// wrote and no replica's disk holds anything another needs. Part of the Store (store.h); the job
// queue's InputStore (jobs/input_store.h) is the one user.
//
// Tables (migration 18): `job_input_chunks` (digest, seq, data, written_at) and `job_inputs`
// (digest, size_bytes, chunk_bytes, chunks, written_at), the header that makes an input whole.
// Chunks are written first, each in its own transaction, so a large input never holds the
// database for its whole write; the header goes in only when every chunk is there. Readers serve
// only inputs with a header. Nothing is updated in place: a digest names its bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/transactions.h"

namespace pf::store {

// The header of a whole input.
struct StoredInput {
  std::string digest;            // SHA-256 hex of the whole input
  std::int64_t bytes = 0;        // its size
  std::int64_t chunk_bytes = 0;  // every chunk but the last holds this many bytes
  std::int64_t chunks = 0;       // ceil(bytes / chunk_bytes); 0 for an empty input
  double written_at = 0;         // when it was last written or claimed (epoch s)
};

struct InputsSwept {
  int inputs = 0;           // headers removed (whole inputs)
  std::int64_t chunks = 0;  // chunk rows removed (theirs, and those of inputs never finished)
};

struct InputTotals {
  std::int64_t inputs = 0;  // whole inputs stored
  std::int64_t bytes = 0;   // their bytes
};

class JobInputStore : public virtual Transactions {
 public:
  ~JobInputStore() override = default;

  // The header of the whole input `digest`, or nullopt while it is not whole (or gone).
  virtual std::optional<StoredInput> job_input(const std::string& digest) = 0;
  // A new submission of bytes already stored: marks the whole input `digest` of `bytes` bytes
  // as written at `now` (so the sweep's grace starts again). False when there is none.
  virtual bool claim_job_input(const std::string& digest, std::int64_t bytes, double now) = 0;
  // Writes chunks[k] as chunk `first_seq + k` of `digest`, each in its own transaction, over one
  // already there, at `now`; returns once every one is written (throws when one is not). A
  // backend may write several at once, on connections of its own (PostgreSQL: a chunk's
  // statement is mostly server CPU, so two of them keep two cores busy).
  virtual void put_job_input_chunks(const std::string& digest, std::int64_t first_seq,
                                    std::span<const std::string_view> chunks, double now) = 0;
  // Writes the header `input` (its written_at is `now`) when all input.chunks chunks are
  // stored; returns whether the input is whole now. An existing header is marked written at now.
  virtual bool finish_job_input(const StoredInput& input, double now) = 0;
  // The stored chunks `first` to `last` (inclusive) of `digest`, by seq; one missing is missing
  // from the answer (the caller checks).
  virtual std::vector<std::pair<std::int64_t, std::string>> job_input_chunks(
      const std::string& digest, std::int64_t first, std::int64_t last) = 0;
  // The retention sweep. Removes every input no job needs any more — not the input of an open
  // job, nor of one finished or delivered at or after `finished_since` — whose header was
  // written before `written_before`, and every chunk without a header written before then (a
  // write a crash cut short). The grace protects an input written but not yet named by the job
  // row its submission is about to commit, on this replica or another. The freed space: SQLite
  // files made since schema 18 (auto_vacuum=INCREMENTAL) give it back to the file system; older
  // files and PostgreSQL (autovacuum) reuse it for the next inputs.
  virtual InputsSwept drop_job_inputs(double finished_since, double written_before) = 0;
  // Every whole input, by digest (tests; the operator's view of what inputs hold).
  virtual std::vector<StoredInput> job_inputs() = 0;
  virtual InputTotals job_input_totals() = 0;
};

}  // namespace pf::store
