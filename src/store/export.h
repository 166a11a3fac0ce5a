// Portable export format: a single file of self-checking records that another machine
// can import.
//
// An export file is trusted input: whoever wrote it chose the code stored under each key,
// and importing it is running their code. Every record is checked for damage and for
// consistency with its own key, but anyone can write a consistent record that files one
// kernel's code under another kernel's key. Only a signature tells who wrote a record:
// with $KJIT_EXPORT_KEY set (a secret shared by the machines of a fleet, at least
// kMinExportKeyBytes), an export signs every record with HMAC-SHA256 keyed by it, and an
// import accepts only records whose signature verifies with it (unsigned ones included
// are rejected). Without the variable, exports are unsigned and imports accept
// consistent records whatever their signature, and say so in the log.
//
// Layout (integers are little-endian u64; a field is a u64 length and that many bytes):
//   "KJITEXP\x01" magic, u64 format version (kCacheFormatVersion; files of another version,
//   including the unsigned version 1, are refused as a whole with the reason: their keys
//   can never match this kjit's compiles);
//   records, each: u64 record length (never 0), the record bytes, 32-byte SHA-256 of the
//   record bytes, signature field (empty: unsigned; else the 32-byte HMAC-SHA256, keyed by
//   $KJIT_EXPORT_KEY, of field("kjit export record") followed by the record bytes);
//   trailer: u64 0.
// record = key field (64 lowercase hex digits), metadata field (JSON, see entry.h),
//          ptx field, cubin field, ltoir field, checksums field: 4 x 16 bytes, the
//          entry_checksum() under the record's key of the metadata, ptx, cubin and ltoir.
// The remote tier's envelope (remote.h) carries the same record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "store/entry.h"

namespace kjit {

// One entry as self-describing bytes (key, metadata, blobs, key-bound checksums) and back.
// decode_record() returns false unless the record is self-consistent: the structure, the
// key's syntax, every checksum against the record's own key, the metadata (format version
// included), and every part of its recorded size, with some code.
std::string encode_record(const Entry& e);
bool decode_record(const std::string& bytes, Entry* out);

// The shortest signing key accepted.
constexpr size_t kMinExportKeyBytes = 16;

// $KJIT_EXPORT_KEY, or "" when it is unset or empty. Throws
// Error(KJIT_ERROR_INVALID_ARGUMENT) when it is shorter than kMinExportKeyBytes.
std::string export_key_from_environment();

// Writes entries produced by `next` (returns false when done) to `path`, each record
// signed with `signing_key` unless it is "". Returns the count.
uint64_t write_export(const std::string& path, const std::function<bool(Entry*)>& next,
                      const std::string& signing_key);

// What reading an export file found.
struct ImportReport {
  uint64_t rejected = 0;          // records not delivered, for any of the reasons below
  uint64_t inconsistent = 0;      // damaged, or not self-consistent (decode_record)
  uint64_t bad_signatures = 0;    // with a key: a signature that does not verify
  uint64_t unsigned_records = 0;  // records without a signature (rejected with a key)
  uint64_t signed_records = 0;    // records with one (checked only with a key)
};

// Reads `path`, calling `accept` for each record that verifies: self-consistent and, when
// `key` is not "", signed with it. The others are counted in `report`, and a summary is
// logged (warnings: rejections, and an unsigned or unchecked file). Throws
// Error(KJIT_ERROR_IO) if the file cannot be read and Error(KJIT_ERROR_CACHE_CORRUPT) if
// its structure is damaged (after delivering the valid records before the damage) or it
// has another format version.
void read_export(const std::string& path, const std::function<void(const Entry&)>& accept,
                 const std::string& key, ImportReport* report);

// The same reading, from memory and without the log (for fuzzing and tests).
void read_export_bytes(const std::string& bytes, const std::function<void(const Entry&)>& accept,
                       const std::string& key, ImportReport* report);

}  // namespace kjit
