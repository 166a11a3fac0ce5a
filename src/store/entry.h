// A cache entry: everything one compile produced, stored and returned as one unit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/checksum.h"

namespace kjit {

// Bumped whenever the key encoding, the schema or the entry layout changes meaning.
// It is hashed into every key and written into every entry's metadata.
// 2: checksums are bound to the entry's key (entry_checksum).
// 3: entries say whether a precompiled header was used ("pch"); entries of earlier formats
//    may hold code compiled from a PCH made before a header edit, and are never served.
constexpr int kCacheFormatVersion = 3;

enum class BlobKind : int { Ptx = 1, Cubin = 2, LtoIr = 4 };

// The parts of an entry that carry a checksum: its metadata and each blob.
enum class EntryPart : int { Metadata = 0, Ptx = 1, Cubin = 2, LtoIr = 4 };
inline EntryPart part_of(BlobKind kind) {
  return static_cast<EntryPart>(static_cast<int>(kind));
}

// The checksum of one part of the entry stored under `key`: XXH3-128 over a domain tag,
// the format version, the key, the part and the bytes (each length-prefixed). A part
// moved to another key or to another part no longer verifies, so a record swapped
// between entries is corrupt, never another kernel's code. Every writer and reader of
// entry checksums (SQLite tier, export records, remote envelopes) uses this one function.
Checksum entry_checksum(std::string_view key, EntryPart part, const void* data, size_t size);
inline Checksum entry_checksum(std::string_view key, EntryPart part, std::string_view bytes) {
  return entry_checksum(key, part, bytes.data(), bytes.size());
}
// True when `stored` (as read back) holds exactly `expected`.
bool checksum_equals(std::string_view stored, const Checksum& expected);

struct Entry {
  std::string key;  // 64 hex digits
  std::string target;
  std::string ptx, cubin, ltoir;
  std::string log;
  std::vector<std::pair<std::string, std::string>> names;  // expression -> lowered name
  std::vector<std::string> kernels;                        // .entry names in the PTX
  std::vector<std::string> options;                        // normalised options
  std::string toolchain;
  std::string program_name;
  double compile_ms = 0;
  // Precompiled headers in the compile: 0 none, 1 created, 2 used (inputs checked), 3 failed.
  int pch = 0;
  // Not code but a dependency manifest (key/dep_manifest.h), as JSON text: what the
  // compiles of one request read, each with the key of its entry. "" for code entries.
  std::string manifest;
  bool is_manifest() const { return !manifest.empty(); }
  int64_t created = 0;
  int64_t last_used = 0;
  // Blob sizes as recorded in the metadata (filled by load_metadata) so a reader can tell
  // that every part of the entry is present.
  struct Sizes {
    uint64_t ptx = 0, cubin = 0, ltoir = 0;
  } recorded_sizes;

  const std::string* blob(BlobKind kind) const;
  std::string* blob(BlobKind kind);
  uint64_t bytes() const;  // payload bytes (blobs + log + names), used for size bounds

  // Metadata as a JSON object (everything except the blobs).
  // `created`, when not 0, is written in place of the entry's own creation time.
  std::string metadata_json(int64_t created = 0) const;
  // Fills everything except key and blobs from metadata; throws kjit::Error
  // (KJIT_ERROR_CACHE_CORRUPT) on malformed JSON or a different format version.
  void load_metadata(const std::string& json);
  // The same fields in a compact binary form (payload files, entry_files.h), read back
  // without a JSON parser: the format version, then each field in a fixed order, strings
  // and lists length-prefixed, numbers little-endian. load_metadata_binary() checks every
  // length against what is left and throws as load_metadata() does.
  std::string metadata_binary(int64_t created = 0) const;
  void load_metadata_binary(std::string_view bytes);
};

using EntryPtr = std::shared_ptr<const Entry>;

// Names of the ".entry" directives in PTX text, in order.
std::vector<std::string> ptx_entry_names(const std::string& ptx);

}  // namespace kjit
