// The cache's tests through the public C API: a cache handle, one compile of a program
// with its result, the database's path, environment variables for a scope, and plain SQLite
// statements on a database (tests/store/test_cache_*.cpp), with the names of the shared
// fixtures they use.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "kjit/kjit.h"
#include "support/db.h"
#include "support/entry_file_edit.h"
#include "support/test_support.h"

namespace kjit::test::capi {

using kjit::test::entry_file_path;
using kjit::test::kSaxpySource;
using kjit::test::kTemplateSource;
using kjit::test::LogCapture;
using kjit::test::RawEntry;
using kjit::test::read_file_or_die;
using kjit::test::read_raw_entry;
using kjit::test::TempDir;
using kjit::test::write_file;
using kjit::test::write_raw_entry;

inline off_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

struct Cache {
  kjit_cache* c = nullptr;
  explicit Cache(const std::string& dir, bool read_only = false, uint64_t max_bytes = 0) {
    kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
    o.directory = dir.c_str();
    o.read_only = read_only;
    o.max_size_bytes = max_bytes;
    EXPECT_EQ(kjit_cache_open(&o, &c), KJIT_OK) << kjit_last_error();
  }
  ~Cache() { kjit_cache_close(c); }
  kjit_cache_stats stats() const {
    kjit_cache_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(kjit_cache_stats_get(c, &s), KJIT_OK);
    return s;
  }
};

struct Result {
  kjit_status status = KJIT_ERROR_INTERNAL;
  int tier = -1;
  std::string ptx, cubin, key, log;
  std::vector<std::pair<std::string, std::string>> names;
};

inline Result compile(kjit_cache* cache, const std::string& source, const char* target = "sm_90",
                      std::vector<std::string> options = {},
                      std::vector<std::pair<std::string, std::string>> headers = {},
                      std::vector<std::string> exprs = {}, const std::string& name = "") {
  kjit_compiler* c = nullptr;
  EXPECT_EQ(kjit_compiler_create(cache, 1, &c), KJIT_OK);
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, target);
  if (!name.empty()) kjit_options_set_name(o, name.c_str());
  for (const auto& opt : options) kjit_options_add(o, opt.c_str());
  for (const auto& [n, body] : headers) kjit_options_add_header(o, n.c_str(), body.c_str());
  for (const auto& e : exprs) kjit_options_add_name_expression(o, e.c_str());
  kjit_binary* b = nullptr;
  Result r;
  r.status = kjit_compile(c, source.c_str(), o, &b);
  if (b) {
    size_t n = 0;
    const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
    if (p) r.ptx.assign(static_cast<const char*>(p), n);
    p = kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &n);
    if (p) r.cubin.assign(static_cast<const char*>(p), n);
    r.tier = kjit_binary_tier(b);
    r.key = kjit_binary_key(b);
    r.log = kjit_binary_log(b);
    for (size_t i = 0; i < kjit_binary_name_count(b); ++i) {
      r.names.emplace_back(kjit_binary_name_expression(b, i), kjit_binary_lowered_name_at(b, i));
    }
  }
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  return r;
}

inline std::string db_path(const TempDir& d) {
  return d.file("kjit.db");
}

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// Runs `statement` on `db` (created if needed) with plain SQLite.
inline void sql(const std::string& db, const std::string& statement) {
  kjit::test::Db d(db, /*create=*/true);
  ASSERT_TRUE(d.exec(statement)) << (d.h ? sqlite3_errmsg(d.h) : "cannot open") << ": "
                                 << statement;
}

}  // namespace kjit::test::capi
