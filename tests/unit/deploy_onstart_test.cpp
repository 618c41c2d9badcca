// The default onstart (manager::kDefaultOnstart) as vast runs it: /bin/sh -c with the rental's
// env. In the agent image (deploy/agent-image/entrypoint.sh installed as
// proverfleet-entrypoint) it starts the supervisor detached and returns at once, the agent
// running on with the manager's environment; without the image's entrypoint (market-sim's
// spawned agents) it runs `proverfleet agent` in the foreground, as it always did. A fake
// `proverfleet` on PATH records how it was started.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "cli/config.h"
#include "manager/deploy_defaults.h"
#include "support/eventually.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pf::test::eventually;
using namespace std::chrono_literals;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_executable(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  fs::permissions(path, fs::perms::owner_all);
}

class DefaultOnstart : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = fs::path(dir_.path()) / "bin";
    fs::create_directories(bin_);
    // The stand-in agent: records its arguments and whether the secret reached it, then runs
    // until SIGTERM. Its SIGTERM handler is set before anything is recorded (a test stops it
    // as soon as the record is there), and the record appears whole (renamed into place): each
    // echo is its own write, and a test that read it after the first line saw no secret line
    // (seen once in a full run).
    write_executable(bin_ / "proverfleet", R"(#!/bin/sh
trap 'exit 0' TERM
echo $$ >"$FAKE_RECORD.pid"
{
  echo "args=$*"
  echo "manager=$PROVERFLEET_MANAGER"
  [ "$PROVERFLEET_SECRET" = "onstart-test-secret" ] && echo "secret=matches"
} >"$FAKE_RECORD.partial"
mv "$FAKE_RECORD.partial" "$FAKE_RECORD"
while :; do sleep 0.1; done
)");
  }

  // A detached supervisor is no child of ours: end it and its agent whatever the test did.
  void TearDown() override {
    std::smatch m;
    const std::string log = read_file(fs::path(dir_.path()) / "var/log/proverfleet/agent.log");
    if (std::regex_search(log, m, std::regex("supervisor pid ([0-9]+)"))) {
      ::kill(std::stoi(m[1].str()), SIGKILL);
    }
    std::ifstream pid_file(record().string() + ".pid");
    if (pid_t agent = 0; pid_file >> agent && agent > 0) ::kill(agent, SIGKILL);
  }

  pf::test::SpawnOptions rental_env() const {
    pf::test::SpawnOptions o;
    o.env["PATH"] = bin_.string() + ":/usr/bin:/bin";
    o.env["FAKE_RECORD"] = record().string();
    o.env["PROVERFLEET_ROOT"] = dir_.path();
    o.env["PROVERFLEET_MANAGER"] = "http://manager.test:8470";
    o.env["PROVERFLEET_DEPLOYMENT"] = "dep-7";
    o.env["PROVERFLEET_SECRET"] = "onstart-test-secret";
    return o;
  }
  fs::path record() const { return fs::path(dir_.path()) / "record"; }

  pf::testing::TempDir dir_{"pf_onstart"};
  fs::path bin_;
};

TEST_F(DefaultOnstart, WithoutTheImagesEntrypointRunsTheAgentInTheForeground) {
  auto shell =
      pf::test::Subprocess::spawn({"/bin/sh", "-c", pf::manager::kDefaultOnstart}, rental_env());
  ASSERT_TRUE(
      eventually([&] { return fs::exists(record()) && !read_file(record()).empty(); }, 60s));
  EXPECT_NE(read_file(record()).find("args=agent\n"), std::string::npos) << read_file(record());
  EXPECT_NE(read_file(record()).find("secret=matches"), std::string::npos);
  // The shell became the agent (exec): the foreground process is the agent itself.
  EXPECT_TRUE(shell.running());
  EXPECT_EQ(shell.terminate(), 0);
}

TEST_F(DefaultOnstart, InTheAgentImageStartsTheEntrypointDetachedAndReturns) {
  fs::copy_file(fs::path(PF_SOURCE_DIR) / "deploy/agent-image/entrypoint.sh",
                bin_ / "proverfleet-entrypoint");
  fs::permissions(bin_ / "proverfleet-entrypoint", fs::perms::owner_all);
  auto shell =
      pf::test::Subprocess::spawn({"/bin/sh", "-c", pf::manager::kDefaultOnstart}, rental_env());
  const auto code = shell.wait_exit(60s);
  ASSERT_TRUE(code.has_value()) << "the onstart did not return";
  EXPECT_EQ(*code, 0) << shell.stderr_text();

  ASSERT_TRUE(
      eventually([&] { return fs::exists(record()) && !read_file(record()).empty(); }, 60s));
  EXPECT_NE(read_file(record()).find("args=agent\n"), std::string::npos) << read_file(record());
  EXPECT_NE(read_file(record()).find("manager=http://manager.test:8470"), std::string::npos);
  EXPECT_NE(read_file(record()).find("secret=matches"), std::string::npos);

  // The supervisor is found through the documented log and stopped like a container would be.
  const fs::path log = fs::path(dir_.path()) / "var/log/proverfleet/agent.log";
  std::smatch m;
  std::string text = read_file(log);
  ASSERT_TRUE(std::regex_search(text, m, std::regex("supervisor pid ([0-9]+)"))) << text;
  const pid_t supervisor = std::stoi(m[1].str());
  ASSERT_EQ(::kill(supervisor, SIGTERM), 0);
  EXPECT_TRUE(eventually([&] { return ::kill(supervisor, 0) != 0; }, 30s));
  EXPECT_TRUE(eventually(
      [&] { return read_file(log).find("stopping the agent") != std::string::npos; }, 30s));
}

TEST(DeployDefaults, TheConfigDefaultsAreTheAgentImagesOnes) {
  const pf::cli::DeploySettings d;
  EXPECT_EQ(d.image, pf::manager::kDefaultImage);
  EXPECT_EQ(d.onstart, pf::manager::kDefaultOnstart);
  // The onstart, args and args_str share vast's 4096-character limit.
  EXPECT_LT(std::string(pf::manager::kDefaultOnstart).size(), 4096u);
}

}  // namespace
