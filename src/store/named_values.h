// Opaque values that other subsystems keep in the index database by namespace and key
// (tuned GEMM plans): the kv table, beside the schema's own record (namespace "meta").
#pragma once

#include <optional>
#include <string>

#include "store/index_db.h"

namespace kjit {

// The named values of one index database. Safe to use from any thread. Every call opens
// the index if needed and throws kjit::Error (DatabaseCorrupt) when it cannot be used.
class NamedValues {
 public:
  explicit NamedValues(IndexDb& db) : db_(db) {}
  bool read_only() const { return db_.read_only(); }

  // The value under (`ns`, `key`), nullopt when none is stored.
  std::optional<std::string> get(const std::string& ns, const std::string& key);
  // Stores or replaces it; Error(KJIT_ERROR_READ_ONLY) on a read-only index.
  void put(const std::string& ns, const std::string& key, const std::string& value);
  // Every value goes but the schema's record (IndexDb::kMetaNamespace); read-only as put().
  void clear();

 private:
  IndexDb& db_;
};

}  // namespace kjit
