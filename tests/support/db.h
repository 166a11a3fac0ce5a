// A cache database opened with plain SQLite, independent of kjit's store: for tests that
// read or damage the index the way another program would.
#pragma once

#include <sqlite3.h>

#include <string>

namespace kjit::test {

struct Db {
  sqlite3* h = nullptr;
  // Opens `path` for reading and writing (`create`: creating it); not open (h null) when
  // that fails. Waits up to 30 s for another connection's lock.
  explicit Db(const std::string& path, bool create = false) {
    const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path.c_str(), &h, flags, nullptr) != SQLITE_OK) {
      sqlite3_close(h);
      h = nullptr;
    } else {
      sqlite3_busy_timeout(h, 30000);
    }
  }
  ~Db() { sqlite3_close(h); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Rows joined by '\n' (each ended by one), columns by '|', NULL as ""; "ERROR: ..." on
  // failure.
  std::string query(const std::string& sql) {
    if (!h) return "ERROR: not open";
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return std::string("ERROR: ") + sqlite3_errmsg(h);
    }
    std::string out;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const unsigned char* t = sqlite3_column_text(s, i);
        out += (i ? "|" : "");
        out += t ? reinterpret_cast<const char*>(t) : "";
      }
      out += "\n";
    }
    const std::string err = rc == SQLITE_DONE ? "" : std::string("ERROR: ") + sqlite3_errmsg(h);
    sqlite3_finalize(s);
    return err.empty() ? out : err;
  }
  // query() of a one-row answer without its newline.
  std::string text(const std::string& sql) {
    std::string out = query(sql);
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  // Runs statements that return no rows; false when not open or one fails.
  bool exec(const std::string& sql) {
    return h && sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  }
};

}  // namespace kjit::test
