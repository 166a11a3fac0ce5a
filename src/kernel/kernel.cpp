#include "kernel/kernel.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cuda/context.h"
#include "key/toolchain.h"
#include "store/code_facts.h"
#include "util/error.h"
#include "util/log.h"
#include "util/text.h"

namespace kjit {
namespace {

// Parameter layouts learned from the driver, by entry key, symbol and load path.
struct ParamMemo {
  std::mutex mu;
  std::unordered_map<std::string, std::vector<ParamInfo>> layouts;
};
constexpr size_t kParamMemoLimit = 4096;  // layouts kept before the memo starts again

ParamMemo& param_memo() {
  static ParamMemo* m = new ParamMemo;  // never destroyed: kernels may load during exit
  return *m;
}

bool looks_like_expression(const std::string& name) {
  return name.find('<') != std::string::npos || name.find("::") != std::string::npos ||
         (!name.empty() && name[0] == '&');
}

bool is_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Symbol of `name` in `e`: the lowered name of a name expression, or a kernel name as is.
// Empty when the entry does not know the name.
std::string find_symbol(const Entry& e, const std::string& name) {
  for (const auto& [expr, lowered] : e.names) {
    if (expr == name) return lowered;
  }
  for (const std::string& k : e.kernels) {
    if (k == name) return k;
  }
  return "";
}

[[noreturn]] void name_not_found(const Entry& e, const std::string& name) {
  std::string list;
  for (const std::string& k : e.kernels) list += (list.empty() ? "" : ", ") + k;
  std::string msg = "kernel '" + name + "' is not in the program";
  msg += list.empty() ? " (it has no __global__ functions)" : " (its kernels: " + list + ")";
  if (looks_like_expression(name)) {
    msg +=
        "; a name expression must be added with kjit_options_add_name_expression() "
        "before compiling";
  }
  fail(KJIT_ERROR_NAME_NOT_FOUND, msg);
}

Outcome compile_one(Compiler& compiler, const std::string& source, const CompileOptions& o) {
  try {
    return compiler.compile(source, o);
  } catch (const Error& e) {
    if (e.status() != KJIT_ERROR_UNSUPPORTED_TARGET) throw;
    Outcome out;
    out.status = e.status();
    out.message = e.message();
    return out;
  }
}

std::string dims(const uint32_t d[3]) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

constexpr size_t kInlineParams = 64;

// Dynamic shared memory a function may use without raising its
// MAX_DYNAMIC_SHARED_SIZE_BYTES attribute (the driver's default, on every architecture).
constexpr uint32_t kDefaultDynamicShared = 48 * 1024;

}  // namespace

// ---- creation ---------------------------------------------------------------------------

KernelCreation Kernel::create(Compiler& compiler, const std::string& source,
                              const std::string& name, const CompileOptions* opts, int device,
                              unsigned flags) {
  const int cc = cuda::compute_capability(device);
  const std::string arch = "sm_" + std::to_string(cc);

  CompileOptions o = opts ? *opts : CompileOptions();
  o.device = device;
  // The target is the device's exact architecture; an explicit sm_XYa / sm_XYf for that
  // architecture is kept. -arch options are folded into the target.
  std::string requested = o.target;
  std::vector<std::string> raw;
  for (const std::string& option : o.raw) {
    const std::string t = trim(option);
    if (starts_with(t, "-arch=")) {
      requested = t.substr(6);
    } else if (starts_with(t, "--gpu-architecture=")) {
      requested = t.substr(19);
    } else {
      raw.push_back(option);
    }
  }
  o.raw = std::move(raw);
  o.target = (requested == arch + "a" || requested == arch + "f") ? requested : arch;
  if ((flags & KJIT_KERNEL_FORCE_PTX) && o.outputs != 0) o.outputs |= KJIT_OUTPUT_PTX;
  if (looks_like_expression(name)) o.add_name_expression(name);

  Outcome out = compile_one(compiler, source, o);
  if (out.status == KJIT_ERROR_UNSUPPORTED_TARGET) {
    // This NVRTC predates the GPU: compile PTX for the newest architecture it knows below
    // the device's and let the driver JIT it.
    const ToolchainFacts& nvrtc = toolchain_facts(facts_of(compiler.cache()));
    int best = 0;
    for (int a = cc; a >= 50 && best == 0; --a) {
      if (arch_supported(nvrtc, a)) best = a;
    }
    if (best == 0) fail(out.status, out.message);
    log_warn("NVRTC cannot target " + arch + "; loading PTX for compute_" + std::to_string(best) +
             " through the driver JIT instead");
    o.target = "compute_" + std::to_string(best);
    o.outputs = KJIT_OUTPUT_PTX;
    out = compile_one(compiler, source, o);
  }
  KernelCreation result;
  if (out.status == KJIT_ERROR_COMPILE || (out.status == KJIT_ERROR_NAME_NOT_FOUND && out.entry)) {
    result.failure = std::move(out);
    return result;
  }
  if (out.status != KJIT_OK) fail(out.status, out.message);
  if (!out.entry) fail(KJIT_ERROR_INTERNAL, "compile succeeded without a result");

  if (find_symbol(*out.entry, name).empty() && !looks_like_expression(name) &&
      is_identifier(name) && !out.entry->kernels.empty()) {
    // A plain name of a kernel with C++ linkage: NVRTC lowers it as a name expression.
    const EntryPtr first = out.entry;
    o.add_name_expression(name);
    Outcome again = compile_one(compiler, source, o);
    if (again.status != KJIT_OK || !again.entry || find_symbol(*again.entry, name).empty()) {
      name_not_found(*first, name);
    }
    out = std::move(again);
  }
  result.kernel = from_entry(out.entry, name, device, flags);
  return result;
}

std::unique_ptr<Kernel> Kernel::from_entry(const EntryPtr& entry, const std::string& name,
                                           int device, unsigned flags) {
  if (!entry) fail(KJIT_ERROR_INVALID_ARGUMENT, "no compiled result");
  if (entry->cubin.empty() && entry->ptx.empty()) {
    fail(KJIT_ERROR_UNSUPPORTED, "the compiled result (target " + entry->target +
                                     ") has neither CUBIN nor PTX; LTO-IR cannot be loaded "
                                     "as a kernel");
  }
  cuda::device_handle(device);  // driver and device checks first
  std::string symbol = find_symbol(*entry, name);
  if (symbol.empty()) {
    // Without a PTX the kernel list may be empty: let the driver look the name up.
    if (!entry->kernels.empty()) name_not_found(*entry, name);
    symbol = name;
  }
  std::unique_ptr<Kernel> k(new Kernel(entry, std::move(symbol), device, flags));
  std::unique_ptr<Loaded> l = k->load_now(true);
  k->current_.store(l.get(), std::memory_order_release);
  k->loads_.push_back(std::move(l));
  return k;
}

Kernel::Kernel(EntryPtr entry, std::string symbol, int device, unsigned flags)
    : drv_(&cuda::driver()),
      entry_(std::move(entry)),
      symbol_(std::move(symbol)),
      device_(device),
      flags_(flags) {}

Kernel::~Kernel() {
  current_.store(nullptr, std::memory_order_release);
  loads_.clear();  // releases the modules (unloaded with their last user)
}

std::vector<ParamInfo> Kernel::param_layout(CUfunction fn) const {
  // The layout belongs to the function in the image: the same entry (its key covers the
  // bytes), symbol and load path give the same layout on every device and context. Asking
  // the driver ends with a query past the last parameter, which alone costs about a
  // microsecond (an error return), so a kernel loaded again (another device, a reload)
  // reuses what the first load learned.
  const std::string memo_key =
      entry_->key.empty()
          ? std::string()
          : entry_->key + '\n' + symbol_ + '\n' + (path_ == LoadPath::Cubin ? "cubin" : "ptx");
  ParamMemo& memo = param_memo();
  if (!memo_key.empty()) {
    std::lock_guard<std::mutex> lock(memo.mu);
    auto it = memo.layouts.find(memo_key);
    if (it != memo.layouts.end()) return it->second;
  }
  if (!drv_->cuFuncGetParamInfo) {
    fail(KJIT_ERROR_UNSUPPORTED,
         "CUDA driver " + std::to_string(drv_->version) +
             " lacks cuFuncGetParamInfo (CUDA 12.4 or newer), which kjit needs to check "
             "launch arguments");
  }
  std::vector<ParamInfo> params;
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    CUresult pr = drv_->cuFuncGetParamInfo(fn, i, &offset, &size);
    if (pr == CUDA_ERROR_INVALID_VALUE && i == 0) {
      // Make sure a lazily loaded function is really loaded before concluding that it
      // takes no parameters.
      int regs = 0;
      cuda::check(drv_->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn),
                  "cuFuncGetAttribute(NUM_REGS)");
      pr = drv_->cuFuncGetParamInfo(fn, i, &offset, &size);
    }
    if (pr == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    cuda::check(pr, "cuFuncGetParamInfo");
    params.push_back(ParamInfo{offset, size});
  }
  if (!memo_key.empty()) {
    std::lock_guard<std::mutex> lock(memo.mu);
    if (memo.layouts.size() >= kParamMemoLimit) memo.layouts.clear();
    memo.layouts.emplace(memo_key, params);
  }
  return params;
}

std::unique_ptr<Kernel::Loaded> Kernel::load_now(bool first) {
  // A reload must not follow whatever context the reloading thread has current: code
  // that lived in the primary context goes back there (the caller's memory is there).
  const cuda::ContextChoice c =
      !first && primary_ ? cuda::primary_choice(device_) : cuda::choose_context(device_);
  // One switch to the kernel's context for the load, the function and its parameters (a
  // context of another device costs a push and a pop each time).
  cuda::ScopedContext scope(c.ctx);
  ModulePtr module;
  if (first) {
    const bool want_ptx = (flags_ & KJIT_KERNEL_FORCE_PTX) != 0 || entry_->cubin.empty();
    if (want_ptx && entry_->ptx.empty()) {
      fail(KJIT_ERROR_UNSUPPORTED,
           "KJIT_KERNEL_FORCE_PTX: the compiled result has no PTX (target " + entry_->target + ")");
    }
    if (!want_ptx) {
      try {
        module = acquire_module(c, entry_, LoadPath::Cubin);
        path_ = LoadPath::Cubin;
      } catch (const Error& e) {
        // A CUBIN the driver rejects (another architecture, too new a format): use the
        // PTX beside it. Sticky errors and missing drivers are not retried.
        if (e.status() != KJIT_ERROR_CUDA || entry_->ptx.empty()) throw;
        log_warn("kernel '" + symbol_ + "': " + e.message() + "; loading PTX instead");
      }
    }
    if (!module) {
      module = acquire_module(c, entry_, LoadPath::Ptx);
      path_ = LoadPath::Ptx;
    }
  } else {
    module = acquire_module(c, entry_, path_);
  }

  CUfunction fn = nullptr;
  const CUresult r = drv_->cuModuleGetFunction(&fn, module->handle(), symbol_.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    fail(KJIT_ERROR_NAME_NOT_FOUND, "kernel '" + symbol_ + "' is not in the loaded module");
  }
  cuda::check(r, "cuModuleGetFunction");

  if (first) {
    params_ = param_layout(fn);
    for (const ParamInfo& p : params_) param_bytes_ = std::max(param_bytes_, p.offset + p.size);
  }
  const int shared = max_dynamic_shared_.load(std::memory_order_relaxed);
  if (shared >= 0) {
    cuda::check(
        drv_->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  }
  primary_ = primary_ || c.primary;
  auto l = std::make_unique<Loaded>();
  l->ctx = c.ctx;
  l->ctx_id = c.id;
  l->fn = fn;
  l->module = std::move(module);
  if (shared > 0) l->shared_allowed.store(static_cast<uint32_t>(shared), std::memory_order_relaxed);
  return l;
}

const Kernel::Loaded& Kernel::reload(const Loaded* seen) {
  std::lock_guard<std::mutex> lock(mu_);
  const Loaded* cur = current_.load(std::memory_order_acquire);
  unsigned long long id = 0;
  if (cur != seen && cuda::context_id(cur->ctx, &id) && id == cur->ctx_id) return *cur;
  if (flags_ & KJIT_KERNEL_NO_RELOAD) {
    fail(KJIT_ERROR_STALE_HANDLE, "kernel '" + symbol_ +
                                      "': the CUDA context it was loaded into (id " +
                                      std::to_string(cur->ctx_id) +
                                      ") was reset or destroyed, and the handle was created with "
                                      "KJIT_KERNEL_NO_RELOAD");
  }
  std::unique_ptr<Loaded> fresh_load = load_now(false);
  const Loaded* next = fresh_load.get();
  // Earlier loads stay allocated (other threads may still be reading them) but give up
  // their modules; their context is gone, and the driver freed the code with it.
  for (auto& old : loads_) old->module.reset();
  loads_.push_back(std::move(fresh_load));
  current_.store(next, std::memory_order_release);
  reloads_.fetch_add(1, std::memory_order_relaxed);
  log_info("kernel '" + symbol_ + "' reloaded into context " + std::to_string(next->ctx_id) +
           " (context " + std::to_string(cur->ctx_id) + " is gone)");
  return *next;
}

unsigned long long Kernel::context_id() const {
  const Loaded* l = current_.load(std::memory_order_acquire);
  return l ? l->ctx_id : 0;
}

CUcontext Kernel::context() const {
  const Loaded* l = current_.load(std::memory_order_acquire);
  return l ? l->ctx : nullptr;
}

// ---- queries ----------------------------------------------------------------------------

ParamInfo Kernel::param(size_t index) const {
  if (index >= params_.size()) {
    fail(KJIT_ERROR_INVALID_ARGUMENT, "parameter index " + std::to_string(index) +
                                          " is out of range: kernel '" + symbol_ + "' has " +
                                          std::to_string(params_.size()) + " parameters");
  }
  return params_[index];
}

KernelAttributes Kernel::attributes() {
  const Loaded& l = fresh();
  cuda::ScopedContext scope(l.ctx);
  auto get = [&](CUfunction_attribute a, const char* what) {
    int v = 0;
    cuda::check(drv_->cuFuncGetAttribute(&v, a, l.fn), what);
    return v;
  };
  KernelAttributes a;
  a.num_regs = get(CU_FUNC_ATTRIBUTE_NUM_REGS, "cuFuncGetAttribute(NUM_REGS)");
  a.static_shared_bytes =
      get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
  a.const_bytes = get(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "cuFuncGetAttribute(CONST_SIZE_BYTES)");
  a.local_bytes = get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "cuFuncGetAttribute(LOCAL_SIZE_BYTES)");
  a.max_threads_per_block =
      get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)");
  a.max_dynamic_shared_bytes = get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   "cuFuncGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  a.ptx_version = get(CU_FUNC_ATTRIBUTE_PTX_VERSION, "cuFuncGetAttribute(PTX_VERSION)");
  a.binary_version = get(CU_FUNC_ATTRIBUTE_BINARY_VERSION, "cuFuncGetAttribute(BINARY_VERSION)");
  return a;
}

void Kernel::set_max_dynamic_shared(int bytes) {
  if (bytes < 0) fail(KJIT_ERROR_INVALID_ARGUMENT, "dynamic shared memory bytes must be >= 0");
  const Loaded& l = fresh();
  cuda::ScopedContext scope(l.ctx);
  cuda::check(
      drv_->cuFuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      ("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " + std::to_string(bytes) +
       ") for kernel '" + symbol_ + "'")
          .c_str());
  max_dynamic_shared_.store(bytes, std::memory_order_relaxed);  // re-applied on reload
  l.shared_allowed.store(static_cast<uint32_t>(bytes), std::memory_order_release);
}

size_t Kernel::param_align(size_t index) {
  std::call_once(ptx_params_once_, [this] {
    std::vector<PtxParam> ptx;
    if (entry_->ptx.empty() ||
        !ptx_entry_params(std::string_view(entry_->ptx.data(), entry_->ptx.size()), symbol_,
                          &ptx) ||
        ptx.size() != params_.size()) {
      return;
    }
    for (size_t i = 0; i < ptx.size(); ++i) {
      if (ptx[i].size != params_[i].size) return;  // not the code the driver loaded
    }
    for (const PtxParam& p : ptx) ptx_param_align_.push_back(p.align);
  });
  return index < ptx_param_align_.size() ? ptx_param_align_[index] : 0;
}

int Kernel::occupancy(int block_size, size_t dynamic_shared) {
  if (block_size <= 0) fail(KJIT_ERROR_INVALID_ARGUMENT, "block size must be > 0");
  const Loaded& l = fresh();
  cuda::ScopedContext scope(l.ctx);
  int blocks = 0;
  cuda::check(
      drv_->cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, l.fn, block_size, dynamic_shared),
      "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks;
}

int Kernel::max_active_clusters(unsigned cluster_x, int block_size, size_t dynamic_shared) {
  if (block_size <= 0 || cluster_x == 0)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "block size and cluster size must be > 0");
  if (!drv_->cuOccupancyMaxActiveClusters) return 0;
  const Loaded& l = fresh();
  cuda::ScopedContext scope(l.ctx);
  CUlaunchAttribute attr = {};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = cluster_x;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig c = {};
  c.gridDimX = cluster_x;
  c.gridDimY = c.gridDimZ = 1;
  c.blockDimX = unsigned(block_size);
  c.blockDimY = c.blockDimZ = 1;
  c.sharedMemBytes = unsigned(dynamic_shared);
  c.attrs = &attr;
  c.numAttrs = 1;
  int clusters = 0;
  cuda::check(drv_->cuOccupancyMaxActiveClusters(&clusters, l.fn, &c),
              "cuOccupancyMaxActiveClusters");
  return clusters;
}

void Kernel::suggest_block_size(size_t dynamic_shared, int* min_grid, int* block_size) {
  const Loaded& l = fresh();
  cuda::ScopedContext scope(l.ctx);
  int grid = 0, block = 0;
  cuda::check(
      drv_->cuOccupancyMaxPotentialBlockSize(&grid, &block, l.fn, nullptr, dynamic_shared, 0),
      "cuOccupancyMaxPotentialBlockSize");
  *min_grid = grid;
  *block_size = block;
}

// ---- launch -----------------------------------------------------------------------------

void Kernel::check_config(const kjit_launch_config& cfg) const {
  if ((cfg.grid[0] == 0) | (cfg.grid[1] == 0) | (cfg.grid[2] == 0) | (cfg.block[0] == 0) |
      (cfg.block[1] == 0) | (cfg.block[2] == 0)) {
    fail(KJIT_ERROR_INVALID_ARGUMENT, "launch of kernel '" + symbol_ + "': grid " + dims(cfg.grid) +
                                          " and block " + dims(cfg.block) +
                                          " must have every dimension >= 1");
  }
}

CUresult Kernel::enqueue(const Loaded& l, const kjit_launch_config& cfg, void** params,
                         void** extra) const {
  const bool cluster = (cfg.cluster[0] | cfg.cluster[1] | cfg.cluster[2]) != 0;
  const bool cooperative = cfg.cooperative != 0;
  CUstream stream = static_cast<CUstream>(cfg.stream);
  if (!cluster && !cooperative) {
    return drv_->cuLaunchKernel(l.fn, cfg.grid[0], cfg.grid[1], cfg.grid[2], cfg.block[0],
                                cfg.block[1], cfg.block[2], cfg.shared_bytes, stream, params,
                                extra);
  }
  CUlaunchAttribute attrs[2] = {};
  unsigned n = 0;
  if (cluster) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = cfg.cluster[0] ? cfg.cluster[0] : 1;
    attrs[n].value.clusterDim.y = cfg.cluster[1] ? cfg.cluster[1] : 1;
    attrs[n].value.clusterDim.z = cfg.cluster[2] ? cfg.cluster[2] : 1;
    ++n;
  }
  if (cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n].value.cooperative = 1;
    ++n;
  }
  CUlaunchConfig c = {};
  c.gridDimX = cfg.grid[0];
  c.gridDimY = cfg.grid[1];
  c.gridDimZ = cfg.grid[2];
  c.blockDimX = cfg.block[0];
  c.blockDimY = cfg.block[1];
  c.blockDimZ = cfg.block[2];
  c.sharedMemBytes = cfg.shared_bytes;
  c.hStream = stream;
  c.attrs = attrs;
  c.numAttrs = n;
  return drv_->cuLaunchKernelEx(&c, l.fn, params, extra);
}

void Kernel::launch_checked(const kjit_launch_config& cfg, void** params, void** extra) {
  // The usual case in one driver call: the caller's current context is the one this
  // kernel is loaded into. Context ids are unique for the life of the process, so an
  // equal id is that very context, alive (never one reset or destroyed and made anew).
  const Loaded* l = current_.load(std::memory_order_acquire);
  unsigned long long current_id = 0;
  bool in_own = drv_->cuCtxGetId(nullptr, &current_id) == CUDA_SUCCESS && current_id == l->ctx_id;
  if (!in_own) {
    l = &fresh();  // reloaded first if its context is gone
    CUcontext current = nullptr;
    drv_->cuCtxGetCurrent(&current);
    in_own = current == l->ctx;
  }
  // More dynamic shared memory than a function allows by default: its limit is raised
  // first, once per function and context (one comparison on every other launch).
  if (cfg.shared_bytes > kDefaultDynamicShared &&
      cfg.shared_bytes > l->shared_allowed.load(std::memory_order_acquire)) {
    allow_shared(*l, cfg);
  }
  CUresult r;
  if (in_own) {
    r = enqueue(*l, cfg, params, extra);
  } else {
    // The kernel launches in its own context; the caller's is restored afterwards.
    const CUresult pr = drv_->cuCtxPushCurrent(l->ctx);
    if (pr != CUDA_SUCCESS) cuda::throw_error(pr, "cuCtxPushCurrent before launch");
    r = enqueue(*l, cfg, params, extra);
    CUcontext popped = nullptr;
    drv_->cuCtxPopCurrent(&popped);
  }
  if (r != CUDA_SUCCESS) launch_failed(r, cfg, l->ctx);
}

void Kernel::allow_shared(const Loaded& l, const kjit_launch_config& cfg) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t bytes = cfg.shared_bytes;
  if (bytes <= l.shared_allowed.load(std::memory_order_acquire)) return;  // another thread did
  cuda::ScopedContext scope(l.ctx);
  const CUresult r = drv_->cuFuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              static_cast<int>(bytes));
  if (r != CUDA_SUCCESS) {
    std::string what = "launch of kernel '" + symbol_ + "' with " + std::to_string(bytes) +
                       " bytes of dynamic shared memory";
    if (cuda::is_sticky(r)) cuda::throw_error(r, what);
    int optin = 0, static_bytes = 0;
    const bool known =
        drv_->cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                   cuda::device_handle(device_)) == CUDA_SUCCESS &&
        drv_->cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, l.fn) ==
            CUDA_SUCCESS;
    if (known) {
      what += ": device " + std::to_string(device_) + " allows at most " + std::to_string(optin) +
              " bytes of shared memory per block, and the kernel's static shared memory takes " +
              std::to_string(static_bytes) + " of them";
    }
    fail(KJIT_ERROR_CUDA, what + " (raising its limit, cuFuncSetAttribute(" +
                              "MAX_DYNAMIC_SHARED_SIZE_BYTES), failed: " + cuda::error_text(r) +
                              ")");
  }
  l.shared_allowed.store(bytes, std::memory_order_release);
  if (static_cast<int>(bytes) > max_dynamic_shared_.load(std::memory_order_relaxed)) {
    max_dynamic_shared_.store(static_cast<int>(bytes), std::memory_order_relaxed);  // reloads
  }
}

void Kernel::launch_failed(CUresult r, const kjit_launch_config& cfg, CUcontext ctx) const {
  std::string what = "launch of kernel '" + symbol_ + "' (grid " + dims(cfg.grid) + ", block " +
                     dims(cfg.block) + ", " + std::to_string(cfg.shared_bytes) +
                     " bytes dynamic shared memory";
  if ((cfg.cluster[0] | cfg.cluster[1] | cfg.cluster[2]) != 0) {
    const uint32_t cluster[3] = {cfg.cluster[0] ? cfg.cluster[0] : 1,
                                 cfg.cluster[1] ? cfg.cluster[1] : 1,
                                 cfg.cluster[2] ? cfg.cluster[2] : 1};
    what += ", cluster " + dims(cluster);
  }
  if (cfg.cooperative) what += ", cooperative";
  what += ")";
  // A stream of another context (another device, say) is the driver's to refuse; say
  // whose stream it was, since its error name alone does not.
  CUstream stream = static_cast<CUstream>(cfg.stream);
  CUcontext stream_ctx = nullptr;
  if (!cuda::is_sticky(r) && stream && stream != CU_STREAM_LEGACY &&
      stream != CU_STREAM_PER_THREAD && drv_->cuStreamGetCtx(stream, &stream_ctx) == CUDA_SUCCESS &&
      stream_ctx != ctx) {
    fail(KJIT_ERROR_CUDA, what + " failed: " + cuda::error_text(r) + "; the stream belongs to " +
                              cuda::describe_context(stream_ctx) +
                              " but the kernel is loaded "
                              "into " +
                              cuda::describe_context(ctx) +
                              ": launch it on a stream of that context");
  }
  cuda::throw_error(r, what);
}

void Kernel::launch(const kjit_launch_config& cfg, void** args, size_t count) {
  check_config(cfg);
  if (count != params_.size()) {
    fail(KJIT_ERROR_ARGUMENT_MISMATCH, "kernel '" + symbol_ + "' takes " +
                                           std::to_string(params_.size()) + " arguments, " +
                                           std::to_string(count) + " given");
  }
  for (size_t i = 0; i < count; ++i) {
    if (!args[i]) {
      fail(KJIT_ERROR_INVALID_ARGUMENT, "argument " + std::to_string(i) + " of kernel '" + symbol_ +
                                            "' is a NULL pointer (args[i] must "
                                            "point at the value)");
    }
  }
  launch_checked(cfg, count ? args : nullptr, nullptr);
}

void Kernel::launch_sized(const kjit_launch_config& cfg, void** args, const size_t* sizes,
                          size_t count) {
  if (count == params_.size()) {
    for (size_t i = 0; i < count; ++i) {
      if (sizes[i] != params_[i].size) {
        fail(KJIT_ERROR_ARGUMENT_MISMATCH,
             "argument " + std::to_string(i) + " of kernel '" + symbol_ + "': expected " +
                 std::to_string(params_[i].size) + " bytes, given " + std::to_string(sizes[i]));
      }
    }
  }
  launch(cfg, args, count);
}

void Kernel::launch_packed(const kjit_launch_config& cfg, const void* buffer, size_t size) {
  check_config(cfg);
  if (size != param_bytes_) {
    fail(KJIT_ERROR_ARGUMENT_MISMATCH,
         "packed argument buffer of kernel '" + symbol_ + "': expected " +
             std::to_string(param_bytes_) + " bytes (" + std::to_string(params_.size()) +
             " parameters laid out by kjit_kernel_param_info), given " + std::to_string(size));
  }
  const size_t n = params_.size();
  if (n == 0) {
    launch_checked(cfg, nullptr, nullptr);
    return;
  }
  // Point at each parameter inside the buffer: the same kernelParams path as the other
  // forms (valid with every launch attribute), and the driver copies the values.
  unsigned char* base = static_cast<unsigned char*>(const_cast<void*>(buffer));
  void* inline_ptrs[kInlineParams];
  std::vector<void*> many;  // only for kernels with very many parameters
  void** ptrs = inline_ptrs;
  if (n > kInlineParams) {
    many.resize(n);
    ptrs = many.data();
  }
  for (size_t i = 0; i < n; ++i) ptrs[i] = base + params_[i].offset;
  launch_checked(cfg, ptrs, nullptr);
}

void Kernel::launch_params(const kjit_launch_config& cfg, const void* params, size_t size,
                           size_t align) {
  check_config(cfg);
  if (params_.size() != 1) {
    fail(KJIT_ERROR_ARGUMENT_MISMATCH,
         "kernel '" + symbol_ + "' takes " + std::to_string(params_.size()) +
             " parameters; kjit_kernel_launch_params launches a kernel of exactly one (a struct "
             "passed by value): use kjit_kernel_launch_sized or kjit_kernel_launch_packed");
  }
  if (size != params_[0].size) {
    fail(KJIT_ERROR_ARGUMENT_MISMATCH,
         "the parameter of kernel '" + symbol_ + "' is " + std::to_string(params_[0].size) +
             " bytes, the struct given is " + std::to_string(size) +
             ": the host and the kernel do not lay the struct out alike (a member's type, size "
             "or alignment differs between the host compiler and NVRTC; with CUTLASS on CUDA "
             "13, CUtensorMap is aligned to 128 bytes on the host and CUTLASS's device-side "
             "stand-in to 64: docs/cutlass.md)");
  }
  if (align != 0) {
    const size_t declared = param_align(0);
    if (declared != 0 && declared != align) {
      fail(KJIT_ERROR_ARGUMENT_MISMATCH,
           "the parameter of kernel '" + symbol_ + "' is aligned to " + std::to_string(declared) +
               " bytes (its PTX), the struct given to " + std::to_string(align) +
               ": the host and the kernel do not lay the struct out alike (docs/cutlass.md)");
    }
  }
  void* ptrs[1] = {const_cast<void*>(params)};
  launch_checked(cfg, ptrs, nullptr);
}

}  // namespace kjit
