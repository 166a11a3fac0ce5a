// C shims: the cache handle.
#include <cstring>

#include "api/handles.h"
#include "util/sha256.h"

using namespace kjit;
using namespace kjit::api;

namespace {

kjit_status check(const kjit_cache* c, const char* fn) {
  if (!ok(c)) return error(KJIT_ERROR_INVALID_HANDLE, std::string(fn) + ": invalid cache handle");
  return KJIT_OK;
}

kjit_status check_key(const char* key, const char* fn) {
  if (!key || !is_hex_key(key)) {
    return error(KJIT_ERROR_INVALID_ARGUMENT,
                 std::string(fn) + ": key must be 64 lowercase hex digits");
  }
  return KJIT_OK;
}

}  // namespace

extern "C" {

KJIT_EXPORT void kjit_cache_options_init(kjit_cache_options* opts) {
  if (!opts) return;
  std::memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

KJIT_EXPORT kjit_status kjit_cache_open(const kjit_cache_options* opts, kjit_cache** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_open: out is NULL");
    *out = nullptr;
    CacheConfig cfg;
    if (opts) {
      // Fields are read only if the caller's struct is large enough to hold them.
      if (opts->struct_size < offsetof(kjit_cache_options, memory_only) + sizeof(int)) {
        return error(KJIT_ERROR_INVALID_ARGUMENT,
                     "kjit_cache_open: opts->struct_size is too small; use KJIT_CACHE_OPTIONS_INIT");
      }
      if (opts->directory) cfg.directory = opts->directory;
      cfg.max_bytes = opts->max_size_bytes;
      cfg.memory_max_bytes = opts->memory_max_bytes;
      cfg.read_only = opts->read_only != 0;
      cfg.memory_only = opts->memory_only != 0;
    }
    cfg.remote = RemoteConfig::from_environment();
    if (opts && opts->struct_size >= offsetof(kjit_cache_options, remote_read_only) + sizeof(int)) {
      if (opts->remote_url) cfg.remote.url = opts->remote_url;
      if (opts->remote_read_only) cfg.remote.read_only = true;
    }
    auto c = std::make_unique<kjit_cache>();
    c->cache = std::make_unique<Cache>(cfg);
    *out = c.release();
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_cache_close(kjit_cache* cache) {
  if (ok(cache)) delete cache;
}

KJIT_EXPORT const char* kjit_cache_directory(const kjit_cache* cache) {
  if (!ok(cache)) return "";
  return cache->cache->disk_usable() || !cache->cache->directory().empty()
             ? cache->cache->directory().c_str()
             : "";
}

KJIT_EXPORT kjit_status kjit_cache_stats_get(kjit_cache* cache, kjit_cache_stats* stats) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_stats_get")) return s;
    if (!stats) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_stats_get: stats is NULL");
    if (stats->struct_size < sizeof(uint32_t) + sizeof(int)) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_cache_stats_get: set stats->struct_size = sizeof(kjit_cache_stats)");
    }
    cache->cache->stats(stats);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_clear_memory(kjit_cache* cache) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_clear_memory")) return s;
    cache->cache->clear_memory();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_clear(kjit_cache* cache) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_clear")) return s;
    cache->cache->clear();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_get(kjit_cache* cache, const char* key_hex, kjit_binary** out) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_get")) return s;
    if (kjit_status s = check_key(key_hex, "kjit_cache_get")) return s;
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_get: out is NULL");
    *out = nullptr;
    kjit_tier tier;
    bool corrupt = false;
    EntryPtr e = cache->cache->lookup(key_hex, &tier, &corrupt);
    if (!e && corrupt) {
      return error(KJIT_ERROR_CACHE_CORRUPT,
                   std::string("kjit_cache_get: entry ") + key_hex +
                       " failed verification (removed, unless the cache is read-only)");
    }
    if (!e) return error(KJIT_ERROR_NOT_FOUND, std::string("kjit_cache_get: no entry ") + key_hex);
    *out = make_binary(Outcome{KJIT_OK, "", e, tier});
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_put(kjit_cache* cache, const kjit_binary* binary) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_put")) return s;
    if (!ok(binary)) return error(KJIT_ERROR_INVALID_HANDLE, "kjit_cache_put: invalid binary handle");
    if (binary->status != KJIT_OK || !binary->entry) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_put: binary holds a failed compile");
    }
    cache->cache->insert(*binary->entry);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_remove(kjit_cache* cache, const char* key_hex) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_remove")) return s;
    if (kjit_status s = check_key(key_hex, "kjit_cache_remove")) return s;
    if (!cache->cache->remove(key_hex)) {
      return error(KJIT_ERROR_NOT_FOUND, std::string("kjit_cache_remove: no entry ") + key_hex);
    }
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_list(kjit_cache* cache, kjit_cache_list_fn fn, void* user) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_list")) return s;
    if (!fn) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_list: fn is NULL");
    cache->cache->list([&](const EntryInfo& i) {
      kjit_cache_entry_info info{};
      info.struct_size = sizeof info;
      info.key = i.key.c_str();
      info.target = i.target.c_str();
      info.kernels = i.kernels.c_str();
      info.bytes = i.bytes;
      info.created = i.created;
      info.last_used = i.last_used;
      info.compile_ms = i.compile_ms;
      return fn(&info, user) != 0;
    });
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_verify(kjit_cache* cache, uint64_t* checked, uint64_t* bad) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_verify")) return s;
    uint64_t c = 0, b = 0;
    cache->cache->verify(&c, &b);
    if (checked) *checked = c;
    if (bad) *bad = b;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_prune(kjit_cache* cache, uint64_t max_bytes,
                                         uint64_t* removed) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_prune")) return s;
    const uint64_t n = cache->cache->prune(max_bytes);
    if (removed) *removed = n;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_export(kjit_cache* cache, const char* path, uint64_t* count) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_export")) return s;
    if (!path || !*path) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_export: path is NULL or empty");
    const uint64_t n = cache->cache->export_file(path);
    if (count) *count = n;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_import(kjit_cache* cache, const char* path, uint64_t* imported,
                                          uint64_t* rejected) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_import")) return s;
    if (!path || !*path) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_import: path is NULL or empty");
    uint64_t in = 0, bad = 0;
    struct Counts {
      uint64_t* imported;
      uint64_t* rejected;
      uint64_t& in;
      uint64_t& bad;
      ~Counts() {
        if (imported) *imported = in;
        if (rejected) *rejected = bad;
      }
    } counts{imported, rejected, in, bad};
    cache->cache->import_file(path, &in, &bad);
    return KJIT_OK;
  });
}

}  // extern "C"
