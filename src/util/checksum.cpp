#include "util/checksum.h"

// xxHash is compiled into this file (XXH_INLINE_ALL): the same algorithm and results as
// libxxhash, without a shared library whose symbols a fresh process would look up on its
// first checksum.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

namespace kjit {
namespace {

Checksum canonical(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  Checksum out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = c.digest[i];
  return out;
}

}  // namespace

uint64_t table_hash(const void* data, size_t size) { return XXH3_64bits(data, size); }

Checksum checksum(const void* data, size_t size) { return canonical(XXH3_128bits(data, size)); }

ChecksumStream::ChecksumStream() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

ChecksumStream::~ChecksumStream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void ChecksumStream::update(const void* data, size_t size) {
  if (size) XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

void ChecksumStream::u64(uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  update(b, sizeof b);
}

void ChecksumStream::field(const void* data, size_t size) {
  u64(size);
  update(data, size);
}

Checksum ChecksumStream::finish() {
  return canonical(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_)));
}

}  // namespace kjit
