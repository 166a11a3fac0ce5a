// A cache entry: everything one compile produced, stored and returned as one unit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kjit {

// Bumped whenever the key encoding, the schema or the entry layout changes meaning.
// It is hashed into every key and written into every entry's metadata.
constexpr int kCacheFormatVersion = 1;

enum class BlobKind : int { Ptx = 1, Cubin = 2, LtoIr = 4 };

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
  std::string metadata_json() const;
  // Fills everything except key and blobs from metadata; throws kjit::Error
  // (KJIT_ERROR_CACHE_CORRUPT) on malformed JSON or a different format version.
  void load_metadata(const std::string& json);
};

using EntryPtr = std::shared_ptr<const Entry>;

// Names of the ".entry" directives in PTX text, in order.
std::vector<std::string> ptx_entry_names(const std::string& ptx);

}  // namespace kjit
