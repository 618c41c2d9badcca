#include "cli/operator_token.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "cli/commands.h"
#include "core/text.h"
#include "manager/tokens.h"
#include "store/settings_store.h"
#include "store/store_url.h"

namespace pf::cli {
namespace {

// The setting that holds the fleet's operator token hash (shared by every replica).
constexpr const char* kOperatorTokenHashKey = "operator_token_hash";

}  // namespace

// The operator token lives next to a file database; for ":memory:" and server URLs, in the
// working directory.
std::filesystem::path operator_token_path(const std::string& db) {
  std::string path = db;
  if (path.rfind("sqlite:", 0) == 0) path = path.substr(7);
  if (path == ":memory:" || path.find("://") != std::string::npos) return "operator.token";
  return std::filesystem::path(path).parent_path() / "operator.token";
}

// Reuses the token file, or creates it (mode 0600, exclusive create so two starts cannot
// write different tokens).
std::string load_or_create_operator_token(const std::filesystem::path& path) {
  const std::string shown = std::filesystem::absolute(path).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    const std::string token = manager::random_token();
    const std::string line = token + "\n";
    const bool written =
        ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
        ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
      std::filesystem::remove(path);
      throw CommandFailed("cannot write operator token file " + shown + ": " +
                          std::strerror(errno));
    }
    spdlog::info("operator token: created {} (mode 0600); clients read it with --token-file",
                 shown);
    return token;
  }
  if (errno != EEXIST) {
    throw CommandFailed("cannot create operator token file " + shown + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw CommandFailed("operator token path " + shown + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    spdlog::warn("operator token file {} is readable by other users (mode {:o}); chmod 600 it",
                 shown, st.st_mode & 0777);
  }
  std::ifstream file(path);
  std::string token;
  std::getline(file, token);
  token = core::trim(token);
  if (!file && token.empty()) throw CommandFailed("cannot read operator token file " + shown);
  if (token.empty()) {
    throw CommandFailed("operator token file " + shown +
                        " is empty; delete it to have a new token created");
  }
  spdlog::info("operator token: using {}", shown);
  return token;
}

std::string fleet_operator_token_hash(store::SettingsStore& store, const std::string& db) {
  return fleet_operator_token_hash(store, operator_token_path(db), store::is_postgres_url(db));
}

std::string fleet_operator_token_hash(store::SettingsStore& store,
                                      const std::filesystem::path& path, bool shared_database) {
  if (!shared_database) {
    const std::string hash = manager::hash_token(load_or_create_operator_token(path));
    store.put_setting(kOperatorTokenHashKey, hash);
    return hash;
  }
  const std::optional<std::string> recorded = store.setting(kOperatorTokenHashKey);
  std::error_code ec;
  const bool have_file = std::filesystem::exists(path, ec);
  if (recorded && !have_file) {
    spdlog::info(
        "operator token: the fleet's (recorded in the database by the replica that created it; "
        "copy its operator.token to {} to use the CLI on this host)",
        std::filesystem::absolute(path).string());
    return *recorded;
  }
  const std::string hash = manager::hash_token(load_or_create_operator_token(path));
  if (!recorded) {
    store.put_setting(kOperatorTokenHashKey, hash);
    // Two replicas starting at once may both have recorded theirs: the one read back wins.
    const auto now_recorded = store.setting(kOperatorTokenHashKey);
    if (now_recorded && *now_recorded == hash) return hash;
  } else if (*recorded == hash) {
    return hash;
  }
  throw CommandFailed("operator token file " + std::filesystem::absolute(path).string() +
                      " holds a different token from the one this fleet's database records "
                      "(another replica created the fleet's token): copy that replica's "
                      "operator.token here, or remove this file to serve with the fleet's token");
}

}  // namespace pf::cli
