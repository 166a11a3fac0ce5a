// Named values (store/named_values.h) on their own: opaque values by namespace and key.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "store/index_db.h"
#include "store/named_values.h"
#include "support/test_support.h"
#include "util/error.h"

namespace {

using kjit::IndexDb;
using kjit::NamedValues;
using kjit::test::TempDir;

TEST(NamedValues, RoundTripByNamespace) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  NamedValues values(db);
  EXPECT_EQ(values.get("gemm-plan", "k"), std::nullopt);
  const std::string binary("plan\0\xff bytes", 12);
  values.put("gemm-plan", "k", binary);
  values.put("other", "k", "x");
  EXPECT_EQ(values.get("gemm-plan", "k"), std::optional<std::string>(binary));
  EXPECT_EQ(values.get("other", "k"), std::optional<std::string>("x"));
  values.put("other", "k", "");
  EXPECT_EQ(values.get("other", "k"), std::optional<std::string>(""));
}

TEST(NamedValues, ClearKeepsTheSchemasRecord) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    NamedValues values(db);
    values.put("ns", "k", "v");
    values.clear();
    EXPECT_EQ(values.get("ns", "k"), std::nullopt);
    EXPECT_NE(values.get(IndexDb::kMetaNamespace, "kjit:schema"), std::nullopt);
  }
  kjit::test::LogCapture log;
  IndexDb again(dir.path(), false, true);
  EXPECT_EQ(log.count("rebuilt"), 0u);
}

TEST(NamedValues, AReadOnlyIndexIsReadNotWritten) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    NamedValues(db).put("ns", "k", "v");
  }
  IndexDb db(dir.path(), /*read_only=*/true, true);
  NamedValues values(db);
  EXPECT_TRUE(values.read_only());
  EXPECT_EQ(values.get("ns", "k"), std::optional<std::string>("v"));
  try {
    values.put("ns", "k", "w");
    FAIL() << "written";
  } catch (const kjit::Error& e) {
    EXPECT_EQ(e.status(), KJIT_ERROR_READ_ONLY);
  }
  EXPECT_THROW(values.clear(), kjit::Error);
}

}  // namespace
