// The in-process tier: a byte-bounded LRU map from key to shared, immutable entries.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "store/entry.h"

namespace kjit {

class MemoryTier {
 public:
  explicit MemoryTier(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  EntryPtr get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  void put(const EntryPtr& e) {
    const uint64_t size = e->bytes();
    if (size > max_bytes_) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(e->key);
    if (it != map_.end()) {
      bytes_ -= it->second->second->bytes();
      lru_.erase(it->second);
      map_.erase(it);
    }
    lru_.emplace_front(e->key, e);
    map_.emplace(e->key, lru_.begin());
    bytes_ += size;
    while (bytes_ > max_bytes_ && !lru_.empty()) {
      bytes_ -= lru_.back().second->bytes();
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }

  void remove(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return;
    bytes_ -= it->second->second->bytes();
    lru_.erase(it->second);
    map_.erase(it);
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
    bytes_ = 0;
  }

  void totals(uint64_t* entries, uint64_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    *entries = map_.size();
    *bytes = bytes_;
  }

 private:
  using Item = std::pair<std::string, EntryPtr>;
  std::mutex mu_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::list<Item> lru_;
  std::unordered_map<std::string, std::list<Item>::iterator> map_;
};

}  // namespace kjit
