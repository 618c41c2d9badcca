// Database URLs (store/store_url.h): which carry a password, and what may be shown of them.
#include "store/store_url.h"

#include <gtest/gtest.h>

namespace pf::store {
namespace {

TEST(StoreUrl, PostgresSchemesInAnyCase) {
  EXPECT_TRUE(is_postgres_url("postgres://db/pf"));
  EXPECT_TRUE(is_postgres_url("postgresql://db/pf"));
  EXPECT_TRUE(is_postgres_url("PostgreSQL://db/pf"));
  EXPECT_FALSE(is_postgres_url("sqlite:/var/lib/pf.db"));
  EXPECT_FALSE(is_postgres_url("./postgres://x"));
  EXPECT_FALSE(is_postgres_url("postgres:/db"));
}

TEST(StoreUrl, APasswordInTheUserinfoOrAParameterIsFoundAndNeverShown) {
  EXPECT_TRUE(url_has_password("postgres://pf:s3cret@db1:5432/fleet"));
  EXPECT_EQ(redacted_url("postgres://pf:s3cret@db1:5432/fleet"),
            "postgres://pf:***@db1:5432/fleet");
  // '@' inside the password: the authority ends at the last '@'.
  EXPECT_EQ(redacted_url("postgresql://pf:a@b:c@db1/fleet"), "postgresql://pf:***@db1/fleet");
  EXPECT_TRUE(url_has_password("postgres://db1/fleet?sslmode=require&password=s3cret"));
  EXPECT_EQ(redacted_url("postgres://db1/fleet?sslmode=require&Password=s3cret&x=1"),
            "postgres://db1/fleet?sslmode=require&Password=***&x=1");
  EXPECT_EQ(redacted_url("postgres://u:p@db1/f?password=q"), "postgres://u:***@db1/f?password=***");
  // Empty password: still a password field, still hidden.
  EXPECT_TRUE(url_has_password("postgres://pf:@db1/fleet"));
}

TEST(StoreUrl, URLsWithoutAPasswordAreShownAsWritten) {
  for (const char* url :
       {"postgres://pf@db1/fleet", "postgres://db1:5432/fleet",
        "postgres:///fleet?host=/run/postgresql", "sqlite:/a:b@c.db", "./pf:x@y.db", ":memory:"}) {
    EXPECT_FALSE(url_has_password(url)) << url;
    EXPECT_EQ(redacted_url(url), url);
  }
  // A ':' after the host is a port, not a password.
  EXPECT_FALSE(url_has_password("postgres://db1:5432/fleet?user=pf"));
}

}  // namespace
}  // namespace pf::store
