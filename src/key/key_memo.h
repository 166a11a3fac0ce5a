// The compiler's memo of cache keys: a request (source bytes and options, compared whole)
// seen before gets its key again without normalising, scanning or hashing, provided every
// path its include scan looked at still stats the same (include_scan.h: PathStamp) and
// the working directory is the same directory (device and inode of ".") when the scan
// used it. A request whose scan cannot be
// decided by stat() alone (a file modified within kRacySeconds of being read, a directory
// read whole for a computed include) is not remembered.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "key/include_scan.h"
#include "key/request.h"

namespace kjit {

class KeyMemo {
 public:
  // The key remembered for exactly (source, opts), if what it depends on is unchanged.
  // Thread-safe; the stat() calls run outside any lock.
  bool find(std::string_view source, const CompileOptions& opts, std::string* key);
  // The same for a NUL-terminated source of unknown length: a large one remembered under
  // its first KB alone is compared in the same pass that finds its end.
  bool find(const char* source, const CompileOptions& opts, std::string* key);

  // Remembers the key of (source, opts) when `scan` is rememberable.
  void remember(std::string_view source, const CompileOptions& opts, const std::string& key,
                const IncludeScan& scan);

  // Source objects (a source handed over once, never changed, numbered by the process):
  // the key remembered for object `id` with `opts`, if what it depends on is unchanged.
  // No byte of the source is read or hashed. Thread-safe.
  bool find_object(uint64_t id, const CompileOptions& opts, std::string* key);
  // Files what remember() holds for (source, opts), if anything, under object `id` too
  // (the source's bytes are compared once, here). Thread-safe.
  void remember_object(uint64_t id, std::string_view source, const CompileOptions& opts);

 private:
  struct Item {
    std::string text;  // the source, then kTextPadding NUL bytes (util/text_equal.h)
    size_t size = 0;   // of the source
    CompileOptions opts;
    std::string key;
    uint64_t sampled = 0;               // sampled_hash of the source (key_memo.cpp)
    uint64_t whole_hash = 0;            // table hash of all of a source over 4 KB
    std::string cwd;                    // "" when the scan did not depend on it
    uint64_t cwd_dev = 0, cwd_ino = 0;  // the directory it named
    std::vector<PathStamp> looked;
    std::string_view source() const { return std::string_view(text.data(), size); }
  };
  // The item remembered for exactly (source, opts), if any.
  std::shared_ptr<const Item> lookup(std::string_view source, const CompileOptions& opts);
  // The key of `item` if what it depends on is unchanged.
  static bool still_valid(const Item& item, std::string* key);
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPerShard = 256;  // a full shard starts again (cheap, rare)
  // Items under the table hash of their first KB (all of a smaller source).
  struct Shard {
    std::mutex mu;
    std::unordered_multimap<uint64_t, std::shared_ptr<const Item>> items;
  };
  Shard shards_[kShards];
  // Items under the number of the source object they were asked for by. Numbers are never
  // reused, so an item of a destroyed object is only memory until its shard starts again.
  struct ObjectShard {
    std::mutex mu;
    std::unordered_multimap<uint64_t, std::shared_ptr<const Item>> items;
  };
  ObjectShard objects_[kShards];
};

}  // namespace kjit
