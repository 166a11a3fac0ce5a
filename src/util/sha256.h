// SHA-256 through Nettle, with an incremental interface and a
// length-prefixed field encoding used for cache keys and the public hash helpers; and
// HMAC-SHA256, which signs export records with a shared secret.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kjit {

using Digest = std::array<unsigned char, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // A field: 8-byte little-endian length, then the bytes. Concatenations of fields can
  // never collide with a different split of the same bytes.
  void field(std::string_view s);
  void u64(uint64_t v);
  Digest finish();

 private:
  void* ctx_;
};

// HMAC-SHA256 keyed by `key` (any length), fed incrementally.
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key);
  ~HmacSha256();
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  void field(std::string_view s);  // 8-byte little-endian length, then the bytes
  Digest finish();

 private:
  void* ctx_;
};

// Compares two digests in time independent of where they differ (for signatures).
bool digest_equals(const Digest& a, const void* b, size_t b_size);

Digest sha256(const void* data, size_t size);
inline Digest sha256(std::string_view s) { return sha256(s.data(), s.size()); }
std::string to_hex(const Digest& d);
bool is_hex_key(std::string_view s);  // 64 lowercase hex digits

}  // namespace kjit
