#include "store/sqlite_conn.h"

#include <sys/stat.h>

namespace kjit {

bool is_corruption(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what) {
  std::string msg = "cache database: " + what +
                    " failed: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) + " (" +
                    sqlite3_errstr(rc) + ")";
  if (is_corruption(rc)) throw DatabaseCorrupt(msg);
  fail(KJIT_ERROR_CACHE, msg);
}

std::string col_text(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(s, i)))
           : std::string();
}

std::string col_blob(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  return p ? std::string(static_cast<const char*>(p), size_t(sqlite3_column_bytes(s, i)))
           : std::string();
}

std::string file_id(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

SqliteConn::~SqliteConn() {
  for (auto& [sql, stmt] : stmts) sqlite3_finalize(stmt);
  if (db) sqlite3_close_v2(db);
}

void SqliteConn::close_quietly(std::unique_ptr<SqliteConn> c) {
  if (c && c->db) sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
}

void SqliteConn::exec(const char* sql, const char* what) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    std::string full = std::string("cache database: ") + what + " failed: " + msg;
    if (is_corruption(rc)) throw DatabaseCorrupt(full);
    fail(KJIT_ERROR_CACHE, full);
  }
}

sqlite3_stmt* SqliteConn::stmt(const char* sql) {
  auto it = stmts.find(sql);
  if (it != stmts.end()) {
    sqlite3_reset(it->second);
    sqlite3_clear_bindings(it->second);
    return it->second;
  }
  sqlite3_stmt* s = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if ((rc & 0xff) == SQLITE_ERROR) {
    // kjit's own statements match its schema (checked at open): a table, column or
    // trigger that is missing or unparsable now means the schema itself was damaged.
    throw DatabaseCorrupt(std::string("cache database schema is damaged: ") + sqlite3_errmsg(db) +
                          " (preparing " + sql + ")");
  }
  if (rc != SQLITE_OK) throw_sqlite(db, rc, "prepare");
  stmts.emplace(sql, s);
  return s;
}

int SqliteConn::step(sqlite3_stmt* s, const char* what) {
  const int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    sqlite3_reset(s);
    throw_sqlite(db, rc, what);
  }
  return rc;
}

void SqliteConn::run(const char* sql, const char* what) {
  sqlite3_stmt* s = stmt(sql);
  const int rc = sqlite3_step(s);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) throw_sqlite(db, rc, what);
}

}  // namespace kjit
