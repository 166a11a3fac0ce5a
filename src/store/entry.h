// A cache entry: everything one compile produced, stored and returned as one unit.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/checksum.h"
#include "util/pch_outcome.h"

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

// The bytes of one compiled output (PTX, CUBIN, LTO-IR), always followed by a NUL (PTX is
// text). Read like a string (data, size, c_str, compared with strings); unlike std::string
// it can be sized without being filled first, for a read from a file (a fresh process
// reading 221 KB into fresh memory: 206 us filled first, 165 us not, on an H200 host).
class Blob {
 public:
  Blob() = default;
  Blob(std::string_view bytes) { assign(bytes); }           // NOLINT(google-explicit-constructor)
  Blob(const char* text) : Blob(std::string_view(text)) {}  // NOLINT
  Blob(const Blob& other) { assign(other); }
  Blob(Blob&& other) noexcept : bytes_(std::move(other.bytes_)), size_(other.size_) {
    other.size_ = 0;
  }
  Blob& operator=(const Blob& other) {
    if (this != &other) assign(other);
    return *this;
  }
  Blob& operator=(Blob&& other) noexcept {
    bytes_ = std::move(other.bytes_);
    size_ = other.size_;
    other.size_ = 0;
    return *this;
  }
  Blob& operator=(std::string_view bytes) {
    assign(bytes);
    return *this;
  }
  Blob& operator=(const char* text) { return *this = std::string_view(text); }

  // `bytes` may lie in this blob itself.
  void assign(std::string_view bytes) {
    std::unique_ptr<char[]> fresh = storage(bytes.size());
    if (fresh) std::memcpy(fresh.get(), bytes.data(), bytes.size());
    bytes_ = std::move(fresh);
    size_ = bytes.size();
  }
  void assign(size_t n, char c) { std::memset(uninitialized(n), c, n); }
  // Makes the blob `n` bytes long, their values unspecified, and returns where to write them
  // (nullptr for 0).
  char* uninitialized(size_t n) {
    bytes_ = storage(n);
    size_ = n;
    return bytes_.get();
  }
  void clear() {
    bytes_.reset();
    size_ = 0;
  }

  const char* data() const { return bytes_ ? bytes_.get() : ""; }
  const char* c_str() const { return data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return std::string_view(data(), size_); }
  operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  std::string str() const { return std::string(view()); }
  size_t find(std::string_view s, size_t pos = 0) const { return view().find(s, pos); }

  friend bool operator==(const Blob& a, const Blob& b) { return a.view() == b.view(); }
  friend bool operator!=(const Blob& a, const Blob& b) { return !(a == b); }
  friend bool operator==(const Blob& a, std::string_view b) { return a.view() == b; }
  friend bool operator!=(const Blob& a, std::string_view b) { return a.view() != b; }
  friend bool operator==(std::string_view a, const Blob& b) { return a == b.view(); }
  friend bool operator!=(std::string_view a, const Blob& b) { return a != b.view(); }

 private:
  // `n` bytes and a NUL after them, not filled; none for 0.
  static std::unique_ptr<char[]> storage(size_t n) {
    if (n == 0) return nullptr;
    std::unique_ptr<char[]> p(new char[n + 1]);
    p[n] = '\0';
    return p;
  }

  std::unique_ptr<char[]> bytes_;  // size_ + 1 bytes, the last a NUL; null when empty
  size_t size_ = 0;
};

// Writes the blob's bytes (for test and log messages).
std::ostream& operator<<(std::ostream& out, const Blob& b);

// Every data member but recorded_sizes is a row of KJIT_ENTRY_FIELDS (store/entry_fields.h),
// the one list that the encodings below (and the worker's reply) are generated from: a
// member added here is added there, with the encodings it takes part in.
struct Entry {
  std::string key;  // 64 hex digits
  std::string target;
  Blob ptx, cubin, ltoir;
  std::string log;
  std::vector<std::pair<std::string, std::string>> names;  // expression -> lowered name
  std::vector<std::string> kernels;                        // .entry names in the PTX
  std::vector<std::string> options;                        // normalised options
  std::string toolchain;
  std::string program_name;
  double compile_ms = 0;
  // What precompiled headers did in the compile (used: their inputs were checked).
  PchOutcome pch = PchOutcome::None;
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
    uint64_t& of(BlobKind kind) {
      return kind == BlobKind::Ptx ? ptx : kind == BlobKind::Cubin ? cubin : ltoir;
    }
  } recorded_sizes;

  // What is wrong with the parts of an entry read back, "" when nothing: every blob of the
  // size its metadata records, and some code unless it is a manifest. The one check of an
  // entry's shape for every reader (payload files, export records, remote envelopes).
  const char* parts_problem() const;

  const Blob* blob(BlobKind kind) const;
  Blob* blob(BlobKind kind);
  uint64_t bytes() const;  // payload bytes (blobs + log + names), used for size bounds

  // Metadata as a JSON object (everything except the blobs).
  // `created`, when not 0, is written in place of the entry's own creation time.
  std::string metadata_json(int64_t created = 0) const;
  // Fills everything except key and blobs from metadata; throws kjit::Error
  // (KJIT_ERROR_CACHE_CORRUPT) on malformed JSON or a different format version.
  void load_metadata(const std::string& json);
  // The same fields in a compact binary form (payload files, entry_files.h), read back
  // without a JSON parser: the format version, then each field in the list's order, strings
  // and lists length-prefixed, numbers little-endian (store/entry_wire.h). load_metadata_binary()
  // checks every length against what is left and throws as load_metadata() does.
  std::string metadata_binary(int64_t created = 0) const;
  void load_metadata_binary(std::string_view bytes);
};

using EntryPtr = std::shared_ptr<const Entry>;

// Names of the ".entry" directives in PTX text, in order.
std::vector<std::string> ptx_entry_names(std::string_view ptx);

}  // namespace kjit
