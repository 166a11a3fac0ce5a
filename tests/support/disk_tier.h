// A cache directory's disk tier, its index opened at once, as a process finds it after
// opening the cache (kjit::DiskTier opens the index only when first needed): for tests that
// use the store's parts without a Cache.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#include "store/cache.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit::test {

struct OpenTier : DiskTier {
  // Throws as IndexDb::open() does.
  explicit OpenTier(const std::string& dir, bool read_only = false)
      : DiskTier(dir, read_only, /*use_wal=*/true) {
    index.open();
  }
};

// A small compiled-looking entry whose key is the hash of `tag`, with `ptx_bytes` of PTX.
inline Entry synthetic_entry(const std::string& tag, size_t ptx_bytes = 64) {
  Entry e;
  e.key = to_hex(sha256("synthetic " + tag));
  e.target = "sm_90";
  e.ptx = std::string(ptx_bytes, 'p');
  e.kernels = {"k_" + tag};
  e.toolchain = "synthetic";
  e.program_name = "synthetic.cu";
  e.compile_ms = 1;
  e.created = static_cast<int64_t>(std::time(nullptr));
  return e;
}

}  // namespace kjit::test
