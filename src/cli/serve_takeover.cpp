#include "cli/serve_takeover.h"

#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace pf::cli {
namespace {

constexpr const char* kHello = "takeover 1 ";
constexpr std::chrono::milliseconds kAcceptPoll{200};

bool is_pid(const std::string& text) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && value > 0;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The line, cut and cleaned for a log (it came from another process).
std::string shown(const std::string& line) {
  std::string out;
  for (const char c : line.substr(0, 80)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

}  // namespace

TakeoverOffer::TakeoverOffer(net::HandoverListener listener, TakeoverHooks hooks,
                             TakeoverTiming timing)
    : listener_(std::move(listener)), hooks_(std::move(hooks)), timing_(timing) {
  thread_ = std::thread([this] { run(); });
}

TakeoverOffer::~TakeoverOffer() {
  stop();
}

void TakeoverOffer::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  listener_.close(!handed_over_);
}

std::string TakeoverOffer::successor() const {
  std::lock_guard lock(mu_);
  return successor_;
}

void TakeoverOffer::run() {
  while (!stopping_) {
    auto channel = listener_.accept(kAcceptPoll);
    if (!channel) {
      hooks_.log(true, "takeover socket: " + channel.error() + "; no takeover is offered now");
      return;
    }
    if (!*channel) continue;
    if (serve_successor(**channel)) {
      handed_over_ = true;
      listener_.close(false);  // the successor binds the path again itself
      return;
    }
  }
}

bool TakeoverOffer::serve_successor(net::HandoverChannel& channel) {
  const auto refuse = [&](const std::string& why) {
    hooks_.log(true, "takeover refused: " + why);
    (void)channel.send("refused " + why.substr(0, 400));  // the successor may have gone already
    return false;
  };
  const auto uid = channel.peer_uid();
  if (!uid) return refuse(uid.error());
  if (*uid != ::geteuid()) {
    return refuse("the process asking runs as uid " + std::to_string(*uid) + ", not as this one");
  }
  auto hello = channel.receive(timing_.hello);
  // A serve starting beside this one connects and leaves at once to see whether the path is
  // taken (net::HandoverListener::listen): not worth a line.
  if (!hello && hello.error().find("closed the channel") != std::string::npos) return false;
  if (!hello) return refuse(hello.error());
  const std::string& line = hello->line;
  if (line.rfind(kHello, 0) != 0 || !is_pid(line.substr(std::string(kHello).size()))) {
    return refuse("expected \"takeover 1 PID\", got \"" + shown(line) + "\"");
  }
  const std::string pid = line.substr(std::string(kHello).size());
  auto sockets = hooks_.sockets();
  if (sockets.empty()) return refuse("this serve holds no listening socket to hand over");
  std::string names = "sockets";
  std::vector<int> fds;
  for (const auto& [name, fd] : sockets) {
    names += " " + name;
    fds.push_back(fd.get());
  }
  if (auto sent = channel.send(names, fds); !sent) {
    hooks_.log(true, "takeover by pid " + pid + " abandoned: " + sent.error());
    return false;
  }
  sockets.clear();  // the successor has its own descriptors now
  hooks_.log(false, "takeover: pid " + pid + " has this serve's sockets; waiting for it to listen");
  auto listening = channel.receive(timing_.listening);
  if (!listening || listening->line != "listening") {
    hooks_.log(true,
               "takeover by pid " + pid + " abandoned before it listened (" +
                   (listening ? "it said \"" + shown(listening->line) + "\"" : listening.error()) +
                   "); this serve goes on as before");
    return false;
  }
  hooks_.retire();
  if (auto sent = channel.send("resigned"); !sent) {
    hooks_.log(true, "takeover by pid " + pid + ": " + sent.error());
  }
  auto leading = channel.receive(timing_.leading);
  if (!leading || leading->line != "leading") {
    hooks_.log(true, "takeover by pid " + pid + " failed after this serve resigned (" +
                         (leading ? "it said \"" + shown(leading->line) + "\"" : leading.error()) +
                         "); this serve competes for the lease again");
    hooks_.rejoin();
    return false;
  }
  hooks_.stop_accepting();
  {
    std::lock_guard lock(mu_);
    successor_ = pid;
  }
  hooks_.log(false, "takeover: pid " + pid + " leads and accepts; this serve drains its calls");
  return true;
}

tl::expected<TakeoverRequest, std::string> TakeoverRequest::start(const std::string& path,
                                                                  TakeoverTiming timing) {
  auto channel = net::HandoverChannel::connect(path);
  if (!channel) return tl::unexpected(channel.error());
  if (auto sent = channel->send(kHello + std::to_string(::getpid())); !sent) {
    return tl::unexpected(sent.error());
  }
  auto reply = channel->receive(timing.hello);
  if (!reply) return tl::unexpected(reply.error());
  const auto parts = words(reply->line);
  if (parts.empty() || parts[0] != "sockets") {
    return tl::unexpected("the running serve did not hand over: " + shown(reply->line));
  }
  if (parts.size() - 1 != reply->fds.size() || reply->fds.empty()) {
    return tl::unexpected("the running serve named " + std::to_string(parts.size() - 1) +
                          " sockets and sent " + std::to_string(reply->fds.size()));
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if ((parts[i] != "http" && parts[i] != "grpc") ||
        std::find(parts.begin() + 1, parts.begin() + i, parts[i]) != parts.begin() + i) {
      return tl::unexpected("the running serve handed over a socket named \"" + shown(parts[i]) +
                            "\" (expected http and grpc, each once)");
    }
  }
  net::ListenFds sockets;
  for (std::size_t i = 1; i < parts.size(); ++i) sockets[parts[i]] = reply->fds[i - 1].release();
  return TakeoverRequest(std::move(*channel), std::move(sockets), timing);
}

tl::expected<void, std::string> TakeoverRequest::listening() {
  if (auto sent = channel_.send("listening"); !sent) return tl::unexpected(sent.error());
  auto reply = channel_.receive(timing_.resigned);
  if (!reply) return tl::unexpected(reply.error());
  if (reply->line != "resigned") {
    return tl::unexpected("the running serve did not resign: " + shown(reply->line));
  }
  return {};
}

tl::expected<void, std::string> TakeoverRequest::leading() {
  return channel_.send("leading");
}

tl::expected<OwnCommand, std::string> read_own_command() {
  OwnCommand command;
  std::error_code ec;
  command.path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return tl::unexpected("reading /proc/self/exe: " + ec.message());
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) return tl::unexpected(std::string("reading /proc/self/cmdline"));
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\0', start);
    command.argv.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (command.argv.empty()) return tl::unexpected(std::string("/proc/self/cmdline is empty"));
  return command;
}

std::vector<std::string> successor_argv(const OwnCommand& command) {
  std::vector<std::string> argv = command.argv;
  if (std::find(argv.begin() + 1, argv.end(), "--takeover") == argv.end()) {
    argv.push_back("--takeover");
  }
  return argv;
}

tl::expected<int, std::string> spawn_successor(const OwnCommand& command) {
  const std::vector<std::string> argv = successor_argv(command);
  std::vector<char*> raw;
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  posix_spawnattr_t attributes;
  if (const int rc = posix_spawnattr_init(&attributes); rc != 0) {
    return tl::unexpected(std::string("posix_spawnattr_init: ") + std::strerror(rc));
  }
  // serve blocks its stop signals in every thread and ignores SIGPIPE; the successor starts
  // with neither, as from a shell.
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  int rc = posix_spawnattr_setsigmask(&attributes, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&attributes, &defaults);
  if (rc == 0) {
    rc = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  pid_t pid = -1;
  if (rc == 0) {
    rc = posix_spawn(&pid, command.path.c_str(), nullptr, &attributes, raw.data(), environ);
  }
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    return tl::unexpected("starting " + command.path + ": " + std::strerror(rc));
  }
  return static_cast<int>(pid);
}

}  // namespace pf::cli
