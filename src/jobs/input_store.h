// Job inputs, content-addressed by SHA-256, in the fleet's database (store/job_input_store.h):
// whichever replica leads reads what any replica wrote, so replicas on separate hosts share
// nothing but the database (issue 29).
//
// An input is written in chunks of kInputChunkBytes, each in its own transaction, and becomes
// readable only when its header is written after the last chunk: a crash mid-write leaves
// chunks no reader serves, which the sweep removes after the grace. Reads fetch only the chunks
// a range covers, so neither side holds a whole input for an agent's ranged download.
//
// Before schema 18 inputs were files (<data_dir>/job-inputs/<sha256>); import_input_files moves
// those an open or retained job names into the database when a term begins.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "store/job_input_store.h"

namespace pf::store {
class JobStore;
}

namespace pf::jobs {

struct InputStoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bytes per stored chunk. 1 MiB: a range read costs at most one chunk more than it asked for,
// and a chunk is one short transaction (a heartbeat never waits behind a whole input).
inline constexpr std::int64_t kInputChunkBytes = 1 << 20;
// How long an input (or a chunk of one being written) no job names yet is kept: a submission
// writes its input and then, within moments, the row naming it; a sweep on any replica must not
// fall between the two.
inline constexpr double kInputGraceS = 15 * 60;

class InputStore {
 public:
  using Clock = std::function<double()>;  // epoch seconds: when chunks and headers are written
  InputStore(store::JobInputStore& store, Clock clock, std::int64_t chunk_bytes = kInputChunkBytes);

  struct Stored {
    std::string digest;
    std::int64_t bytes = 0;
  };
  // Stores `bytes` under its digest (`digest` when the caller computed it already; bytes already
  // stored are claimed, not written again). Throws store::StoreError (the database failed) or
  // InputStoreError.
  Stored put(std::string_view bytes, const std::string& digest = {});
  // Stores the file at `path` as the input `digest`, read and written a chunk at a time. Error:
  // the file cannot be read, or its bytes are not `digest` (what was written then is swept).
  // An input already stored whole is left as it is.
  // Throws store::StoreError.
  tl::expected<Stored, std::string> put_file(const std::string& path, const std::string& digest);

  struct Range {
    std::string bytes;
    std::int64_t total = 0;  // the whole input's size
  };
  // Up to max_bytes from offset (an offset at or past the end returns no bytes). Error: the
  // input is not stored whole, a chunk is missing or has the wrong size, or the database failed.
  tl::expected<Range, std::string> read(const std::string& digest, std::int64_t offset,
                                        std::int64_t max_bytes) const;

  // The retention sweep (store::JobInputStore::drop_job_inputs with this store's grace).
  store::InputsSwept sweep(double finished_since);

 private:
  std::int64_t chunks_of(std::int64_t bytes) const;
  // The header once every chunk is written; throws InputStoreError when one went missing.
  Stored finish(const std::string& digest, std::int64_t bytes);

  store::JobInputStore& store_;
  Clock clock_;
  std::int64_t chunk_bytes_;
};

// Schema-18 upgrade: the input files under <data_dir>/job-inputs that a job still needs
// (store::JobStore::job_inputs_in_use since `finished_since`) are copied into the store in
// chunks (never whole in memory), checked against their names, and removed; stray temporary
// files (".tmp-*") and files no job needs are removed too; anything else is left and named in
// `errors`. The directory goes once it is empty. No directory: nothing to do.
struct ImportedInputs {
  int imported = 0;
  std::int64_t bytes = 0;
  int removed = 0;                  // files no job needed, and temporary files
  std::vector<std::string> errors;  // files left where they are, and why
};
ImportedInputs import_input_files(const std::string& data_dir, store::JobStore& jobs,
                                  InputStore& inputs, double finished_since);

}  // namespace pf::jobs
