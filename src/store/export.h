// Portable export format: a single file of self-checking records that another machine
// can import. Layout (all integers little-endian u64):
//   "KJITEXP\x01" magic, u64 format version,
//   records: u64 record length, record bytes, 32-byte SHA-256 of the record bytes;
//   record = key field, metadata field, ptx field, cubin field, ltoir field
//            (each field = u64 length + bytes).
//   trailer: u64 0.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/entry.h"

namespace kjit {

// One entry as self-describing bytes (key, metadata, blobs; length-prefixed) and back.
// decode_record() checks the structure, the metadata (format version included) and that
// every part has its recorded size; it returns false for anything malformed.
std::string encode_record(const Entry& e);
bool decode_record(const std::string& bytes, Entry* out);

// Writes entries produced by `next` (returns false when done) to `path`. Returns count.
uint64_t write_export(const std::string& path, const std::function<bool(Entry*)>& next);

// Reads `path`, calling `accept` for each record that verifies. Records that fail
// verification are counted in *rejected. Throws Error(KJIT_ERROR_IO) if the file cannot
// be opened and Error(KJIT_ERROR_CACHE_CORRUPT) if its structure is damaged (after
// delivering the valid records before the damage).
void read_export(const std::string& path, const std::function<void(const Entry&)>& accept,
                 uint64_t* rejected);

// The same record decoding, from memory (for fuzzing and tests).
void read_export_bytes(const std::string& bytes, const std::function<void(const Entry&)>& accept,
                       uint64_t* rejected);

}  // namespace kjit
