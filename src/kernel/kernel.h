// A loaded, launchable kernel: compile-or-hit, load (CUBIN, else PTX), parameter info,
// attributes, occupancy, and the launch path. Handles never launch a dangling function:
// each launch checks that the context the code was loaded into is still the same context
// (by id) and reloads from the kept CUBIN/PTX bytes when it is not.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "cuda/driver.h"
#include "kernel/module_registry.h"
#include "kjit/kernel.h"
#include "nvrtc/options.h"
#include "store/cache.h"

namespace kjit {

// cuFuncGetAttribute values (the C shim turns them into kjit_kernel_attributes).
struct KernelAttributes {
  int num_regs = 0;
  int static_shared_bytes = 0;
  int const_bytes = 0;
  int local_bytes = 0;
  int max_threads_per_block = 0;
  int max_dynamic_shared_bytes = 0;
  int ptx_version = 0;
  int binary_version = 0;
};

struct ParamInfo {
  size_t offset = 0;
  size_t size = 0;
};

class Kernel;

// What Kernel::create() gives back: a kernel, or (for a compile error, or a name expression
// that names nothing) the outcome holding the log. Every other failure is thrown as
// kjit::Error.
struct KernelCreation {
  std::unique_ptr<Kernel> kernel;
  Outcome failure;
};

class Kernel {
 public:
  // Compile `source` (or hit the cache) for the exact architecture of `device`, then load
  // `name`. A name that looks like a name expression ('<', "::" or a leading '&') is added
  // as one. Falls back to PTX for the newest architecture NVRTC knows when it cannot
  // target the device itself. `opts` may be null.
  static KernelCreation create(Compiler& compiler, const std::string& source,
                               const std::string& name, const CompileOptions* opts, int device,
                               unsigned flags);

  // Load `name` from a compiled entry onto `device`.
  static std::unique_ptr<Kernel> from_entry(const EntryPtr& entry, const std::string& name,
                                            int device, unsigned flags);

  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  LoadPath load_path() const { return path_; }
  const std::string& symbol() const { return symbol_; }
  int device() const { return device_; }
  size_t param_count() const { return params_.size(); }
  ParamInfo param(size_t index) const;  // throws KJIT_ERROR_INVALID_ARGUMENT
  size_t param_buffer_size() const { return param_bytes_; }

  KernelAttributes attributes();
  void set_max_dynamic_shared(int bytes);
  int occupancy(int block_size, size_t dynamic_shared);
  // Clusters of `cluster_x` x 1 x 1 blocks of `block_size` threads and `dynamic_shared`
  // bytes that the device can run at once (cuOccupancyMaxActiveClusters); 0 when the driver
  // lacks the query. Throws kjit::Error on a driver failure.
  int max_active_clusters(unsigned cluster_x, int block_size, size_t dynamic_shared);
  void suggest_block_size(size_t dynamic_shared, int* min_grid, int* block_size);

  // Launches. `cfg` is a full-size struct, as the C shim copies it (struct_size is not
  // looked at). Throw kjit::Error on failure (argument mismatch, stale handle with
  // KJIT_KERNEL_NO_RELOAD, driver errors). No allocation, lock or string work unless a
  // failure is reported or the context has to be reloaded.
  void launch(const kjit_launch_config& cfg, void** args, size_t count);
  void launch_sized(const kjit_launch_config& cfg, void** args, const size_t* sizes, size_t count);
  void launch_packed(const kjit_launch_config& cfg, const void* buffer, size_t size);
  // A kernel of one parameter (a struct by value, e.g. CUTLASS's Params): `size` must be
  // the parameter's size as the driver gives it and, where the PTX declares the parameter's
  // alignment and `align` is not 0, `align` must equal it.
  void launch_params(const kjit_launch_config& cfg, const void* params, size_t size, size_t align);

  // The alignment of parameter `index` as the kernel's PTX declares it; 0 when the compiled
  // result has no PTX or the declaration is not understood. Read from the PTX once.
  size_t param_align(size_t index);

  // For tests: the context id the code is currently loaded into, and how many times the
  // kernel was reloaded after its context went away.
  unsigned long long context_id() const;
  CUcontext context() const;
  unsigned reload_count() const { return reloads_.load(std::memory_order_relaxed); }

 private:
  struct Loaded {
    CUcontext ctx = nullptr;
    unsigned long long ctx_id = 0;
    CUfunction fn = nullptr;
    ModulePtr module;  // dropped when the load is retired
    // Dynamic shared memory this function in this context is known to allow beyond the
    // default (its MAX_DYNAMIC_SHARED_SIZE_BYTES as kjit set it); 0 = the default.
    mutable std::atomic<uint32_t> shared_allowed{0};
  };

  Kernel(EntryPtr entry, std::string symbol, int device, unsigned flags);

  // Loads into the context chosen by the context rule; the first load also picks the
  // load path and reads the parameter info. A reload of a kernel that lived in its
  // device's primary context goes back to the primary context, whatever is current.
  std::unique_ptr<Loaded> load_now(bool first);
  // The current load, reloaded first if its context is gone. Fast path: one driver call.
  const Loaded& fresh() {
    const Loaded* l = current_.load(std::memory_order_acquire);
    unsigned long long id = 0;
    if (drv_->cuCtxGetId(l->ctx, &id) != CUDA_SUCCESS || id != l->ctx_id) return reload(l);
    return *l;
  }
  const Loaded& reload(const Loaded* seen);
  void check_config(const kjit_launch_config& cfg) const;
  // Raises the function's MAX_DYNAMIC_SHARED_SIZE_BYTES to cfg.shared_bytes (the launch
  // asks for more than the default); once per function and context, under mu_.
  void allow_shared(const Loaded& l, const kjit_launch_config& cfg);
  CUresult enqueue(const Loaded& l, const kjit_launch_config& cfg, void** params,
                   void** extra) const;
  void launch_checked(const kjit_launch_config& cfg, void** params, void** extra);
  // The parameters of `fn` (this kernel's function, loaded by path_) as the driver gives
  // them, or as an earlier load of the same entry, symbol and path learned them.
  std::vector<ParamInfo> param_layout(CUfunction fn) const;
  [[noreturn]] void launch_failed(CUresult r, const kjit_launch_config& cfg, CUcontext ctx) const;

  const cuda::Driver* drv_;
  EntryPtr entry_;
  std::string symbol_;
  int device_;
  unsigned flags_;
  LoadPath path_ = LoadPath::Cubin;
  bool primary_ = false;  // loaded into the device's primary context (guarded by mu_)
  std::vector<ParamInfo> params_;
  size_t param_bytes_ = 0;
  std::atomic<const Loaded*> current_{nullptr};
  std::atomic<unsigned> reloads_{0};
  std::atomic<int> max_dynamic_shared_{-1};
  std::once_flag ptx_params_once_;
  std::vector<size_t> ptx_param_align_;         // from the PTX, filled once (param_align)
  std::mutex mu_;                               // reloads and attribute changes
  std::vector<std::unique_ptr<Loaded>> loads_;  // current and retired; freed on destroy
};

}  // namespace kjit
