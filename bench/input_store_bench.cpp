// Job inputs through the database (issue 29) against local disk. For a 64 MB input of random
// bytes, best of 3:
//   input_write_mb_per_s_<db>: jobs::InputStore::put (1 MiB chunks, each its own transaction,
//     written by kInputWriters connections at once on PostgreSQL, then the header) on <db> =
//     sqlite (a file database, as serve opens it: WAL, synchronous=NORMAL), pg (a local
//     PostgreSQL server this bench starts, tests/support/pg_server.h, configured as production
//     runs: fsync and full-page writes on) or pg_unsynced (the same without fsync);
//   input_read_mb_per_s_<db>: the same input read back as an agent's download asks for it,
//     4 MiB ranges (the agent route's reply size) through InputStore::read;
//   input_{write,read}_vs_disk_pg: pg's rates over local disk's, on the same machine in the same
//     run, where "local disk" is the file store inputs had before schema 18 as it wrote them:
//     hashed (SHA-256, its name, as put hashes) while written to a temporary file in 1 MiB
//     pieces, fsync'd, renamed into place, the directory fsync'd (an input was durable before
//     its call was acknowledged, as it is in the database now); read back in 4 MiB ranges with
//     pread (the page cache answers: the disk's best case). Target: ≥ 0.5.
//   input_{write,read}_vs_disk_unsynced_<pg_unsynced|sqlite>: the stricter comparison, nothing
//     synced on either side (a disk write lands in the page cache; SQLite's commits are not
//     synced in WAL mode with synchronous=NORMAL).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "jobs/input_store.h"
#include "store/store.h"
#include "support/pg_server.h"
#include "support/timing.h"
#include "util/sha256.h"

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kInputBytes = 64'000'000;
constexpr std::int64_t kReadRange = 4 << 20;  // options.max_input_chunk_bytes: one agent reply
constexpr int kRounds = 3;

using pf::bench::epoch_now;

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

struct Rates {
  double write_s = 1e9;
  double read_s = 1e9;
  bool ok = true;
};

// A fresh input per round (a digest already stored would only be claimed).
Rates through_store(const std::string& url, const char* label) {
  auto store = pf::store::open_store(url);
  pf::jobs::InputStore inputs(*store, epoch_now);
  Rates best;
  for (int round = 0; round < kRounds; ++round) {
    const std::string input = random_bytes(kInputBytes, 100 + static_cast<std::uint64_t>(round));
    pf::jobs::InputStore::Stored stored;
    best.write_s =
        std::min(best.write_s, pf::bench::seconds_of([&] { stored = inputs.put(input); }));
    std::string back;
    best.read_s = std::min(best.read_s, pf::bench::seconds_of([&] {
                             back.clear();
                             while (back.size() < input.size()) {
                               auto range =
                                   inputs.read(stored.digest,
                                               static_cast<std::int64_t>(back.size()), kReadRange);
                               if (!range || range->bytes.empty()) break;
                               back += range->bytes;
                             }
                           }));
    if (back != input) {
      std::fprintf(stderr, "%s: the input read back differs (%zu bytes)\n", label, back.size());
      best.ok = false;
      return best;
    }
  }
  return best;
}

// The file store as it was: `synced` as it wrote inputs (file and directory fsync'd).
Rates through_disk(const fs::path& dir, bool synced) {
  Rates best;
  for (int round = 0; round < kRounds; ++round) {
    const std::string input = random_bytes(kInputBytes, 200 + static_cast<std::uint64_t>(round));
    const fs::path temp = dir / ".tmp-input";
    const fs::path file = dir / ("input-" + std::to_string(round));
    std::string file_name;
    best.write_s = std::min(
        best.write_s, pf::bench::seconds_of([&] {
          const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
          pf::util::Sha256 hash;
          std::size_t done = 0;
          while (fd >= 0 && done < input.size()) {
            const std::size_t piece = std::min<std::size_t>(1 << 20, input.size() - done);
            hash.update(std::string_view(input).substr(done, piece));
            const auto n = ::write(fd, input.data() + done, piece);
            if (n != static_cast<ssize_t>(piece)) break;
            done += piece;
          }
          file_name = hash.hex();  // the name the file store gave it
          best.ok = best.ok && fd >= 0 && done == input.size() && (!synced || ::fsync(fd) == 0) &&
                    ::close(fd) == 0;
          fs::rename(temp, file);
          if (synced) {
            const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            best.ok = best.ok && dir_fd >= 0 && ::fsync(dir_fd) == 0;
            if (dir_fd >= 0) ::close(dir_fd);
          }
        }));
    std::string back;
    best.read_s = std::min(best.read_s, pf::bench::seconds_of([&] {
                             const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
                             back.clear();
                             std::string range(static_cast<std::size_t>(kReadRange), '\0');
                             while (fd >= 0 && back.size() < input.size()) {
                               const auto n = ::pread(fd, range.data(), range.size(),
                                                      static_cast<off_t>(back.size()));
                               if (n <= 0) break;
                               back.append(range, 0, static_cast<std::size_t>(n));
                             }
                             if (fd >= 0) ::close(fd);
                           }));
    best.ok = best.ok && back == input && file_name == pf::util::sha256_hex(input);
    fs::remove(file);
  }
  return best;
}

}  // namespace

int main() {
  const fs::path dir =
      fs::temp_directory_path() / ("pf-input-store-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Rates disk, disk_unsynced, sqlite, pg, pg_unsynced;
  bool ok = true;
  try {
    disk = through_disk(dir, true);
    disk_unsynced = through_disk(dir, false);
    sqlite = through_store((dir / "bench.db").string(), "sqlite");
    {
      pf::test::PgServer server(pf::test::PgServer::Durability::Synced);
      pg = through_store(server.url("postgres"), "pg");
    }
    pf::test::PgServer server;
    pg_unsynced = through_store(server.url("postgres"), "pg_unsynced");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "input_store_bench: %s\n", error.what());
    ok = false;
  }
  fs::remove_all(dir);
  ok = ok && disk.ok && disk_unsynced.ok && sqlite.ok && pg.ok && pg_unsynced.ok;
  if (!ok) return 1;
  const double mb = kInputBytes / 1e6;
  const auto print = [&](const std::string& db, const Rates& r, const Rates& base,
                         const std::string& base_name) {
    pf::bench::print_figure("input_write_mb_per_s_" + db, mb / r.write_s, 0);
    pf::bench::print_figure("input_read_mb_per_s_" + db, mb / r.read_s, 0);
    pf::bench::print_figure("input_write_vs_" + base_name + "_" + db, base.write_s / r.write_s, 3);
    pf::bench::print_figure("input_read_vs_" + base_name + "_" + db, base.read_s / r.read_s, 3);
  };
  print("pg", pg, disk, "disk");
  print("pg_unsynced", pg_unsynced, disk_unsynced, "disk_unsynced");
  print("sqlite", sqlite, disk_unsynced, "disk_unsynced");
  std::printf(
      "# %.0f MB input, best of %d; local disk: write %.0f MB/s synced, %.0f MB/s unsynced; "
      "read (4 MiB ranges) %.0f MB/s\n",
      mb, kRounds, mb / disk.write_s, mb / disk_unsynced.write_s, mb / disk.read_s);
  return 0;
}
