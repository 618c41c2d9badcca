// The ctest fixture that gives a whole test run one PostgreSQL server (tests/support/pg_server.h):
//
//   pf_test_pg_server start DIR   initdb + start; writes DIR/url (the server's URL) and
//                                 DIR/server-dir (where its data lives); exits, server running
//   pf_test_pg_server stop DIR    stops that server and removes its data
//
// CMakeLists.txt registers them as pg_server_start (FIXTURES_SETUP pg) and pg_server_stop
// (FIXTURES_CLEANUP pg); every test gets PF_TEST_PG_URL_FILE=DIR/url, which fresh_pg_database()
// reads. A start that finds a server left by an interrupted run stops that one first.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/pg_server.h"

namespace {

namespace fs = std::filesystem;

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    out.close();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

void stop(const fs::path& dir) {
  const fs::path server_dir_file = dir / "server-dir";
  if (fs::exists(server_dir_file)) {
    std::string server_dir = pf::test::pg_server_detail::read_text(server_dir_file);
    while (!server_dir.empty() && server_dir.back() == '\n') server_dir.pop_back();
    if (!server_dir.empty()) {
      pf::test::PgServer::stop_at(server_dir);
      std::printf("pf_test_pg_server: stopped the server in %s\n", server_dir.c_str());
    }
  }
  fs::remove(dir / "url");
  fs::remove(server_dir_file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "start" && std::string(argv[1]) != "stop")) {
    std::fprintf(stderr, "usage: %s start|stop DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[2];
  try {
    fs::create_directories(dir);
    stop(dir);  // a start after an interrupted run finds that run's server still going
    if (std::string(argv[1]) == "stop") return 0;
    pf::test::PgServer server;
    write_atomically(dir / "server-dir", server.dir().string());
    write_atomically(dir / "url", server.url("postgres"));
    server.release();
    std::printf("pf_test_pg_server: PostgreSQL at %s (data in %s)\n", server.url().c_str(),
                server.dir().c_str());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "pf_test_pg_server %s: %s\n", argv[1], error.what());
    return 1;
  }
}
