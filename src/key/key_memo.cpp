#include "key/key_memo.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "util/checksum.h"
#include "util/text_equal.h"

namespace kjit {
namespace {

// The process still works in the directory the scan named `cwd` (one stat() of "." with
// no path to walk, where comparing getcwd()'s text would cost as much and then a stat()
// of the directory besides): its stamp now, to check the stamps of `cwd` against.
bool same_directory(uint64_t dev, uint64_t ino, PathStamp* here) {
  return stamp_path(".", here) && here->kind == 2 && here->dev == dev && here->ino == ino;
}

constexpr size_t kPrefix = 1024;  // sources are filed under a hash of up to this many bytes
constexpr size_t kWhole = 4096;   // sampled_hash hashes sources up to this size whole
constexpr size_t kEnds = 1024;    // bytes taken from each end of a larger one
constexpr size_t kBlocks = 32;    // and this many blocks of kBlock from its middle
constexpr size_t kBlock = 64;

// Where a source is filed: the table hash of its first kPrefix bytes (all of a smaller
// one). A NUL-terminated source is filed without knowing its length first.
uint64_t bucket_hash(std::string_view s) {
  return table_hash(s.data(), std::min(s.size(), kPrefix));
}

// The table hash of a source: of all of it up to kWhole bytes, else of its size, its two
// ends and evenly spaced blocks between. Tells apart sources of one bucket and size at the
// cost of a few KB; larger ones it does not are told apart by a hash of all bytes.
uint64_t sampled_hash(std::string_view s) {
  if (s.size() <= kWhole) return table_hash(s.data(), s.size());
  char buf[sizeof(uint64_t) + 2 * kEnds + kBlocks * kBlock];
  char* p = buf;
  const uint64_t size = s.size();
  std::memcpy(p, &size, sizeof size);
  p += sizeof size;
  std::memcpy(p, s.data(), kEnds);
  p += kEnds;
  const size_t middle = s.size() - 2 * kEnds - kBlock;
  for (size_t i = 0; i < kBlocks; ++i) {
    std::memcpy(p, s.data() + kEnds + middle * i / (kBlocks - 1), kBlock);
    p += kBlock;
  }
  std::memcpy(p, s.data() + s.size() - kEnds, kEnds);
  p += kEnds;
  return table_hash(buf, size_t(p - buf));
}

}  // namespace

std::shared_ptr<const KeyMemo::Item> KeyMemo::lookup(std::string_view source,
                                                     const CompileOptions& opts) {
  const uint64_t h = bucket_hash(source);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [begin, end] = shard.items.equal_range(h);
  size_t same_size = 0;
  for (auto it = begin; it != end; ++it) same_size += it->second->size == source.size();
  if (same_size == 0) return nullptr;
  // Several sources of one size: samples (all of a small one), then for a large one a hash
  // of all bytes, skip the others.
  const bool several = same_size > 1;
  const uint64_t sampled = several ? sampled_hash(source) : 0;
  const bool large = several && source.size() > kWhole;
  bool whole_known = false;
  uint64_t all = 0;
  for (auto it = begin; it != end; ++it) {
    const Item& item = *it->second;
    if (item.size != source.size()) continue;
    if (several && item.sampled != sampled) continue;
    if (large && !whole_known) {
      all = table_hash(source.data(), source.size());
      whole_known = true;
    }
    if (large && item.whole_hash != all) continue;
    if (item.source() == source && item.opts == opts) return it->second;
  }
  return nullptr;
}

bool KeyMemo::still_valid(const Item& item, std::string* key) {
  if (item.cwd.empty()) {
    if (!paths_unchanged(item.looked)) return false;
  } else {
    PathStamp here;
    if (!same_directory(item.cwd_dev, item.cwd_ino, &here) ||
        !paths_unchanged(item.looked, item.cwd, &here)) {
      return false;
    }
  }
  *key = item.key;
  return true;
}

bool KeyMemo::find(std::string_view source, const CompileOptions& opts, std::string* key) {
  const std::shared_ptr<const Item> item = lookup(source, opts);
  return item && still_valid(*item, key);
}

bool KeyMemo::find(const char* source, const CompileOptions& opts, std::string* key) {
  const size_t head = strnlen(source, kPrefix + 1);
  if (head <= kPrefix) return find(std::string_view(source, head), opts, key);
  // A longer source: the one remembered longer source of its bucket (the usual case) is
  // compared with it while its end is found. Several: measured, then as above.
  const uint64_t h = bucket_hash(std::string_view(source, kPrefix));
  Shard& shard = shards_[h % kShards];
  std::shared_ptr<const Item> only;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto [begin, end] = shard.items.equal_range(h);
    size_t large = 0;
    for (auto it = begin; it != end; ++it) {
      if (it->second->size > kPrefix) {
        only = it->second;
        ++large;
      }
    }
    if (large == 0) return false;
    if (large > 1) only.reset();
  }
  if (!only) return find(std::string_view(source), opts, key);
  if (!(only->opts == opts) || !cstr_equals(source, only->text.data(), only->size)) return false;
  return still_valid(*only, key);
}

void KeyMemo::remember(std::string_view source, const CompileOptions& opts, const std::string& key,
                       const IncludeScan& scan) {
  if (!scan.rememberable()) return;
  auto item = std::make_shared<Item>();
  item->text.reserve(source.size() + kTextPadding);
  item->text.assign(source.data(), source.size());
  item->text.append(kTextPadding, '\0');
  item->size = source.size();
  item->opts = opts;
  item->key = key;
  if (!scan.looked.empty() && !scan.cwd.empty()) {
    item->cwd = scan.cwd;
    item->cwd_dev = scan.cwd_dev;
    item->cwd_ino = scan.cwd_ino;
  }
  item->looked = scan.looked;
  item->sampled = sampled_hash(source);
  item->whole_hash = source.size() > kWhole ? table_hash(source.data(), source.size()) : 0;
  const uint64_t h = bucket_hash(source);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, end] = shard.items.equal_range(h);
  for (; it != end; ++it) {
    if (it->second->source() == source && it->second->opts == opts) {
      it->second = std::move(item);  // the files changed since: the new key replaces it
      return;
    }
  }
  if (shard.items.size() >= kMaxPerShard) shard.items.clear();
  shard.items.emplace(h, std::move(item));
}

bool KeyMemo::find_object(uint64_t id, const CompileOptions& opts, std::string* key) {
  std::shared_ptr<const Item> found;
  {
    ObjectShard& shard = objects_[id % kShards];
    std::lock_guard<std::mutex> lock(shard.mu);
    auto [it, end] = shard.items.equal_range(id);
    for (; it != end; ++it) {
      if (it->second->opts == opts) {
        found = it->second;
        break;
      }
    }
  }
  return found && still_valid(*found, key);
}

void KeyMemo::remember_object(uint64_t id, std::string_view source, const CompileOptions& opts) {
  std::shared_ptr<const Item> item = lookup(source, opts);
  if (!item) return;
  ObjectShard& shard = objects_[id % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, end] = shard.items.equal_range(id);
  for (; it != end; ++it) {
    if (it->second->opts == opts) {
      it->second = std::move(item);  // a newer key for the same request
      return;
    }
  }
  if (shard.items.size() >= kMaxPerShard) shard.items.clear();
  shard.items.emplace(id, std::move(item));
}

}  // namespace kjit
