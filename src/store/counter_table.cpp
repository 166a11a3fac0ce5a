#include "store/counter_table.h"

#include <sqlite3.h>

namespace kjit {
namespace {

// Adds each delta to its counter, inside the caller's write transaction.
void add_locked(SqliteConn& c, const CounterTable::Deltas& deltas) {
  for (const auto& [name, delta] : deltas) {
    sqlite3_stmt* s = c.stmt(
        "INSERT INTO counters(name, value) VALUES(?1, ?2) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value");
    sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, delta);
    c.step(s, "add counters");
  }
}

}  // namespace

void CounterTable::add(const Deltas& deltas) {
  if (db_.read_only() || deltas.empty()) return;
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  add_locked(*c, deltas);
  txn.commit();
}

void CounterTable::add(const std::function<Deltas()>& under_lock) {
  if (db_.read_only()) return;
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  add_locked(*c, under_lock());
  txn.commit();
}

CounterTable::Deltas CounterTable::read() {
  IndexDb::Lease c = db_.acquire();
  Deltas out;
  sqlite3_stmt* s = c->stmt("SELECT name, value FROM counters");
  while (c->step(s, "read counters") == SQLITE_ROW) {
    out.emplace_back(col_text(s, 0), sqlite3_column_int64(s, 1));
  }
  sqlite3_reset(s);
  return out;
}

}  // namespace kjit
