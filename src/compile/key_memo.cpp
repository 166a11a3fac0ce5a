#include "compile/key_memo.h"

#include <unistd.h>

#include <climits>
#include <cstring>

#include "util/checksum.h"

namespace kjit {
namespace {

// The process still works in the directory the scan named `cwd` (one stat() of "." with
// no path to walk, where comparing getcwd()'s text would cost as much and then a stat()
// of the directory besides): its stamp now, to check the stamps of `cwd` against.
bool same_directory(uint64_t dev, uint64_t ino, PathStamp* here) {
  return stamp_path(".", here) && here->kind == 2 && here->dev == dev && here->ino == ino;
}

constexpr size_t kWhole = 4096;  // sources up to this size are hashed whole
constexpr size_t kEnds = 1024;   // bytes taken from each end of a larger one
constexpr size_t kBlocks = 32;   // and this many blocks of kBlock from its middle
constexpr size_t kBlock = 64;

// The table hash of a source: of all of it up to kWhole bytes, else of its size, its two
// ends and evenly spaced blocks between (a 64 KB source is then found at the cost of one
// comparison of its bytes rather than a hash and a comparison). Sources that differ only
// between the samples share a bucket; find() tells them apart by a hash of all bytes.
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

bool KeyMemo::find(std::string_view source, const CompileOptions& opts, std::string* key) {
  const uint64_t h = sampled_hash(source);
  Shard& shard = shards_[h % kShards];
  std::shared_ptr<const Item> item;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto [begin, end] = shard.items.equal_range(h);
    size_t same_size = 0;
    for (auto it = begin; it != end; ++it) same_size += it->second->source.size() == source.size();
    // Several sources sampled alike: a hash of all bytes skips the ones that differ.
    const bool whole = same_size > 1 && source.size() > kWhole;
    const uint64_t all = whole ? table_hash(source.data(), source.size()) : 0;
    for (auto it = begin; it != end; ++it) {
      if (whole && it->second->whole_hash != all) continue;
      if (it->second->source == source && it->second->opts == opts) {
        item = it->second;
        break;
      }
    }
  }
  if (!item) return false;
  if (item->cwd.empty()) {
    if (!paths_unchanged(item->looked)) return false;
  } else {
    PathStamp here;
    if (!same_directory(item->cwd_dev, item->cwd_ino, &here) ||
        !paths_unchanged(item->looked, item->cwd, &here)) {
      return false;
    }
  }
  *key = item->key;
  return true;
}

void KeyMemo::remember(std::string_view source, const CompileOptions& opts, const std::string& key,
                       const IncludeScan& scan) {
  if (!scan.rememberable()) return;
  auto item = std::make_shared<Item>();
  item->source = std::string(source);
  item->opts = opts;
  item->key = key;
  if (!scan.looked.empty() && !scan.cwd.empty()) {
    item->cwd = scan.cwd;
    item->cwd_dev = scan.cwd_dev;
    item->cwd_ino = scan.cwd_ino;
  }
  item->looked = scan.looked;
  item->whole_hash = source.size() > kWhole ? table_hash(source.data(), source.size()) : 0;
  const uint64_t h = sampled_hash(source);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, end] = shard.items.equal_range(h);
  for (; it != end; ++it) {
    if (it->second->source == source && it->second->opts == opts) {
      it->second = std::move(item);  // the files changed since: the new key replaces it
      return;
    }
  }
  if (shard.items.size() >= kMaxPerShard) shard.items.clear();
  shard.items.emplace(h, std::move(item));
}

}  // namespace kjit
