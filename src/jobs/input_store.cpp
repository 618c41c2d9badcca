#include "jobs/input_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "store/confirm.h"
#include "store/job_store.h"
#include "util/sha256.h"

namespace pf::jobs {

InputStore::InputStore(store::JobInputStore& store, Clock clock, std::int64_t chunk_bytes)
    : store_(store), clock_(std::move(clock)), chunk_bytes_(chunk_bytes) {
  if (chunk_bytes_ < 1) throw InputStoreError("job inputs: the chunk size must be positive");
}

std::int64_t InputStore::chunks_of(std::int64_t bytes) const {
  return (bytes + chunk_bytes_ - 1) / chunk_bytes_;
}

InputStore::Stored InputStore::finish(const std::string& digest, std::int64_t bytes) {
  store::StoredInput header;
  header.digest = digest;
  header.bytes = bytes;
  header.chunk_bytes = chunk_bytes_;
  header.chunks = chunks_of(bytes);
  if (!store_.finish_job_input(header, clock_())) {
    // Only a sweep that outran a write longer than the grace can do this.
    throw InputStoreError("job input " + digest + ": a chunk went missing while it was written");
  }
  return Stored{digest, bytes};
}

InputStore::Stored InputStore::put(std::string_view bytes, const std::string& digest) {
  const std::string address = digest.empty() ? util::sha256_hex(bytes) : digest;
  const auto size = static_cast<std::int64_t>(bytes.size());
  if (store_.claim_job_input(address, size, clock_())) return Stored{address, size};
  std::vector<std::string_view> chunks;
  for (std::int64_t seq = 0, count = chunks_of(size); seq < count; ++seq) {
    chunks.push_back(bytes.substr(static_cast<std::size_t>(seq * chunk_bytes_),
                                  static_cast<std::size_t>(chunk_bytes_)));
  }
  store_.put_job_input_chunks(address, 0, chunks, clock_());
  return finish(address, size);
}

tl::expected<InputStore::Stored, std::string> InputStore::put_file(const std::string& path,
                                                                   const std::string& digest) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return tl::unexpected("cannot open '" + path + "'");
  // Stored whole already: its chunks are vouched for by its header and are not written over.
  if (const auto header = store_.job_input(digest)) return Stored{digest, header->bytes};
  util::Sha256 hash;
  std::string piece(static_cast<std::size_t>(chunk_bytes_), '\0');
  std::int64_t size = 0;
  for (std::int64_t seq = 0;; ++seq) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    const std::string_view data(piece.data(), got);
    hash.update(data);
    store_.put_job_input_chunks(digest, seq, std::span(&data, 1), clock_());
    size += static_cast<std::int64_t>(got);
    if (got < piece.size()) break;
  }
  if (in.bad()) return tl::unexpected("cannot read '" + path + "'");
  if (const auto actual = hash.hex(); actual != digest) {
    return tl::unexpected("'" + path + "' holds bytes whose SHA-256 is " + actual);
  }
  return finish(digest, size);
}

tl::expected<InputStore::Range, std::string> InputStore::read(const std::string& digest,
                                                              std::int64_t offset,
                                                              std::int64_t max_bytes) const {
  try {
    const auto header = store_.job_input(digest);
    if (!header) return tl::unexpected("job input " + digest + " is not stored");
    Range range;
    range.total = header->bytes;
    if (offset < 0 || max_bytes < 1 || offset >= header->bytes) return range;
    const std::int64_t end = std::min(header->bytes, offset + max_bytes);
    const std::int64_t size = header->chunk_bytes;
    const std::int64_t first = offset / size;
    const std::int64_t last = (end - 1) / size;
    const auto chunks = store_.job_input_chunks(digest, first, last);
    range.bytes.reserve(static_cast<std::size_t>(end - offset));
    std::int64_t seq = first;
    for (const auto& [stored_seq, data] : chunks) {
      const std::int64_t start = seq * size;
      const std::int64_t expected = std::min(size, header->bytes - start);
      if (stored_seq != seq || static_cast<std::int64_t>(data.size()) != expected) {
        return tl::unexpected("job input " + digest + ": chunk " + std::to_string(seq) +
                              (stored_seq != seq ? " is missing" : " has the wrong size"));
      }
      const std::int64_t from = std::max(offset, start) - start;
      const std::int64_t to = std::min(end, start + expected) - start;
      range.bytes.append(data, static_cast<std::size_t>(from), static_cast<std::size_t>(to - from));
      ++seq;
    }
    if (seq != last + 1) {
      return tl::unexpected("job input " + digest + ": chunk " + std::to_string(seq) +
                            " is missing");
    }
    return range;
  } catch (const store::StoreError& e) {
    return tl::unexpected(std::string(e.what()));
  }
}

store::InputsSwept InputStore::sweep(double finished_since) {
  return store_.drop_job_inputs(finished_since, clock_() - kInputGraceS);
}

ImportedInputs import_input_files(const std::string& data_dir, store::JobStore& jobs,
                                  InputStore& inputs, double finished_since) {
  namespace fs = std::filesystem;
  ImportedInputs out;
  const fs::path dir = fs::path(data_dir) / "job-inputs";
  std::error_code ec;
  if (data_dir.empty() || !fs::is_directory(dir, ec)) return out;
  const auto in_use_list = jobs.job_inputs_in_use(finished_since);
  const std::set<std::string> in_use(in_use_list.begin(), in_use_list.end());
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    files.push_back(it->path());
  }
  if (ec) {
    out.errors.push_back("cannot list '" + dir.string() + "': " + ec.message());
    return out;
  }
  std::sort(files.begin(), files.end());
  const auto remove = [&](const fs::path& file) {
    std::error_code gone;
    if (fs::remove(file, gone)) {
      ++out.removed;
    } else {
      out.errors.push_back("cannot remove '" + file.string() + "': " + gone.message());
    }
  };
  for (const auto& file : files) {
    const std::string name = file.filename().string();
    if (name.starts_with(".tmp-")) {
      remove(file);  // a write the old store's crash cut short: nothing ever served it
    } else if (!util::is_sha256_hex(name) || !fs::is_regular_file(file, ec)) {
      out.errors.push_back("'" + file.string() + "' is not a job input: left as it is");
    } else if (!in_use.contains(name)) {
      remove(file);
    } else if (auto stored = inputs.put_file(file.string(), name); !stored) {
      out.errors.push_back(stored.error() + ": left as it is");
    } else {
      ++out.imported;
      out.bytes += stored->bytes;
      std::error_code gone;
      if (!fs::remove(file, gone)) {
        out.errors.push_back("imported, but cannot remove '" + file.string() +
                             "': " + gone.message());
      }
    }
  }
  fs::remove(dir, ec);  // only once empty; what was left is named in errors
  return out;
}

}  // namespace pf::jobs
