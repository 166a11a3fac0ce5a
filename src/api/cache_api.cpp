// C shims: the cache handle.
#include <cstdio>
#include <cstring>

#include "api/handles.h"
#include "api/versioned.h"
#include "store/remote.h"
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

// kjit_cache_stats plus the one counter that it names otherwise: compile_us_saved, which
// the public struct holds in milliseconds (compile_ms_saved, a double).
struct PublicStats : kjit_cache_stats {
  uint64_t compile_us_saved = 0, total_compile_us_saved = 0;
};

kjit_cache_stats to_public(const CacheStats& c) {
  PublicStats s;
  static_cast<kjit_cache_stats&>(s) = blank<kjit_cache_stats>();
  // Each counter of KJIT_CACHE_COUNTERS and its total, into the fields of the same names:
  // a counter that kjit_cache_stats lacks does not compile.
#define KJIT_COPY_COUNTER(name) s.name = c.name, s.total_##name = c.total_##name;
  KJIT_CACHE_COUNTERS(KJIT_COPY_COUNTER)
#undef KJIT_COPY_COUNTER
  s.compile_ms_saved = static_cast<double>(s.compile_us_saved) / 1000.0;
  s.total_compile_ms_saved = static_cast<double>(s.total_compile_us_saved) / 1000.0;
  s.disk_state = c.disk_state;
  s.remote_state = c.remote_state;
  s.stores = c.stores;
  s.store_failures = c.store_failures;
  s.waits = c.waits;
  s.memory_entries = c.memory_entries;
  s.memory_bytes = c.memory_bytes;
  s.disk_entries = c.disk_entries;
  s.disk_bytes = c.disk_bytes;
  s.max_size_bytes = c.max_size_bytes;
  std::snprintf(s.message, sizeof s.message, "%s", c.message.c_str());
  return s;  // the kjit_cache_stats part
}

}  // namespace

extern "C" {

KJIT_EXPORT kjit_status kjit_cache_options_init_sized(kjit_cache_options* opts, size_t size) {
  return guard([&] { return init_sized(opts, size, "kjit_cache_options_init_sized"); });
}

// The 0.1.0 entry point (the header's macro of the same name calls the sized one).
KJIT_EXPORT void(kjit_cache_options_init)(kjit_cache_options* opts) {
  init_v0_1(opts);
}

KJIT_EXPORT kjit_status kjit_cache_stats_init_sized(kjit_cache_stats* stats, size_t size) {
  return guard([&] { return init_sized(stats, size, "kjit_cache_stats_init_sized"); });
}

KJIT_EXPORT kjit_status kjit_cache_open(const kjit_cache_options* opts, kjit_cache** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_open: out is NULL");
    *out = nullptr;
    kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
    if (opts) {
      if (kjit_status s = read_in(opts, &o, "kjit_cache_open: opts")) return s;
    }
    CacheConfig cfg;
    if (o.directory) cfg.directory = o.directory;
    cfg.max_bytes = o.max_size_bytes;
    cfg.memory_max_bytes = o.memory_max_bytes;
    cfg.read_only = o.read_only != 0;
    cfg.memory_only = o.memory_only != 0;
    cfg.remote = RemoteConfig::from_environment();
    if (o.remote_url) cfg.remote.url = o.remote_url;
    if (o.remote_read_only) cfg.remote.read_only = true;
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
    size_t size = 0;
    if (kjit_status s = check_out(stats, &size, "kjit_cache_stats_get: stats")) return s;
    if (kjit_status s = check(cache, "kjit_cache_stats_get")) return s;
    write_out(stats, size, to_public(cache->cache->stats()));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_remote_info(kjit_cache* cache, int probe, const char** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_remote_info: out is NULL");
    *out = nullptr;
    if (kjit_status s = check(cache, "kjit_cache_remote_info")) return s;
    thread_local std::string text;
    RemoteTier* remote = cache->cache->remote();
    text = remote ? remote->describe(probe != 0) : std::string("{\"topology\":\"none\"}");
    *out = text.c_str();
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
    if (!ok(binary))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_cache_put: invalid binary handle");
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

KJIT_EXPORT kjit_status kjit_cache_prune(kjit_cache* cache, uint64_t max_bytes, uint64_t* removed) {
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
    if (!path || !*path)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_export: path is NULL or empty");
    const uint64_t n = cache->cache->export_file(path);
    if (count) *count = n;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_cache_import(kjit_cache* cache, const char* path, uint64_t* imported,
                                          uint64_t* rejected) {
  return guard([&] {
    if (kjit_status s = check(cache, "kjit_cache_import")) return s;
    if (!path || !*path)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_cache_import: path is NULL or empty");
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
