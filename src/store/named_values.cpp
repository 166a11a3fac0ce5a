#include "store/named_values.h"

#include <sqlite3.h>

#include "util/error.h"
#include "util/fs.h"

namespace kjit {

std::optional<std::string> NamedValues::get(const std::string& ns, const std::string& key) {
  IndexDb::Lease c = db_.acquire();
  sqlite3_stmt* s = c->stmt("SELECT value FROM kv WHERE ns = ?1 AND key = ?2");
  sqlite3_bind_text(s, 1, ns.data(), int(ns.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, key.data(), int(key.size()), SQLITE_STATIC);
  std::optional<std::string> out;
  if (c->step(s, "read value") == SQLITE_ROW) out = col_blob(s, 0);
  sqlite3_reset(s);
  return out;
}

void NamedValues::put(const std::string& ns, const std::string& key, const std::string& value) {
  if (db_.read_only()) fail(KJIT_ERROR_READ_ONLY, "cache database " + db_.path() + " is read-only");
  IndexDb::Lease c = db_.acquire();
  sqlite3_stmt* s =
      c->stmt("INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES(?1, ?2, ?3, ?4)");
  sqlite3_bind_text(s, 1, ns.data(), int(ns.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_blob(s, 3, value.data(), int(value.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, unix_time());
  c->step(s, "write value");
}

void NamedValues::clear() {
  if (db_.read_only()) fail(KJIT_ERROR_READ_ONLY, "cache database " + db_.path() + " is read-only");
  IndexDb::Lease c = db_.acquire();
  // The schema's record stays (IndexDb::kMetaNamespace).
  c->run("DELETE FROM kv WHERE ns <> 'meta'", "clear values");
}

}  // namespace kjit
