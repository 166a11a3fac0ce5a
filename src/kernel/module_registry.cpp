#include "kernel/module_registry.h"

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/driver.h"
#include "util/error.h"
#include "util/log.h"

namespace kjit {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<Module>> modules;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: modules may die during exit
  return *r;
}

std::string entry_identity(const Entry& e) {
  if (!e.key.empty()) return e.key;
  char buf[32];
  std::snprintf(buf, sizeof buf, "@%p", static_cast<const void*>(&e));
  return buf;
}

CUmodule load(const cuda::ContextChoice& c, const Entry& e, LoadPath path) {
  const cuda::Driver& d = cuda::driver();
  cuda::ScopedContext scope(c.ctx);
  CUmodule module = nullptr;
  if (path == LoadPath::Cubin) {
    if (e.cubin.empty()) fail(KJIT_ERROR_UNSUPPORTED, "the compiled result has no CUBIN");
    cuda::check(d.cuModuleLoadData(&module, e.cubin.data()), "cuModuleLoadData (CUBIN)");
    return module;
  }
  if (e.ptx.empty()) fail(KJIT_ERROR_UNSUPPORTED, "the compiled result has no PTX");
  char error_log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof error_log))};
  const CUresult r = d.cuModuleLoadDataEx(&module, e.ptx.c_str(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    std::string what = "cuModuleLoadDataEx (PTX JIT for target " + e.target + ")";
    error_log[sizeof error_log - 1] = '\0';
    if (error_log[0]) what += " [JIT log: " + std::string(error_log) + "]";
    cuda::throw_error(r, what);
  }
  return module;
}

}  // namespace

Module::Module(CUcontext ctx, unsigned long long ctx_id, CUmodule module, EntryPtr entry,
               std::string registry_key)
    : ctx_(ctx), ctx_id_(ctx_id), module_(module), entry_(std::move(entry)),
      key_(std::move(registry_key)) {}

Module::~Module() {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.modules.find(key_);
    // A replacement may already be registered under the same key; leave it.
    if (it != r.modules.end() && it->second.expired()) r.modules.erase(it);
  }
  // Unload only from a context that is still the one we loaded into: after a reset or
  // destroy the driver has already freed the module.
  unsigned long long id = 0;
  if (!cuda::context_id(ctx_, &id) || id != ctx_id_) return;
  try {
    const cuda::Driver& d = cuda::driver();
    cuda::ScopedContext scope(ctx_);
    const CUresult r = d.cuModuleUnload(module_);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) {
      log_warn("cuModuleUnload failed: " + cuda::error_text(r));
    }
  } catch (const std::exception& e) {
    log_warn(std::string("module unload skipped: ") + e.what());
  }
}

ModulePtr acquire_module(const cuda::ContextChoice& ctx, const EntryPtr& entry, LoadPath path) {
  const std::string key = std::to_string(ctx.id) + "/" + entry_identity(*entry) + "/" +
                          (path == LoadPath::Cubin ? "cubin" : "ptx");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.modules.find(key);
  if (it != r.modules.end()) {
    if (ModulePtr m = it->second.lock()) return m;
  }
  // Loading under the lock keeps one module per key; the driver serialises module loads
  // within a context anyway.
  CUmodule handle = load(ctx, *entry, path);
  auto m = std::make_shared<Module>(ctx.ctx, ctx.id, handle, entry, key);
  r.modules[key] = m;
  return m;
}

size_t loaded_module_count() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t n = 0;
  for (const auto& kv : r.modules) n += kv.second.expired() ? 0 : 1;
  return n;
}

}  // namespace kjit
