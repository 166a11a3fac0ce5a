#include "util/checksum.h"

#include <xxhash.h>

namespace kjit {

Checksum checksum(const void* data, size_t size) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data, size));
  Checksum out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = canonical.digest[i];
  return out;
}

}  // namespace kjit
