// C entry points of kernel.h: argument checks and exception mapping only.
#include <cstring>
#include <memory>
#include <string>

#include "api/handles.h"
#include "api/versioned.h"
#include "cuda/context.h"
#include "cuda/device.h"
#include "kernel/kernel.h"
#include "kjit/kernel.h"
#include "nvrtc/device_target.h"

using kjit::api::error;
using kjit::api::guard;
using kjit::api::ok;
using kjit::api::read_in;

namespace {

constexpr unsigned kKnownFlags = KJIT_KERNEL_NO_RELOAD | KJIT_KERNEL_FORCE_PTX;

kjit_status bad_kernel() {
  return error(KJIT_ERROR_INVALID_HANDLE, "invalid kjit_kernel handle (NULL or destroyed)");
}

kjit_status copy_out(const std::string& s, char* out, size_t size, const char* what) {
  if (s.size() + 1 > size) {
    return error(KJIT_ERROR_BUFFER_TOO_SMALL, std::string(what) + " needs " +
                                                  std::to_string(s.size() + 1) +
                                                  " bytes, buffer has " + std::to_string(size));
  }
  std::memcpy(out, s.c_str(), s.size() + 1);
  return KJIT_OK;
}

// The checks of a device-architecture output buffer, for the entry point `fn`.
kjit_status check_arch_buffer(const char* fn, const char* out, size_t size) {
  if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, std::string(fn) + ": out is NULL");
  if (size < 16) {
    return error(
        KJIT_ERROR_BUFFER_TOO_SMALL,
        std::string(fn) + ": the buffer must hold at least 16 bytes, has " + std::to_string(size));
  }
  return KJIT_OK;
}

kjit_kernel_attributes to_public(const kjit::KernelAttributes& k) {
  kjit_kernel_attributes a = kjit::api::blank<kjit_kernel_attributes>();
  a.num_regs = k.num_regs;
  a.static_shared_bytes = k.static_shared_bytes;
  a.const_bytes = k.const_bytes;
  a.local_bytes = k.local_bytes;
  a.max_threads_per_block = k.max_threads_per_block;
  a.max_dynamic_shared_bytes = k.max_dynamic_shared_bytes;
  a.ptx_version = k.ptx_version;
  a.binary_version = k.binary_version;
  return a;
}

}  // namespace

extern "C" {

KJIT_EXPORT kjit_status kjit_device_count(int* count) {
  return guard([&] {
    if (!count) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_device_count: count is NULL");
    *count = kjit::cuda::device_count();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_device_arch(int device, char* out, size_t size) {
  return guard([&] {
    if (const kjit_status st = check_arch_buffer("kjit_device_arch", out, size)) return st;
    return copy_out(kjit::cuda::device_arch(device), out, size, "arch");
  });
}

KJIT_EXPORT kjit_status kjit_device_arch_cached(kjit_cache* cache, int device, char* out,
                                                size_t size, int* from_record) {
  return guard([&] {
    if (from_record) *from_record = 0;
    if (cache && !ok(cache)) {
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_device_arch_cached: invalid cache handle");
    }
    if (const kjit_status st = check_arch_buffer("kjit_device_arch_cached", out, size)) return st;
    if (device < 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "device ordinal " + std::to_string(device) + " is negative");
    }
    const kjit::DeviceTarget t = kjit::device_target(cache ? cache->cache.get() : nullptr, device);
    const kjit_status st = copy_out(t.arch, out, size, "arch");
    if (st == KJIT_OK && from_record) *from_record = t.from_record ? 1 : 0;
    return st;
  });
}

KJIT_EXPORT kjit_status kjit_device_name(int device, char* out, size_t size) {
  return guard([&] {
    if (!out || size == 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_device_name: out is NULL or size is 0");
    }
    return copy_out(kjit::cuda::device_name(device), out, size, "device name");
  });
}

KJIT_EXPORT kjit_status kjit_driver_version(int* version) {
  return guard([&] {
    if (!version) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_driver_version: version is NULL");
    *version = kjit::cuda::driver_version();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_create(kjit_compiler* compiler, const char* source,
                                           const char* name, const kjit_options* opts, int device,
                                           unsigned flags, kjit_kernel** out,
                                           kjit_binary** log_out) {
  return guard([&] {
    if (log_out) *log_out = nullptr;
    if (out) *out = nullptr;
    if (!ok(compiler)) {
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_kernel_create: invalid compiler handle");
    }
    if (opts && !ok(opts)) {
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_kernel_create: invalid options handle");
    }
    if (!source) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_create: source is NULL");
    if (!name || !*name) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_create: name is NULL or empty");
    }
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_create: out is NULL");
    if (device < 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_create: device " + std::to_string(device) + " is negative");
    }
    if (flags & ~kKnownFlags) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_create: unknown flags " + std::to_string(flags & ~kKnownFlags));
    }
    kjit::KernelCreation made = kjit::Kernel::create(*compiler->compiler, source, name,
                                                     opts ? &opts->opts : nullptr, device, flags);
    if (!made.kernel) {
      if (log_out) *log_out = kjit::api::make_binary(made.failure);
      return error(made.failure.status, made.failure.message);
    }
    auto h = std::make_unique<kjit_kernel>();
    h->kernel = std::move(made.kernel);
    *out = h.release();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_from_binary(const kjit_binary* binary, const char* name,
                                                int device, unsigned flags, kjit_kernel** out) {
  return guard([&] {
    if (out) *out = nullptr;
    if (!ok(binary)) {
      return error(KJIT_ERROR_INVALID_HANDLE, "kjit_kernel_from_binary: invalid binary handle");
    }
    if (binary->status != KJIT_OK || !binary->entry) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_from_binary: the binary holds a failed compile (no code)");
    }
    if (!name || !*name) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_from_binary: name is NULL or empty");
    }
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_from_binary: out is NULL");
    if (device < 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_from_binary: device " + std::to_string(device) + " is negative");
    }
    if (flags & ~kKnownFlags) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_from_binary: unknown flags " +
                                                    std::to_string(flags & ~kKnownFlags));
    }
    auto h = std::make_unique<kjit_kernel>();
    h->kernel = kjit::Kernel::from_entry(binary->entry, name, device, flags);
    *out = h.release();
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_kernel_destroy(kjit_kernel* kernel) {
  if (!ok(kernel)) return;
  delete kernel;
}

KJIT_EXPORT int kjit_kernel_load_path(const kjit_kernel* kernel) {
  if (!ok(kernel)) return -1;
  return static_cast<int>(kernel->kernel->load_path());
}

KJIT_EXPORT const char* kjit_kernel_symbol(const kjit_kernel* kernel) {
  if (!ok(kernel)) return nullptr;
  return kernel->kernel->symbol().c_str();
}

KJIT_EXPORT kjit_status kjit_kernel_param_count(const kjit_kernel* kernel, size_t* count) {
  return guard([&] {
    if (!ok(kernel)) return bad_kernel();
    if (!count) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_param_count: count is NULL");
    *count = kernel->kernel->param_count();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_param_info(const kjit_kernel* kernel, size_t index,
                                               size_t* offset, size_t* size) {
  return guard([&] {
    if (!ok(kernel)) return bad_kernel();
    if (!offset || !size) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_param_info: offset or size is NULL");
    }
    const kjit::ParamInfo p = kernel->kernel->param(index);
    *offset = p.offset;
    *size = p.size;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_param_buffer_size(const kjit_kernel* kernel, size_t* size) {
  return guard([&] {
    if (!ok(kernel)) return bad_kernel();
    if (!size) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_param_buffer_size: size is NULL");
    }
    *size = kernel->kernel->param_buffer_size();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_get_attributes(const kjit_kernel* kernel,
                                                   kjit_kernel_attributes* attrs) {
  return guard([&] {
    size_t size = 0;
    if (kjit_status s = kjit::api::check_out(attrs, &size, "kjit_kernel_get_attributes: attrs"))
      return s;
    if (!ok(kernel)) return bad_kernel();
    // Attributes are read-only queries; the handle is const to callers.
    const kjit::KernelAttributes a = const_cast<kjit_kernel*>(kernel)->kernel->attributes();
    kjit::api::write_out(attrs, size, to_public(a));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_set_max_dynamic_shared(kjit_kernel* kernel, int bytes) {
  return guard([&] {
    if (!ok(kernel)) return bad_kernel();
    if (bytes < 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_set_max_dynamic_shared: bytes " +
                                                    std::to_string(bytes) + " is negative");
    }
    kernel->kernel->set_max_dynamic_shared(bytes);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_occupancy(const kjit_kernel* kernel, int block_size,
                                              size_t dynamic_shared, int* blocks_per_sm) {
  return guard([&] {
    if (!ok(kernel)) return bad_kernel();
    if (!blocks_per_sm) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_occupancy: blocks_per_sm is NULL");
    }
    if (block_size <= 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_kernel_occupancy: block_size " +
                                                    std::to_string(block_size) + " must be > 0");
    }
    *blocks_per_sm =
        const_cast<kjit_kernel*>(kernel)->kernel->occupancy(block_size, dynamic_shared);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_suggest_block_size(const kjit_kernel* kernel,
                                                       size_t dynamic_shared, int* min_grid,
                                                       int* block_size) {
  return guard([&] {
    if (!ok(kernel)) return bad_kernel();
    if (!min_grid || !block_size) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_suggest_block_size: min_grid or block_size is NULL");
    }
    const_cast<kjit_kernel*>(kernel)->kernel->suggest_block_size(dynamic_shared, min_grid,
                                                                 block_size);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_attributes_init_sized(kjit_kernel_attributes* attrs,
                                                          size_t size) {
  return guard(
      [&] { return kjit::api::init_sized(attrs, size, "kjit_kernel_attributes_init_sized"); });
}

KJIT_EXPORT kjit_status kjit_launch_config_init_sized(kjit_launch_config* cfg, size_t size) {
  return guard([&] { return kjit::api::init_sized(cfg, size, "kjit_launch_config_init_sized"); });
}

// The 0.1.0 entry point (the header's macro of the same name calls the sized one).
KJIT_EXPORT void(kjit_launch_config_init)(kjit_launch_config* cfg) {
  kjit::api::init_v0_1(cfg);
}

// Launch configs are checked before the handle, so that their validation does not depend
// on a loaded kernel (or a GPU).
KJIT_EXPORT kjit_status kjit_kernel_launch(kjit_kernel* kernel, const kjit_launch_config* cfg,
                                           void** args, size_t count) {
  return guard([&] {
    kjit_launch_config c;
    if (kjit_status s = read_in(cfg, &c, "kjit_kernel_launch: cfg")) return s;
    if (!ok(kernel)) return bad_kernel();
    if (!args && count) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_launch: args is NULL with count " + std::to_string(count));
    }
    kernel->kernel->launch(c, args, count);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_launch_sized(kjit_kernel* kernel, const kjit_launch_config* cfg,
                                                 void** args, const size_t* sizes, size_t count) {
  return guard([&] {
    kjit_launch_config c;
    if (kjit_status s = read_in(cfg, &c, "kjit_kernel_launch_sized: cfg")) return s;
    if (!ok(kernel)) return bad_kernel();
    if ((!args || !sizes) && count) {
      return error(
          KJIT_ERROR_INVALID_ARGUMENT,
          "kjit_kernel_launch_sized: args or sizes is NULL with count " + std::to_string(count));
    }
    kernel->kernel->launch_sized(c, args, sizes, count);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_launch_packed(kjit_kernel* kernel,
                                                  const kjit_launch_config* cfg, const void* buffer,
                                                  size_t size) {
  return guard([&] {
    kjit_launch_config c;
    if (kjit_status s = read_in(cfg, &c, "kjit_kernel_launch_packed: cfg")) return s;
    if (!ok(kernel)) return bad_kernel();
    if (!buffer && size) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_launch_packed: buffer is NULL with size " + std::to_string(size));
    }
    kernel->kernel->launch_packed(c, buffer, size);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_kernel_launch_params(kjit_kernel* kernel,
                                                  const kjit_launch_config* cfg, const void* params,
                                                  size_t size, size_t align) {
  return guard([&] {
    kjit_launch_config c;
    if (kjit_status s = read_in(cfg, &c, "kjit_kernel_launch_params: cfg")) return s;
    if (!ok(kernel)) return bad_kernel();
    if (!params || size == 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_launch_params: params must point at the struct and size be its "
                   "size (params " +
                       std::string(params ? "set" : "NULL") + ", size " + std::to_string(size) +
                       ")");
    }
    if ((align & (align - 1)) != 0 || size % (align ? align : 1) != 0) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   "kjit_kernel_launch_params: align " + std::to_string(align) +
                       " must be 0 or a power of two that divides size " + std::to_string(size) +
                       " (pass alignof the struct)");
    }
    kernel->kernel->launch_params(c, params, size, align);
    return KJIT_OK;
  });
}

}  // extern "C"
