// PgConnection (src/store/pg_connection.*) against a real PostgreSQL server
// (tests/support/pg_server.h): every value type and its edges, named parameters, transactions,
// savepoints, the schema version, errors, and surviving a server restart.
#include "store/pg_connection.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/pg_server.h"

namespace {

using pf::store::PgConnection;
using pf::store::StoreError;
using pf::store::pg_detail::to_positional_parameters;
using pf::store::sql::Statement;

// --- ":name" → $k (no server) ------------------------------------------------------------------

TEST(PgPositionalParameters, NumbersNamesInOrderOfFirstUseAndReusesThem) {
  const auto p = to_positional_parameters("UPDATE t SET a = :a, b = :b WHERE id = :id OR a = :a");
  EXPECT_EQ(p.text, "UPDATE t SET a = $1, b = $2 WHERE id = $3 OR a = $1");
  EXPECT_EQ(p.names, (std::vector<std::string>{":a", ":b", ":id"}));
}

TEST(PgPositionalParameters, LeavesCastsQuotesCommentsAndQuestionMarksAlone) {
  const auto p = to_positional_parameters(
      "SELECT :v::bigint, x::text, 'it''s :no ?', \"col:no\", E'a\\':no', $q$ :no $q$, "
      "$$:no$$ -- :no\n/* :no /* :no */ :no */ ? FROM t WHERE y = :w");
  EXPECT_EQ(p.text,
            "SELECT $1::bigint, x::text, 'it''s :no ?', \"col:no\", E'a\\':no', $q$ :no $q$, "
            "$$:no$$ -- :no\n/* :no /* :no */ :no */ ? FROM t WHERE y = $2");
  EXPECT_EQ(p.names, (std::vector<std::string>{":v", ":w"}));
}

TEST(PgPositionalParameters, AWordEndingInEIsNoEscapeString) {
  // "some'…'" is no E-string: the backslash ends nothing, the quote does.
  const auto p = to_positional_parameters("SELECT 'a\\' || :x, ne'b' AS c");
  EXPECT_EQ(p.text, "SELECT 'a\\' || $1, ne'b' AS c");
}

// --- on the server
// --------------------------------------------------------------------------------

class PgConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = pf::test::fresh_pg_database();
    conn_ = std::make_unique<PgConnection>(url_);
    conn_->exec(
        "CREATE TABLE v (id BIGINT PRIMARY KEY, i BIGINT, r DOUBLE PRECISION, s TEXT, b BYTEA)",
        "creating v");
  }

  void insert(std::int64_t id) {
    Statement st(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting");
    st.bind_int(":id", id);
    st.run();
  }
  std::int64_t count(PgConnection& conn) {
    Statement st(conn, "SELECT count(*) AS n FROM v", "counting");
    EXPECT_TRUE(st.next());
    return st.integer("n");
  }

  std::string url_;
  std::unique_ptr<PgConnection> conn_;
};

TEST_F(PgConnectionTest, IntegersRoundTripOverTheFullRange) {
  const std::vector<std::int64_t> values{0,
                                         1,
                                         -1,
                                         std::numeric_limits<std::int32_t>::max() + 1LL,
                                         std::numeric_limits<std::int64_t>::max(),
                                         std::numeric_limits<std::int64_t>::min()};
  for (std::size_t k = 0; k < values.size(); ++k) {
    Statement ins(*conn_, "INSERT INTO v (id, i) VALUES (:id, :i)", "inserting");
    ins.bind_int(":id", static_cast<std::int64_t>(k));
    ins.bind_int(":i", values[k]);
    ins.run();
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    Statement sel(*conn_, "SELECT i FROM v WHERE id = :id", "reading");
    sel.bind_int(":id", static_cast<std::int64_t>(k));
    ASSERT_TRUE(sel.next());
    EXPECT_EQ(sel.integer("i"), values[k]);
    EXPECT_FALSE(sel.next());
  }
}

TEST_F(PgConnectionTest, DoublesRoundTripExactlyIncludingEdgesAndInfinities) {
  const std::vector<double> values{0.0,
                                   -0.0,
                                   0.1,
                                   1.0 / 3.0,
                                   -2.5e-7,
                                   3.141592653589793,
                                   1e300,
                                   std::numeric_limits<double>::max(),
                                   std::numeric_limits<double>::lowest(),
                                   std::numeric_limits<double>::min(),
                                   std::numeric_limits<double>::denorm_min(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity()};
  for (std::size_t k = 0; k < values.size(); ++k) {
    Statement ins(*conn_, "INSERT INTO v (id, r) VALUES (:id, :r)", "inserting");
    ins.bind_int(":id", static_cast<std::int64_t>(k));
    ins.bind_real(":r", values[k]);
    ins.run();
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    Statement sel(*conn_, "SELECT r FROM v WHERE id = :id", "reading");
    sel.bind_int(":id", static_cast<std::int64_t>(k));
    ASSERT_TRUE(sel.next());
    const double got = sel.real("r");
    EXPECT_EQ(got, values[k]) << k;
    EXPECT_EQ(std::signbit(got), std::signbit(values[k])) << k;
  }
  // NaN is refused before it reaches the server (the store never stores one).
  Statement nan(*conn_, "INSERT INTO v (id, r) VALUES (99, :r)", "inserting NaN");
  EXPECT_THROW(nan.bind_real(":r", std::nan("")), StoreError);
}

TEST_F(PgConnectionTest, TextAndBytesRoundTripWhateverTheyHold) {
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  const std::vector<std::pair<std::string, std::string>> values{
      {"", ""},
      {"it's a 'quote' with :colon, ::cast, ? and $1", std::string("\0", 1)},
      {"π ≈ 3.14 🚀", std::string("\xff\x00\xfe", 3)},
      {std::string(100000, 'x'), all_bytes},
  };
  for (std::size_t k = 0; k < values.size(); ++k) {
    Statement ins(*conn_, "INSERT INTO v (id, s, b) VALUES (:id, :s, :b)", "inserting");
    ins.bind_int(":id", static_cast<std::int64_t>(k));
    ins.bind_text(":s", values[k].first);
    ins.bind_blob(":b", values[k].second);
    ins.run();
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    Statement sel(*conn_, "SELECT s, b, length(b) AS n FROM v WHERE id = :id", "reading");
    sel.bind_int(":id", static_cast<std::int64_t>(k));
    ASSERT_TRUE(sel.next());
    EXPECT_EQ(sel.text("s"), values[k].first) << k;
    EXPECT_EQ(sel.blob("b"), values[k].second) << k;
    EXPECT_EQ(sel.integer("n"), static_cast<std::int64_t>(values[k].second.size())) << k;
  }
}

TEST_F(PgConnectionTest, KindSaysWhatEachColumnHolds) {
  Statement ins(*conn_, "INSERT INTO v (id, i, r, s, b) VALUES (1, 2, 0.5, 'x', '\\x00')",
                "inserting");
  ins.run();
  Statement sel(*conn_, "SELECT id, i, r, s, b, NULL::bigint AS n, TRUE AS t FROM v", "reading");
  ASSERT_TRUE(sel.next());
  using pf::store::sql::ValueKind;
  auto& c = sel.cursor();
  EXPECT_EQ(c.kind(c.column("i")), ValueKind::Integer);
  EXPECT_EQ(c.kind(c.column("r")), ValueKind::Real);
  EXPECT_EQ(c.kind(c.column("s")), ValueKind::Text);
  EXPECT_EQ(c.kind(c.column("b")), ValueKind::Blob);
  EXPECT_EQ(c.kind(c.column("n")), ValueKind::Null);
  EXPECT_EQ(c.kind(c.column("t")), ValueKind::Integer);
  EXPECT_EQ(sel.integer("t"), 1);
  EXPECT_EQ(sel.blob("b"), std::string(1, '\0'));
}

TEST_F(PgConnectionTest, NullsBindAndReadAsNull) {
  Statement ins(*conn_, "INSERT INTO v (id, i, r, s, b) VALUES (:id, :i, :r, :s, :b)", "inserting");
  ins.bind_int(":id", 1);
  ins.bind_null(":i");
  ins.bind_opt_real(":r", std::nullopt);
  ins.bind_null(":s");
  ins.bind_null(":b");
  ins.run();
  Statement sel(*conn_, "SELECT i, r, s, b FROM v WHERE id = 1", "reading");
  ASSERT_TRUE(sel.next());
  for (const char* col : {"i", "r", "s", "b"}) EXPECT_TRUE(sel.is_null(col)) << col;
  EXPECT_EQ(sel.opt_integer("i"), std::nullopt);
  EXPECT_EQ(sel.opt_real("r"), std::nullopt);
  EXPECT_EQ(sel.text("s"), "");
}

TEST_F(PgConnectionTest, ANameUsedTwiceIsOneParameterAndCastsAndQuotedColonsStay) {
  Statement st(*conn_,
               "SELECT :a::bigint + :a::bigint AS twice, ':not_a_param ?' AS lit, "
               "CAST(:b AS text) || '::x' AS b, :a::text AS a_text",
               "selecting");
  st.bind_int(":a", 21);
  st.bind_text(":b", "b:");
  ASSERT_TRUE(st.next());
  EXPECT_EQ(st.integer("twice"), 42);
  EXPECT_EQ(st.text("lit"), ":not_a_param ?");
  EXPECT_EQ(st.text("b"), "b:::x");
  EXPECT_EQ(st.text("a_text"), "21");
  EXPECT_EQ(st.cursor().column_count(), 4);
  EXPECT_EQ(st.cursor().column_name(1), "lit");
}

TEST_F(PgConnectionTest, AStatementIsReusedWithNewValuesAndTwoCanBeOpenAtOnce) {
  for (int id = 1; id <= 3; ++id) insert(id);
  Statement outer(*conn_, "SELECT id FROM v ORDER BY id", "listing");
  std::vector<std::int64_t> seen;
  while (outer.next()) {
    // The same SQL text while the outer one is still being read.
    Statement inner(*conn_, "SELECT id FROM v ORDER BY id", "listing again");
    ASSERT_TRUE(inner.next());
    EXPECT_EQ(inner.integer("id"), 1);
    seen.push_back(outer.integer("id"));
  }
  EXPECT_EQ(seen, (std::vector<std::int64_t>{1, 2, 3}));
}

TEST_F(PgConnectionTest, ChangesCountsTheRowsAStatementChanged) {
  for (int id = 1; id <= 3; ++id) insert(id);
  Statement up(*conn_, "UPDATE v SET i = 7 WHERE id >= :from", "updating");
  up.bind_int(":from", 2);
  up.run();
  EXPECT_EQ(up.changes(), 2);
  Statement del(*conn_, "DELETE FROM v WHERE id > 100", "deleting");
  del.run();
  EXPECT_EQ(del.changes(), 0);
  Statement conflict(*conn_, "INSERT INTO v (id) VALUES (1) ON CONFLICT (id) DO NOTHING",
                     "inserting again");
  conflict.run();
  EXPECT_EQ(conflict.changes(), 0);
}

TEST_F(PgConnectionTest, CommitKeepsAndRollbackDropsWhatTheTransactionWrote) {
  PgConnection other(url_);
  conn_->begin();
  insert(1);
  EXPECT_EQ(count(other), 0) << "uncommitted rows are not visible elsewhere";
  conn_->commit();
  EXPECT_EQ(count(other), 1);

  conn_->begin();
  insert(2);
  conn_->rollback_quietly();
  EXPECT_EQ(count(other), 1);
  conn_->rollback_quietly();  // outside a transaction: nothing to do, no throw
  EXPECT_THROW(conn_->commit(), StoreError);
}

// --- held-back writes: BEGIN and run_or_defer() writes travel with the next answer -------------

TEST_F(PgConnectionTest, HeldBackWritesAreSeenByTheNextReadAndCommittedWithTheTransaction) {
  PgConnection other(url_);
  conn_->begin();
  for (std::int64_t id = 1; id <= 3; ++id) {
    Statement st(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting held back");
    st.bind_int(":id", id);
    EXPECT_FALSE(st.run_or_defer()) << "inside a transaction the write waits";
  }
  EXPECT_EQ(count(*conn_), 3) << "the read travels after the writes, in the same transaction";
  EXPECT_EQ(count(other), 0);
  Statement last(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting held back");
  last.bind_int(":id", 4);
  EXPECT_FALSE(last.run_or_defer());
  conn_->commit();  // sends the last write with the COMMIT
  EXPECT_EQ(count(other), 4);

  Statement now(*conn_, "UPDATE v SET i = 7 WHERE id <= 2", "updating outside a transaction");
  EXPECT_TRUE(now.run_or_defer()) << "outside a transaction it runs at once";
  EXPECT_EQ(now.changes(), 2);
}

TEST_F(PgConnectionTest, AHeldBackWriteThatFailsFailsTheStatementItTravelledWithNamingItself) {
  insert(1);
  conn_->begin();
  Statement dup(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting the duplicate");
  dup.bind_int(":id", 1);
  EXPECT_FALSE(dup.run_or_defer());
  try {
    count(*conn_);
    FAIL() << "the failed write went unnoticed";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("inserting the duplicate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("SQLSTATE 23505"), std::string::npos) << e.what();
  }
  EXPECT_THROW(conn_->commit(), StoreError);
  conn_->rollback_quietly();
  EXPECT_EQ(count(*conn_), 1);
  conn_->begin();  // the session goes on
  insert(2);
  conn_->commit();
  EXPECT_EQ(count(*conn_), 2);
}

TEST_F(PgConnectionTest, AHeldBackWriteThatFailsAtCommitCommitsNothing) {
  insert(1);
  PgConnection other(url_);
  conn_->begin();
  for (const std::int64_t id : {2, 1, 3}) {
    Statement st(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting " + std::to_string(id));
    st.bind_int(":id", id);
    EXPECT_FALSE(st.run_or_defer());
  }
  try {
    conn_->commit();
    FAIL() << "committed over a failed write";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("inserting 1"), std::string::npos) << e.what();
  }
  conn_->rollback_quietly();  // the skipped COMMIT left the transaction open: this ends it
  EXPECT_EQ(count(other), 1) << "neither the write before the failure nor the one after";
  conn_->begin();
  insert(4);
  conn_->commit();
  EXPECT_EQ(count(other), 2);
}

// A transaction of held writes alone, its commit sent ahead (the agent path's).
std::shared_ptr<pf::store::sql::SentCommit> send_inserts(PgConnection& conn,
                                                         const std::vector<std::int64_t>& ids) {
  conn.begin();
  for (const std::int64_t id : ids) {
    Statement st(conn, "INSERT INTO v (id) VALUES (:id)", "inserting " + std::to_string(id));
    st.bind_int(":id", id);
    EXPECT_FALSE(st.run_or_defer());
  }
  return conn.commit_sent();
}

TEST_F(PgConnectionTest, CommitsSentAheadApplyInOrderAndTheNextUseReadsTheirOutcomes) {
  insert(1);  // prepares the INSERT on the session: only prepared writes are sent ahead
  PgConnection other(url_);
  auto a = send_inserts(*conn_, {10, 11});
  auto b = send_inserts(*conn_, {12});
  auto c = send_inserts(*conn_, {13, 14});
  EXPECT_FALSE(a->done);  // sent: the answers are read by whoever next needs one
  EXPECT_FALSE(c->done);
  EXPECT_EQ(count(*conn_), 6);
  for (const auto& sent : {a, b, c}) {
    EXPECT_TRUE(sent->done);
    EXPECT_EQ(sent->error, "");
  }
  EXPECT_EQ(count(other), 6);
  EXPECT_EQ(conn_->read_arrived(), -1);  // nothing outstanding
}

TEST_F(PgConnectionTest, ASentCommitThatFailsUndoesItselfAloneAndTellsTheHook) {
  insert(1);
  int failures_told = 0;
  conn_->on_sent_outcomes([&](bool failed) { failures_told += failed ? 1 : 0; });
  auto before = send_inserts(*conn_, {5});
  auto failing = send_inserts(*conn_, {6, 1, 7});  // 1 exists: the whole segment is undone
  auto after = send_inserts(*conn_, {8});
  // The answers arrive without anyone else using the connection.
  for (int i = 0; i < 2000 && !after->done; ++i) {
    const int socket = conn_->read_arrived();
    if (socket < 0) break;
    pollfd wake{socket, POLLIN, 0};
    ASSERT_GE(poll(&wake, 1, 10), 0);
  }
  ASSERT_TRUE(before->done && failing->done && after->done);
  EXPECT_EQ(before->error, "");
  EXPECT_NE(failing->error.find("inserting 1"), std::string::npos) << failing->error;
  EXPECT_NE(failing->error.find("23505"), std::string::npos) << failing->error;
  EXPECT_EQ(after->error, "");
  EXPECT_EQ(failures_told, 1);
  Statement ids(*conn_, "SELECT id FROM v ORDER BY id", "listing");
  std::vector<std::int64_t> got;
  while (ids.next()) got.push_back(ids.integer("id"));
  EXPECT_EQ(got, (std::vector<std::int64_t>{1, 5, 8}));
}

TEST_F(PgConnectionTest, ATransactionThatReadOrIsUnpreparedIsCommittedInPlace) {
  // Not yet prepared on this session: committed here (the prepare needs its own answer).
  auto first = send_inserts(*conn_, {1});
  EXPECT_TRUE(first->done);
  EXPECT_EQ(first->error, "");
  conn_->begin();
  EXPECT_EQ(count(*conn_), 1);  // BEGIN went out with this read
  Statement st(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting 2");
  st.bind_int(":id", 2);
  EXPECT_FALSE(st.run_or_defer());
  auto read_first = conn_->commit_sent();
  EXPECT_TRUE(read_first->done);
  EXPECT_EQ(count(*conn_), 2);
  // A transaction that sent nothing at all ends without a round trip, and without error.
  conn_->begin();
  conn_->commit();
  EXPECT_EQ(count(*conn_), 2);
}

TEST_F(PgConnectionTest, RollingBackToASavepointDropsTheWritesHeldSinceIt) {
  insert(1);
  conn_->begin();
  Statement kept(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting before the savepoint");
  kept.bind_int(":id", 2);
  EXPECT_FALSE(kept.run_or_defer());
  conn_->exec("SAVEPOINT attempt", "saving");  // sends the write held before it
  Statement dup(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting the duplicate");
  dup.bind_int(":id", 1);
  EXPECT_FALSE(dup.run_or_defer());
  conn_->exec("ROLLBACK TO SAVEPOINT attempt", "recovering");  // the duplicate is never sent
  insert(3);
  conn_->commit();
  EXPECT_EQ(count(*conn_), 3);
}

TEST_F(PgConnectionTest, ManyHeldBackWritesGoOutInBatchesAndRollbackDropsTheUnsent) {
  const auto write_ids = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t id = from; id < to; ++id) {
      Statement st(*conn_, "INSERT INTO v (id) VALUES (:id)", "inserting many");
      st.bind_int(":id", id);
      st.run_or_defer();
    }
  };
  conn_->begin();
  write_ids(0, 3 * static_cast<std::int64_t>(PgConnection::kMaxHeldBack) + 5);
  conn_->commit();
  EXPECT_EQ(count(*conn_), 3 * static_cast<std::int64_t>(PgConnection::kMaxHeldBack) + 5);

  // Rolled back with BEGIN and the writes still held, and with some already sent.
  conn_->begin();
  write_ids(1000, 1003);
  conn_->rollback_quietly();
  conn_->begin();
  write_ids(2000, 2000 + static_cast<std::int64_t>(PgConnection::kMaxHeldBack) + 3);
  conn_->rollback_quietly();
  EXPECT_EQ(count(*conn_), 3 * static_cast<std::int64_t>(PgConnection::kMaxHeldBack) + 5);
}

TEST_F(PgConnectionTest, SavepointsNestInsideATransaction) {
  conn_->begin();
  insert(1);
  conn_->exec("SAVEPOINT inner_write", "saving");
  insert(2);
  conn_->exec("ROLLBACK TO SAVEPOINT inner_write", "rolling back to the savepoint");
  conn_->exec("RELEASE SAVEPOINT inner_write", "releasing");
  conn_->exec("SAVEPOINT kept", "saving");
  insert(3);
  conn_->exec("RELEASE SAVEPOINT kept", "releasing");
  conn_->commit();
  Statement ids(*conn_, "SELECT id FROM v ORDER BY id", "listing");
  std::vector<std::int64_t> seen;
  while (ids.next()) seen.push_back(ids.integer("id"));
  EXPECT_EQ(seen, (std::vector<std::int64_t>{1, 3}));
}

TEST_F(PgConnectionTest, AFailedStatementFailsTheCommitUnlessRolledBackToASavepoint) {
  conn_->begin();
  insert(1);
  EXPECT_THROW(insert(1), StoreError);  // duplicate key: PostgreSQL aborts the transaction
  EXPECT_THROW(conn_->commit(), StoreError);
  EXPECT_EQ(count(*conn_), 0);

  conn_->begin();
  insert(1);
  conn_->exec("SAVEPOINT attempt", "saving");
  EXPECT_THROW(insert(1), StoreError);
  conn_->exec("ROLLBACK TO SAVEPOINT attempt", "recovering");
  insert(2);
  conn_->commit();
  EXPECT_EQ(count(*conn_), 2);
}

TEST_F(PgConnectionTest, SchemaVersionIsZeroUntilSetAndFollowsTheTransaction) {
  EXPECT_EQ(conn_->schema_version(), 0);
  conn_->begin();
  conn_->set_schema_version(5);
  conn_->commit();
  EXPECT_EQ(conn_->schema_version(), 5);
  conn_->begin();
  conn_->set_schema_version(6);
  conn_->rollback_quietly();
  EXPECT_EQ(conn_->schema_version(), 5);
  conn_->set_schema_version(7);
  PgConnection other(url_);
  EXPECT_EQ(other.schema_version(), 7);
}

TEST_F(PgConnectionTest, ErrorsNameWhatWasBeingDone) {
  try {
    Statement st(*conn_, "SELEC nonsense", "reading the fleet summary");
    st.run();
    FAIL() << "a syntax error ran";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("reading the fleet summary"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("SQLSTATE 42601"), std::string::npos) << e.what();
  }
  Statement st(*conn_, "SELECT 1 AS one", "reading one");
  EXPECT_THROW(st.bind_int(":missing", 1), StoreError);
  ASSERT_TRUE(st.next());
  EXPECT_THROW(st.integer("two"), StoreError);
  EXPECT_EQ(st.int32("one"), 1);
  // The connection is still usable after errors.
  insert(1);
  EXPECT_EQ(count(*conn_), 1);
}

TEST_F(PgConnectionTest, NoMessageCarriesThePassword) {
  // Trust authentication ignores the password, so the session opens; its errors must not show
  // the password any more than a failed connect does.
  const std::string secret = "Hunter2-pw";
  std::string with_password = url_;
  with_password.insert(with_password.find("@"), ":" + secret);
  PgConnection conn(with_password);
  EXPECT_EQ(conn.redacted_url().find(secret), std::string::npos);
  try {
    conn.exec("SELECT * FROM no_such_table", "reading nothing");
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()).find(secret), std::string::npos) << e.what();
  }
  // Nothing listens on port 1: the connect fails, naming the URL without its password.
  for (const std::string& url :
       {"postgres://fleet:" + secret + "@127.0.0.1:1/pf",
        "postgresql://fleet@127.0.0.1:1/pf?password=" + secret + "&connect_timeout=5"}) {
    try {
      PgConnection unreachable(url);
      FAIL() << "connected to port 1";
    } catch (const StoreError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("connecting to postgres"), std::string::npos) << what;
      EXPECT_NE(what.find("***"), std::string::npos) << what;
      EXPECT_EQ(what.find(secret), std::string::npos) << what;
    }
  }
  EXPECT_THROW(PgConnection("mysql://x"), StoreError);
}

// --- restarts: a server of its own, so the shared one is not disturbed --------------------------

class PgRestartTest : public ::testing::Test {
 protected:
  // Table r on `conn`'s server, with row 1 (its INSERT now prepared on the session).
  static void create_r_with_row_1(PgConnection& conn) {
    conn.exec("CREATE TABLE r (id BIGINT PRIMARY KEY)", "creating r");
    Statement first(conn, "INSERT INTO r (id) VALUES (:id)", "inserting");
    first.bind_int(":id", 1);
    first.run();
  }

  pf::test::PgServer server_;
};

TEST_F(PgRestartTest, AnIdleConnectionReconnectsAfterTheServerRestarts) {
  PgConnection conn(server_.url());
  create_r_with_row_1(conn);

  server_.restart();
  Statement again(conn, "INSERT INTO r (id) VALUES (:id)", "inserting after the restart");
  again.bind_int(":id", 2);
  again.run();  // a fresh session, the statement prepared anew
  Statement n(conn, "SELECT count(*) AS n FROM r", "counting");
  ASSERT_TRUE(n.next());
  EXPECT_EQ(n.integer("n"), 2);
}

TEST_F(PgRestartTest, WhileTheServerIsDownEachUseFailsAndTheNextOneAfterItComesBackWorks) {
  PgConnection conn(server_.url());
  server_.stop();
  try {
    conn.exec("SELECT 1", "reading while down");
    FAIL() << "ran on a stopped server";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("reading while down"), std::string::npos) << e.what();
  }
  server_.start();
  Statement st(conn, "SELECT 2 AS two", "reading after the start");
  ASSERT_TRUE(st.next());
  EXPECT_EQ(st.integer("two"), 2);
}

TEST_F(PgRestartTest, HeldBackWritesLostWithTheSessionFailTheCommitAndNothingIsWritten) {
  PgConnection conn(server_.url());
  conn.exec("CREATE TABLE r (id BIGINT PRIMARY KEY)", "creating r");
  conn.begin();
  Statement ins(conn, "INSERT INTO r (id) VALUES (1)", "inserting held back");
  EXPECT_FALSE(ins.run_or_defer());
  server_.restart();
  try {
    conn.commit();
    FAIL() << "committed over a lost session";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("lost"), std::string::npos) << e.what();
  }
  conn.rollback_quietly();
  Statement n(conn, "SELECT count(*) AS n FROM r", "counting");
  ASSERT_TRUE(n.next());
  EXPECT_EQ(n.integer("n"), 0);
}

TEST_F(PgRestartTest, CommitsSentWhenTheSessionBreaksFailAsMaybeAppliedAndTheNextUseReconnects) {
  PgConnection conn(server_.url());
  create_r_with_row_1(conn);
  int failures_told = 0;
  conn.on_sent_outcomes([&](bool failed) { failures_told += failed ? 1 : 0; });
  conn.begin();
  Statement ins(conn, "INSERT INTO r (id) VALUES (:id)", "inserting");
  ins.bind_int(":id", 2);
  EXPECT_FALSE(ins.run_or_defer());
  auto sent = conn.commit_sent();
  server_.restart();
  Statement n(conn, "SELECT count(*) AS n FROM r", "counting");
  ASSERT_TRUE(n.next());  // on a fresh session
  // Its answer either came before the server went (read first, then the session replaced) or
  // was lost with the session: then it is reported as such, never as a success.
  ASSERT_TRUE(sent->done);
  if (sent->error.empty()) {
    EXPECT_EQ(n.integer("n"), 2);
    EXPECT_EQ(failures_told, 0);
  } else {
    EXPECT_NE(sent->error.find("may or may not"), std::string::npos) << sent->error;
    EXPECT_EQ(failures_told, 1);
  }
}

TEST_F(PgRestartTest, ARestartInsideATransactionFailsThatTransactionOnly) {
  PgConnection conn(server_.url());
  conn.exec("CREATE TABLE r (id BIGINT PRIMARY KEY)", "creating r");
  conn.begin();
  Statement ins(conn, "INSERT INTO r (id) VALUES (1)", "inserting");
  ins.run();
  server_.restart();
  try {
    Statement more(conn, "INSERT INTO r (id) VALUES (2)", "inserting more");
    more.run();
    FAIL() << "the transaction went on over a new session";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("inserting more"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lost"), std::string::npos) << e.what();
  }
  // Every later statement of the transaction fails too, and so does its commit.
  EXPECT_THROW(conn.exec("SELECT 1", "still in it"), StoreError);
  EXPECT_THROW(conn.commit(), StoreError);
  conn.rollback_quietly();
  Statement n(conn, "SELECT count(*) AS n FROM r", "counting");
  ASSERT_TRUE(n.next());
  EXPECT_EQ(n.integer("n"), 0);
}

}  // namespace
