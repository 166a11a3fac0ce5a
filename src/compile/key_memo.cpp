#include "compile/key_memo.h"

#include <unistd.h>

#include <climits>

#include "util/checksum.h"

namespace kjit {
namespace {

bool same_directory(const std::string& cwd) {
  if (cwd.empty()) return true;
  char buf[PATH_MAX];
  return getcwd(buf, sizeof buf) && cwd == buf;
}

}  // namespace

bool KeyMemo::find(std::string_view source, const CompileOptions& opts, std::string* key) {
  const uint64_t h = table_hash(source.data(), source.size());
  Shard& shard = shards_[h % kShards];
  std::shared_ptr<const Item> item;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto [it, end] = shard.items.equal_range(h);
    for (; it != end; ++it) {
      if (it->second->source == source && it->second->opts == opts) {
        item = it->second;
        break;
      }
    }
  }
  if (!item || !same_directory(item->cwd) || !paths_unchanged(item->looked)) return false;
  *key = item->key;
  return true;
}

void KeyMemo::remember(std::string_view source, const CompileOptions& opts,
                       const std::string& key, const IncludeScan& scan) {
  if (!scan.rememberable()) return;
  auto item = std::make_shared<Item>();
  item->source = std::string(source);
  item->opts = opts;
  item->key = key;
  if (!scan.looked.empty()) item->cwd = scan.cwd;
  item->looked = scan.looked;
  const uint64_t h = table_hash(source.data(), source.size());
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
