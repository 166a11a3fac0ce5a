// Loaded modules, shared by every kernel handle that needs the same code in the same
// context: one CUmodule per (context id, cache entry, load path), unloaded when the last
// reference goes.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "cuda/context.h"
#include "store/entry.h"

namespace kjit {

enum class LoadPath : int { Cubin = 0, Ptx = 1 };  // values of kjit_load_path

class Module {
 public:
  Module(CUcontext ctx, unsigned long long ctx_id, CUmodule module, EntryPtr entry,
         std::string registry_key);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  CUcontext context() const { return ctx_; }
  unsigned long long context_id() const { return ctx_id_; }
  CUmodule handle() const { return module_; }

 private:
  CUcontext ctx_;
  unsigned long long ctx_id_;
  CUmodule module_;
  EntryPtr entry_;  // keeps the entry (and so the registry key's identity) alive
  std::string key_;
};

using ModulePtr = std::shared_ptr<Module>;

// The module of `entry` loaded through `path` into `ctx`, loading it on first use.
// Throws kjit::Error: KJIT_ERROR_CUDA (with the driver's message, and the JIT log for
// PTX), KJIT_ERROR_UNSUPPORTED when the entry lacks the code for `path`.
ModulePtr acquire_module(const cuda::ContextChoice& ctx, const EntryPtr& entry, LoadPath path);

// Number of modules currently loaded through the registry (for tests).
size_t loaded_module_count();

}  // namespace kjit
