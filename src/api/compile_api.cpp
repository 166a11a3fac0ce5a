// C shims: compiler, compiles, futures, binaries, hashes.
#include <cstring>
#include <optional>

#include "api/handles.h"
#include "api/versioned.h"
#include "compile/async.h"
#include "store/code_facts.h"
#include "store/entry_params.h"
#include "util/log.h"
#include "util/sha256.h"

using namespace kjit;
using namespace kjit::api;

namespace kjit::api {

kjit_binary* make_binary(const Outcome& o) {
  auto* b = new kjit_binary();
  b->status =
      o.status == KJIT_OK || o.status == KJIT_ERROR_NAME_NOT_FOUND ? o.status : KJIT_ERROR_COMPILE;
  b->entry = o.entry;
  b->tier = o.tier;
  b->not_stored = o.not_stored;
  return b;
}

}  // namespace kjit::api

namespace {

const CompileOptions& options_or_default(const kjit_options* opts) {
  static const CompileOptions defaults;
  return opts ? opts->opts : defaults;
}

// A compile that succeeded but holds no kernel entry point, said in the log when it is
// compiled: most often a __global__ template compiled without a name expression (only an
// instantiation is compiled). Relocatable code and LTO-IR, meant for linking, are quiet.
void warn_if_no_entry_point(const Outcome& o) {
  if (o.status != KJIT_OK || o.tier != KJIT_TIER_COMPILED || !o.entry) return;
  const Entry& e = *o.entry;
  if (!e.kernels.empty() || !e.names.empty() || !e.ltoir.empty()) return;
  for (const std::string& opt : e.options) {
    if (opt == "-dc" || opt == "--device-c" || opt == "-rdc=true" ||
        opt == "--relocatable-device-code=true" || opt == "-ewp" ||
        opt == "--extensible-whole-program") {
      return;
    }
  }
  log_warn("'" + e.program_name + "' (" + e.target +
           ") compiled to no kernel entry point: a __global__ template is compiled only where "
           "it is instantiated; name the instantiation with a name expression, e.g. "
           "'kernel<float>'");
}

// Hands an outcome to the C caller: a binary for success and for failures with a log.
kjit_status deliver(const Outcome& o, kjit_binary** out) {
  warn_if_no_entry_point(o);
  if (delivers_binary(o)) *out = make_binary(o);
  if (o.status != KJIT_OK) return error(o.status, o.message);
  return KJIT_OK;
}

const Entry* entry_of(const kjit_binary* b) {
  return ok(b) && b->entry ? b->entry.get() : nullptr;
}

}  // namespace

extern "C" {

KJIT_EXPORT kjit_status kjit_compiler_create(kjit_cache* cache, unsigned threads,
                                             kjit_compiler** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compiler_create: out is NULL");
    if (cache && !ok(cache)) {
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compiler_create: invalid cache handle");
    }
    auto* c = new kjit_compiler();
    c->compiler = std::make_unique<Compiler>(cache ? cache->cache.get() : nullptr, threads);
    *out = c;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_compiler_set_compile_mode(kjit_compiler* compiler, int mode) {
  return guard([&] {
    if (!ok(compiler)) {
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_compiler_set_compile_mode: invalid compiler handle");
    }
    if (mode != KJIT_COMPILE_MODE_AUTO && mode != KJIT_COMPILE_MODE_WORKER &&
        mode != KJIT_COMPILE_MODE_INPROCESS) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_compiler_set_compile_mode: unknown mode " + std::to_string(mode));
    }
    compiler->compiler->set_mode(static_cast<CompileMode>(mode));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_compiler_get_compile_mode(const kjit_compiler* compiler, int* mode) {
  return guard([&] {
    if (!ok(compiler)) {
      return error(KJIT_ERROR_INVALID_HANDLE,
                   "kjit_compiler_get_compile_mode: invalid compiler handle");
    }
    if (!mode)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compiler_get_compile_mode: mode is NULL");
    *mode = static_cast<int>(compiler->compiler->mode());
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_worker_info_init_sized(kjit_worker_info* info, size_t size) {
  return guard([&] { return kjit::api::init_sized(info, size, "kjit_worker_info_init_sized"); });
}

KJIT_EXPORT kjit_status kjit_worker_info_get(kjit_cache* cache, kjit_worker_info* info) {
  return guard([&] {
    size_t size = 0;
    if (kjit_status s = check_out(info, &size, "kjit_worker_info_get: info")) return s;
    if (cache && !ok(cache))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_worker_info_get: invalid cache handle");
    std::string why;
    const auto st = worker_status_for(cache ? cache->cache.get() : nullptr, &why);
    kjit_worker_info full = blank<kjit_worker_info>();
    full.running = st ? 1 : 0;
    if (st) {
      full.pch_in_use = st->pch_in_use ? 1 : 0;
      full.pid = st->pid;
      full.uptime_s = st->uptime_s;
      full.idle_s = st->idle_s;
      full.compiles = st->compiles;
      full.failures = st->failures;
      full.timeouts = st->timeouts;
      full.in_flight = st->in_flight;
      full.crashes = st->crashes;
      full.pch_created = st->pch_created;
      full.pch_used = st->pch_used;
      full.idle_limit_s = st->idle_limit_s;
      full.rss_bytes = st->rss_bytes;
    }
    write_out(info, size, full);
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_compiler_destroy(kjit_compiler* compiler) {
  if (ok(compiler)) delete compiler;
}

KJIT_EXPORT kjit_status kjit_compile(kjit_compiler* compiler, const char* source,
                                     const kjit_options* opts, kjit_binary** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compile: out is NULL");
    *out = nullptr;
    if (!ok(compiler))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile: invalid compiler handle");
    if (opts && !ok(opts))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile: invalid options handle");
    if (!source) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compile: source is NULL");
    return deliver(compiler->compiler->compile(source, options_or_default(opts)), out);
  });
}

KJIT_EXPORT kjit_status kjit_source_create(const char* text, size_t size, kjit_source** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_source_create: out is NULL");
    if (!text) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_source_create: text is NULL");
    const size_t n = size == KJIT_SOURCE_NUL_TERMINATED ? std::strlen(text) : size;
    *out = new kjit_source(std::string(text, n));
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_source_destroy(kjit_source* source) {
  if (ok(source)) delete source;
}

KJIT_EXPORT kjit_status kjit_compile_source(kjit_compiler* compiler, const kjit_source* source,
                                            const kjit_options* opts, kjit_binary** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compile_source: out is NULL");
    *out = nullptr;
    if (!ok(compiler))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_source: invalid compiler handle");
    if (!ok(source))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_source: invalid source handle");
    if (opts && !ok(opts))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_source: invalid options handle");
    return deliver(compiler->compiler->compile(source->source, options_or_default(opts)), out);
  });
}

KJIT_EXPORT kjit_status kjit_compile_async(kjit_compiler* compiler, const char* source,
                                           const kjit_options* opts, kjit_future** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compile_async: out is NULL");
    *out = nullptr;
    if (!ok(compiler))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_async: invalid compiler handle");
    if (opts && !ok(opts))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_async: invalid options handle");
    if (!source) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compile_async: source is NULL");
    auto future = std::make_unique<kjit_future>();
    future->state = compile_async(*compiler->compiler, source, options_or_default(opts));
    *out = future.release();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_future_wait(kjit_future* future, int64_t timeout_ms,
                                         kjit_binary** out) {
  return guard([&] {
    if (!ok(future))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_future_wait: invalid future handle");
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_future_wait: out is NULL");
    Outcome outcome;
    switch (future->state->wait(timeout_ms, &outcome)) {
      case CompileFuture::Wait::Timeout:
        return error(KJIT_ERROR_TIMEOUT, "kjit_future_wait: compile not finished after " +
                                             std::to_string(timeout_ms) + " ms");
      case CompileFuture::Wait::Taken:
        return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_future_wait: result already taken");
      case CompileFuture::Wait::Ready:
        break;
    }
    *out = nullptr;
    return deliver(outcome, out);
  });
}

KJIT_EXPORT int kjit_future_ready(const kjit_future* future) {
  if (!ok(future)) return -1;
  return future->state->ready() ? 1 : 0;
}

KJIT_EXPORT kjit_status kjit_future_cancel(kjit_future* future) {
  return guard([&] {
    if (!ok(future))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_future_cancel: invalid future handle");
    future->state->cancel();
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_future_destroy(kjit_future* future) {
  if (!ok(future)) return;
  future->state->cancel();
  delete future;
}

KJIT_EXPORT kjit_status kjit_compile_many(kjit_compiler* compiler, size_t count,
                                          const char* const* sources,
                                          const kjit_options* const* opts, kjit_binary** outs,
                                          kjit_status* statuses) {
  return guard([&] {
    if (!ok(compiler))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_many: invalid compiler handle");
    if (count == 0) return KJIT_OK;
    if (!sources || !outs || !statuses) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_compile_many: sources, outs and statuses must not be NULL");
    }
    for (size_t i = 0; i < count; ++i) {
      if (!sources[i]) {
        return error(KJIT_ERROR_INVALID_ARGUMENT,
                     "kjit_compile_many: sources[" + std::to_string(i) + "] is NULL");
      }
      if (opts && opts[i] && !ok(opts[i])) {
        return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compile_many: opts[" + std::to_string(i) +
                                                    "] is not a valid options handle");
      }
    }
    std::vector<CompileRequest> requests(count);
    for (size_t i = 0; i < count; ++i) {
      requests[i] = {sources[i], options_or_default(opts ? opts[i] : nullptr)};
    }
    const std::vector<Outcome> results = compile_many(*compiler->compiler, std::move(requests));
    kjit_status first = KJIT_OK;
    std::string first_message;
    for (size_t i = 0; i < count; ++i) {
      outs[i] = nullptr;
      const Outcome& r = results[i];
      warn_if_no_entry_point(r);
      if (delivers_binary(r)) outs[i] = make_binary(r);
      statuses[i] = r.status;
      if (r.status != KJIT_OK && first == KJIT_OK) {
        first = r.status;
        first_message = "kjit_compile_many: item " + std::to_string(i) + ": " + r.message;
      }
    }
    if (first != KJIT_OK) return error(first, first_message);
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_binary_destroy(kjit_binary* binary) {
  if (ok(binary)) delete binary;
}

KJIT_EXPORT kjit_status kjit_binary_status(const kjit_binary* binary) {
  if (!ok(binary)) return KJIT_ERROR_INVALID_HANDLE;
  return binary->status;
}

KJIT_EXPORT const void* kjit_binary_data(const kjit_binary* binary, int kind, size_t* size) {
  if (size) *size = 0;
  const Entry* e = entry_of(binary);
  if (!e || (kind != KJIT_OUTPUT_PTX && kind != KJIT_OUTPUT_CUBIN && kind != KJIT_OUTPUT_LTOIR)) {
    return nullptr;
  }
  const Blob* blob = e->blob(static_cast<BlobKind>(kind));
  if (blob->empty()) return nullptr;
  if (size) *size = blob->size();
  return blob->c_str();
}

KJIT_EXPORT const char* kjit_binary_log(const kjit_binary* binary) {
  const Entry* e = entry_of(binary);
  return e ? e->log.c_str() : "";
}

KJIT_EXPORT const char* kjit_binary_target(const kjit_binary* binary) {
  const Entry* e = entry_of(binary);
  return e ? e->target.c_str() : "";
}

KJIT_EXPORT const char* kjit_binary_key(const kjit_binary* binary) {
  const Entry* e = entry_of(binary);
  return e ? e->key.c_str() : "";
}

KJIT_EXPORT int kjit_binary_tier(const kjit_binary* binary) {
  return ok(binary) ? int(binary->tier) : -1;
}

KJIT_EXPORT int kjit_binary_stored(const kjit_binary* binary, const char** reason) {
  if (reason) *reason = nullptr;
  if (!ok(binary) || binary->status != KJIT_OK) return -1;
  if (binary->not_stored.empty()) return 1;
  if (reason) *reason = binary->not_stored.c_str();
  return 0;
}

KJIT_EXPORT double kjit_binary_compile_ms(const kjit_binary* binary) {
  const Entry* e = entry_of(binary);
  return e ? e->compile_ms : 0.0;
}

KJIT_EXPORT const char* kjit_binary_lowered_name(const kjit_binary* binary, const char* expr) {
  const Entry* e = entry_of(binary);
  if (!e || !expr) return nullptr;
  for (const auto& [name, lowered] : e->names) {
    if (name == expr) return lowered.c_str();
  }
  return nullptr;
}

KJIT_EXPORT size_t kjit_binary_name_count(const kjit_binary* binary) {
  const Entry* e = entry_of(binary);
  return e ? e->names.size() : 0;
}

KJIT_EXPORT const char* kjit_binary_name_expression(const kjit_binary* binary, size_t index) {
  const Entry* e = entry_of(binary);
  return e && index < e->names.size() ? e->names[index].first.c_str() : nullptr;
}

KJIT_EXPORT const char* kjit_binary_lowered_name_at(const kjit_binary* binary, size_t index) {
  const Entry* e = entry_of(binary);
  return e && index < e->names.size() ? e->names[index].second.c_str() : nullptr;
}

KJIT_EXPORT size_t kjit_binary_kernel_count(const kjit_binary* binary) {
  const Entry* e = entry_of(binary);
  return e ? e->kernels.size() : 0;
}

KJIT_EXPORT const char* kjit_binary_kernel_name(const kjit_binary* binary, size_t index) {
  const Entry* e = entry_of(binary);
  return e && index < e->kernels.size() ? e->kernels[index].c_str() : nullptr;
}

KJIT_EXPORT kjit_status kjit_binary_param_count(const kjit_binary* binary, const char* kernel,
                                                size_t* count) {
  return guard([&] {
    if (!ok(binary)) return error(KJIT_ERROR_INVALID_HANDLE, "kjit_binary_param_count: bad binary");
    if (!kernel || !count) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_binary_param_count: NULL argument");
    }
    if (!binary->entry) {
      return error(KJIT_ERROR_UNSUPPORTED, "kjit_binary_param_count: the binary holds no code");
    }
    *count = kernel_params(*binary->entry, kernel).size();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_binary_param_info(const kjit_binary* binary, const char* kernel,
                                               size_t index, size_t* size, size_t* align) {
  return guard([&] {
    if (!ok(binary)) return error(KJIT_ERROR_INVALID_HANDLE, "kjit_binary_param_info: bad binary");
    if (!kernel || !size || !align) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_binary_param_info: NULL argument");
    }
    if (!binary->entry) {
      return error(KJIT_ERROR_UNSUPPORTED, "kjit_binary_param_info: the binary holds no code");
    }
    const std::vector<PtxParam> params = kernel_params(*binary->entry, kernel);
    if (index >= params.size()) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_binary_param_info: parameter index " + std::to_string(index) +
                       " is out of range: kernel '" + kernel + "' has " +
                       std::to_string(params.size()) + " parameters");
    }
    *size = params[index].size;
    *align = params[index].align;
    return KJIT_OK;
  });
}

namespace {
const std::vector<std::string>* advisories_of(const kjit_binary* binary) {
  if (!ok(binary) || !binary->entry) return nullptr;
  auto* b = const_cast<kjit_binary*>(binary);
  try {
    std::call_once(b->advisories_once, [b] { b->advisories = ptxas_advisories(b->entry->log); });
  } catch (...) {
    return nullptr;
  }
  return &b->advisories;
}
}  // namespace

KJIT_EXPORT size_t kjit_binary_advisory_count(const kjit_binary* binary) {
  const std::vector<std::string>* a = advisories_of(binary);
  return a ? a->size() : 0;
}

KJIT_EXPORT const char* kjit_binary_advisory(const kjit_binary* binary, size_t index) {
  const std::vector<std::string>* a = advisories_of(binary);
  return a && index < a->size() ? (*a)[index].c_str() : nullptr;
}

KJIT_EXPORT const char* kjit_binary_metadata_json(const kjit_binary* binary) {
  if (!ok(binary) || !binary->entry) return "{}";
  auto* b = const_cast<kjit_binary*>(binary);
  try {
    std::call_once(b->metadata_once, [b] { b->metadata = b->entry->metadata_json(); });
  } catch (...) {
    return "{}";
  }
  return b->metadata.c_str();
}

KJIT_EXPORT kjit_status kjit_hash_source(const char* data, size_t len, char out_hex[65]) {
  return guard([&] {
    if ((!data && len) || !out_hex)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_hash_source: NULL argument");
    const std::string hex = to_hex(sha256(data ? data : "", len));
    std::memcpy(out_hex, hex.c_str(), 65);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_hash_options(const char* const* options, size_t count,
                                          char out_hex[65]) {
  return guard([&] {
    if ((!options && count) || !out_hex)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_hash_options: NULL argument");
    Sha256 h;
    h.u64(count);
    for (size_t i = 0; i < count; ++i) {
      if (!options[i]) {
        return error(KJIT_ERROR_INVALID_ARGUMENT,
                     "kjit_hash_options: options[" + std::to_string(i) + "] is NULL");
      }
      h.field(options[i]);
    }
    const std::string hex = to_hex(h.finish());
    std::memcpy(out_hex, hex.c_str(), 65);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_compute_key(const char* source, const kjit_options* opts,
                                         char out_hex[65]) {
  return guard([&] {
    if (!source || !out_hex)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compute_key: NULL argument");
    if (opts && !ok(opts))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compute_key: invalid options handle");
    // A program that can read files gets its key from what NVRTC read for it: from the
    // default cache's records, else from compiling it there (compiler.h: Compiler::key).
    const kjit::CompileOptions& o = options_or_default(opts);
    std::unique_ptr<Cache> cache;
    if (may_read_files(source, o)) cache = std::make_unique<Cache>(CacheConfig{});
    Compiler c(cache.get(), 1);
    const std::string key = c.key(source, o);
    std::memcpy(out_hex, key.c_str(), 65);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_compute_key_cached(kjit_cache* cache, const char* source,
                                                const kjit_options* opts, char out_hex[65],
                                                int* known) {
  return guard([&] {
    if (!source || !out_hex || !known)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_compute_key_cached: NULL argument");
    *known = 0;
    out_hex[0] = '\0';
    if (cache && !ok(cache))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compute_key_cached: invalid cache handle");
    if (opts && !ok(opts))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_compute_key_cached: invalid options handle");
    Compiler c(cache ? cache->cache.get() : nullptr, 1);
    if (const std::optional<std::string> key = c.known_key(source, options_or_default(opts))) {
      std::memcpy(out_hex, key->c_str(), 65);
      *known = 1;
    }
    return KJIT_OK;
  });
}

}  // extern "C"
