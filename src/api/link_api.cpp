// C shims of link.h: argument checks and exception mapping only.
#include <cstring>
#include <string>

#include "api/handles.h"
#include "kjit/link.h"
#include "link/linker.h"
#include "link/nvjitlink.h"

using namespace kjit;
using namespace kjit::api;

namespace {

kjit_status bad_linker(const char* fn) {
  return error(KJIT_ERROR_INVALID_HANDLE, std::string(fn) + ": invalid linker handle");
}

// A binary for a success, or for a failure nvJitLink reported (it holds the log).
kjit_status deliver_link(const Outcome& o, kjit_binary** out) {
  if (o.entry) {
    auto* b = new kjit_binary();
    b->status = o.status;
    b->entry = o.entry;
    b->tier = o.tier;
    *out = b;
  }
  if (o.status != KJIT_OK) return error(o.status, o.message);
  return KJIT_OK;
}

}  // namespace

extern "C" {

KJIT_EXPORT kjit_status kjit_linker_create(kjit_cache* cache, kjit_linker** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_linker_create: out is NULL");
    *out = nullptr;
    if (cache && !ok(cache))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_linker_create: invalid cache handle");
    auto* l = new kjit_linker();
    l->cache = cache ? cache->cache.get() : nullptr;
    *out = l;
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_linker_destroy(kjit_linker* linker) {
  if (ok(linker)) delete linker;
}

KJIT_EXPORT kjit_status kjit_linker_set_target(kjit_linker* linker, const char* target) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_set_target");
    if (!target || !*target)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_linker_set_target: target is NULL or empty");
    linker->request.target = target;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_linker_add_option(kjit_linker* linker, const char* option) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_add_option");
    if (!option || !*option)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_linker_add_option: option is NULL or empty");
    linker->request.options.emplace_back(option);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_linker_set_outputs(kjit_linker* linker, unsigned outputs) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_set_outputs");
    linker->request.outputs = outputs;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_linker_add_binary(kjit_linker* linker, const kjit_binary* binary,
                                               const char* name) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_add_binary");
    if (!ok(binary))
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_linker_add_binary: invalid binary handle");
    if (binary->status != KJIT_OK || !binary->entry) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_linker_add_binary: the binary holds a failed compile (no code)");
    }
    linker->request.inputs.push_back(link::input_from_entry(binary->entry, name ? name : "", ""));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_linker_add_data(kjit_linker* linker, int kind, const void* data,
                                             size_t size, const char* name) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_add_data");
    if (!data || size == 0)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_linker_add_data: data is NULL or empty");
    if (kind < KJIT_LINK_INPUT_CUBIN || kind > KJIT_LINK_INPUT_LIBRARY) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_linker_add_data: unknown input kind " + std::to_string(kind));
    }
    std::string bytes(static_cast<const char*>(data), size);
    linker->request.inputs.push_back(link::input_from_bytes(static_cast<link::InputKind>(kind),
                                                            std::move(bytes), name ? name : ""));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_linker_add_file(kjit_linker* linker, int kind, const char* path) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_add_file");
    if (!path || !*path)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_linker_add_file: path is NULL or empty");
    if (kind < KJIT_LINK_INPUT_AUTO || kind > KJIT_LINK_INPUT_LIBRARY) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_linker_add_file: unknown input kind " + std::to_string(kind));
    }
    linker->request.inputs.push_back(link::input_from_file(kind, path));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_link(kjit_linker* linker, kjit_binary** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_link: out is NULL");
    *out = nullptr;
    if (!ok(linker)) return bad_linker("kjit_link");
    return deliver_link(link::link(linker->cache, linker->request), out);
  });
}

KJIT_EXPORT kjit_status kjit_linker_key(kjit_linker* linker, char out_hex[65]) {
  return guard([&] {
    if (!ok(linker)) return bad_linker("kjit_linker_key");
    if (!out_hex) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_linker_key: out_hex is NULL");
    const std::string key = link::link_key(link::resolve(linker->request),
                                           link::nvjitlink_identity(facts_of(linker->cache)));
    std::memcpy(out_hex, key.c_str(), 65);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_nvjitlink_version(const char** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_nvjitlink_version: out is NULL");
    *out = link::nvjitlink().identity.c_str();
    return KJIT_OK;
  });
}

}  // extern "C"
