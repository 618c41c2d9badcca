#include "cli/secrets.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cli/commands.h"
#include "core/text.h"

namespace pf::cli {

void add_refused_secret_flag(CLI::App* cmd, RefusedSecretFlag& refused) {
  cmd->add_option(refused.flag, refused.value,
                  "Refused: a command line is visible to every local user; use " + refused.instead);
}

void check_refused_secret_flag(const RefusedSecretFlag& refused) {
  if (!refused.value) return;
  throw CommandFailed(refused.flag +
                      " is refused: a command line is visible to every local user (ps, "
                      "/proc/PID/cmdline); pass it in " +
                      refused.instead);
}

std::optional<std::string> secret_from_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  std::string text = core::trim(value);
  if (text.empty()) return std::nullopt;
  return text;
}

std::string read_secret_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw CommandFailed("cannot read " + what + " file '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw CommandFailed(what + " file '" + path + "' is not a regular file");
  }
  if ((st.st_mode & S_IROTH) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    throw CommandFailed(what + " file '" + path + "' is readable by every user (mode " + mode +
                        "); chmod 600 it");
  }
  std::ifstream in(path);
  if (!in) {
    throw CommandFailed("cannot read " + what + " file '" + path + "': " + std::strerror(errno));
  }
  std::string line;
  std::getline(in, line);
  line = core::trim(line);
  if (line.empty()) throw CommandFailed(what + " file '" + path + "' is empty");
  return line;
}

}  // namespace pf::cli
