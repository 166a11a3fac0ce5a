// The error of a damaged index database, shared by the connection layer (sqlite_conn.h)
// that detects it and the index database (index_db.h) that moves the file aside.
#pragma once

#include <string>
#include <utility>

#include "util/error.h"

namespace kjit {

// Thrown when SQLite reports the database file itself as corrupt or not a database.
class DatabaseCorrupt : public Error {
 public:
  explicit DatabaseCorrupt(std::string message)
      : Error(KJIT_ERROR_CACHE_CORRUPT, std::move(message)) {}
};

}  // namespace kjit
