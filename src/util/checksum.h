// Integrity checksums for stored blobs: XXH3-128 (xxHash), which detects corruption as
// well as a cryptographic hash does but runs at memory speed, so verifying a 100 KB CUBIN
// on every disk read costs microseconds. Cache keys use SHA-256 (sha256.h) instead.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace kjit {

using Checksum = std::array<unsigned char, 16>;

Checksum checksum(const void* data, size_t size);
inline Checksum checksum(std::string_view s) { return checksum(s.data(), s.size()); }

}  // namespace kjit
