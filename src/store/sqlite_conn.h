// One SQLite connection of the index database (index_db.h) with its prepared statements, scoped
// transactions, and the mapping of SQLite failures to kjit errors (store-internal).
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "store/db_error.h"

namespace kjit {

// SQLITE_CORRUPT or SQLITE_NOTADB: the file itself is damaged.
bool is_corruption(int rc);
// Throws DatabaseCorrupt for corruption, else Error(KJIT_ERROR_CACHE), naming `what`.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what);

// Text column that is never NULL (a damaged record can hold NULL in a NOT NULL column).
std::string col_text(sqlite3_stmt* s, int i);
std::string col_blob(sqlite3_stmt* s, int i);

// device:inode of a file, "" if it does not exist.
std::string file_id(const std::string& path);

struct SqliteConn {
  sqlite3* db = nullptr;
  uint64_t generation = 0;
  std::unordered_map<const char*, sqlite3_stmt*> stmts;

  SqliteConn() = default;
  SqliteConn(const SqliteConn&) = delete;
  SqliteConn& operator=(const SqliteConn&) = delete;
  ~SqliteConn();

  // Closing without the usual checkpoint (and WAL removal) on close: for connections
  // inherited across fork() (the parent still uses the WAL) and for a file moved aside.
  // Closing them, rather than leaking them, matters: SQLite shares lock state between the
  // connections of a process that open one file, so a child that kept the parent's
  // connections would believe it holds the parent's locks and run without real ones.
  static void close_quietly(std::unique_ptr<SqliteConn> c);

  void exec(const char* sql, const char* what);
  // Statement prepared once per connection, reset and unbound for reuse.
  sqlite3_stmt* stmt(const char* sql);
  int step(sqlite3_stmt* s, const char* what);
  // Runs one statement that returns no rows through the prepared-statement cache.
  void run(const char* sql, const char* what);
};

// Scoped transaction: BEGIN IMMEDIATE for writes (so a writer waits for the lock up front
// instead of failing on upgrade), BEGIN DEFERRED for consistent multi-statement reads.
class Txn {
 public:
  // BEGIN and COMMIT are prepared once per connection, like the statements between them.
  Txn(SqliteConn& c, bool write) : c_(c) {
    c_.run(write ? "BEGIN IMMEDIATE" : "BEGIN", "begin transaction");
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  void commit() {
    c_.run("COMMIT", "commit");
    done_ = true;
  }
  ~Txn() {
    if (!done_) sqlite3_exec(c_.db, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  SqliteConn& c_;
  bool done_ = false;
};

}  // namespace kjit
