#include "util/sha256.h"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#include <new>

namespace kjit {

// Nettle's SHA-256 (with the CPU's SHA extensions where present) needs no global
// initialisation, so the first hash in a process costs microseconds, not the
// milliseconds a full crypto library's start-up takes.
Sha256::Sha256() : ctx_(new sha256_ctx) { sha256_init(static_cast<sha256_ctx*>(ctx_)); }

Sha256::~Sha256() { delete static_cast<sha256_ctx*>(ctx_); }

void Sha256::update(const void* data, size_t size) {
  if (size) sha256_update(static_cast<sha256_ctx*>(ctx_), size, static_cast<const uint8_t*>(data));
}

void Sha256::u64(uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  update(b, sizeof b);
}

void Sha256::field(std::string_view s) {
  u64(s.size());
  update(s);
}

Digest Sha256::finish() {
  Digest d{};
  sha256_digest(static_cast<sha256_ctx*>(ctx_), d.size(), d.data());
  return d;
}

HmacSha256::HmacSha256(std::string_view key) : ctx_(new hmac_sha256_ctx) {
  hmac_sha256_set_key(static_cast<hmac_sha256_ctx*>(ctx_), key.size(),
                      reinterpret_cast<const uint8_t*>(key.data()));
}

HmacSha256::~HmacSha256() { delete static_cast<hmac_sha256_ctx*>(ctx_); }

void HmacSha256::update(const void* data, size_t size) {
  if (size) {
    hmac_sha256_update(static_cast<hmac_sha256_ctx*>(ctx_), size,
                       static_cast<const uint8_t*>(data));
  }
}

void HmacSha256::field(std::string_view s) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(uint64_t(s.size()) >> (8 * i));
  update(b, sizeof b);
  update(s);
}

Digest HmacSha256::finish() {
  Digest d{};
  hmac_sha256_digest(static_cast<hmac_sha256_ctx*>(ctx_), d.size(), d.data());
  return d;
}

bool digest_equals(const Digest& a, const void* b, size_t b_size) {
  return b_size == a.size() && memeql_sec(a.data(), b, a.size()) != 0;
}

Digest sha256(const void* data, size_t size) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  if (size) sha256_update(&ctx, size, static_cast<const uint8_t*>(data));
  Digest d{};
  sha256_digest(&ctx, d.size(), d.data());
  return d;
}

std::string to_hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}

bool is_hex_key(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace kjit
