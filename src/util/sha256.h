// SHA-256 through Nettle, with an incremental interface and a
// length-prefixed field encoding used for cache keys and the public hash helpers.
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

Digest sha256(const void* data, size_t size);
inline Digest sha256(std::string_view s) { return sha256(s.data(), s.size()); }
std::string to_hex(const Digest& d);
bool is_hex_key(std::string_view s);  // 64 lowercase hex digits

}  // namespace kjit
