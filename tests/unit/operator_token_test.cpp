// The fleet's operator token (cli/operator_token.h): one token for every replica on a database,
// its plaintext only in 0600 files, its hash in the database.
#include "cli/operator_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/temp_dir.h"

namespace pf::cli {
namespace {

namespace fs = std::filesystem;

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(OperatorToken, TheFirstStartCreatesTheFileAndRecordsItsHashLaterStartsReuseBoth) {
  pf::testing::TempDir dir("pf_token");
  const std::string db = (fs::path(dir.path()) / "fleet.db").string();
  auto store = store::open_store(db);

  const std::string hash = fleet_operator_token_hash(*store, db);
  const fs::path file = fs::path(dir.path()) / "operator.token";
  ASSERT_TRUE(fs::exists(file));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(manager::hash_token(first_line(file)), hash);
  EXPECT_EQ(store->setting("operator_token_hash"), hash);

  EXPECT_EQ(fleet_operator_token_hash(*store, db), hash);
  EXPECT_EQ(manager::hash_token(first_line(file)), hash);

  // One host: deleting the file makes a new token, and the database follows it.
  fs::remove(file);
  const std::string rotated = fleet_operator_token_hash(*store, db);
  EXPECT_NE(rotated, hash);
  EXPECT_EQ(manager::hash_token(first_line(file)), rotated);
  EXPECT_EQ(store->setting("operator_token_hash"), rotated);
}

TEST(OperatorToken, AReplicaWithoutTheFileServesTheFleetsTokenAndCreatesNoOther) {
  pf::testing::TempDir first_host("pf_token_a");
  pf::testing::TempDir second_host("pf_token_b");
  auto store = store::open_store(":memory:");
  const std::string hash =
      fleet_operator_token_hash(*store, fs::path(first_host.path()) / "operator.token", true);

  EXPECT_EQ(
      fleet_operator_token_hash(*store, fs::path(second_host.path()) / "operator.token", true),
      hash);
  EXPECT_FALSE(fs::exists(fs::path(second_host.path()) / "operator.token"));
}

TEST(OperatorToken, AFileWithAnotherTokenThanTheFleetsIsRefusedAndNothingChanges) {
  pf::testing::TempDir first_host("pf_token_a");
  pf::testing::TempDir second_host("pf_token_b");
  auto store = store::open_store(":memory:");
  const std::string hash =
      fleet_operator_token_hash(*store, fs::path(first_host.path()) / "operator.token", true);
  const fs::path stray = fs::path(second_host.path()) / "operator.token";
  {
    std::ofstream out(stray);
    out << "another-token\n";
  }
  fs::permissions(stray, fs::perms::owner_read | fs::perms::owner_write);
  try {
    fleet_operator_token_hash(*store, stray, true);
    ADD_FAILURE() << "a stray token file was accepted";
  } catch (const CommandFailed& e) {
    EXPECT_NE(std::string(e.what()).find("holds a different token"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("another-token"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store->setting("operator_token_hash"), hash);
}

TEST(OperatorToken, AnExistingFileFromBeforeTheDatabaseRecordedAHashIsAdopted) {
  pf::testing::TempDir dir("pf_token");
  const fs::path file = fs::path(dir.path()) / "operator.token";
  {
    std::ofstream out(file);
    out << "  kept-token \n";
  }
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  auto store = store::open_store(":memory:");
  const std::string hash = fleet_operator_token_hash(*store, file, true);
  EXPECT_EQ(hash, manager::hash_token("kept-token"));
  EXPECT_EQ(store->setting("operator_token_hash"), hash);
}

}  // namespace
}  // namespace pf::cli
