// Integrity checksums for stored blobs: XXH3-128 (xxHash), which detects corruption as
// well as a cryptographic hash does but runs at memory speed, so verifying a 100 KB CUBIN
// on every disk read costs microseconds. Cache keys use SHA-256 (sha256.h) instead.
// Cache entries never use checksum() on their bytes alone: see entry_checksum()
// (store/entry.h), which binds each checksum to the entry's key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kjit {

using Checksum = std::array<unsigned char, 16>;

Checksum checksum(const void* data, size_t size);
inline Checksum checksum(std::string_view s) { return checksum(s.data(), s.size()); }

// XXH3-64, for hash tables only: never trusted to tell two inputs apart (the table
// compares the inputs themselves).
uint64_t table_hash(const void* data, size_t size);

// The same XXH3-128, fed in pieces (no copy of large inputs).
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  void u64(uint64_t v);  // 8 bytes, little-endian
  // A field: 8-byte little-endian length, then the bytes (no two splits collide).
  void field(const void* data, size_t size);
  void field(std::string_view s) { field(s.data(), s.size()); }
  Checksum finish();

 private:
  void* state_;
};

}  // namespace kjit
