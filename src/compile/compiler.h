// The compiler: NVRTC behind the cache, with a worker pool for async and batch compiles.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "compile/include_scan.h"
#include "compile/key_memo.h"
#include "compile/options.h"
#include "store/cache.h"

namespace kjit {

class ThreadPool;

// Cancellation flag checked by NVRTC's flow callback.
using CancelFlag = std::shared_ptr<std::atomic<bool>>;

class Compiler {
 public:
  Compiler(Cache* cache, unsigned threads);  // cache may be null
  ~Compiler();

  // Compile (or hit) one program. Returns OK with an entry, KJIT_ERROR_COMPILE with an
  // entry holding the log, or another failure status with a message. Throws kjit::Error
  // only for programming errors and allocation failure. A request seen before whose
  // include files stat the same is looked up by its remembered key (key_memo.h).
  Outcome compile(std::string_view source, const CompileOptions& opts,
                  const CancelFlag& cancel = nullptr);

  // The cache key of (source, opts), as compile() computes it.
  std::string key(const std::string& source, const CompileOptions& opts);

  // Run `job` on the worker pool (started on first use).
  void submit(std::function<void()> job);

  Cache* cache() const { return cache_; }

 private:
  // Discovers the toolkits `opts` needs through the cache's record of an earlier
  // discovery (toolkit.h), before normalise() asks for them.
  void find_toolkits(const CompileOptions& opts);

  // The toolchain id, read once per compiler (the process-wide lookup takes a lock).
  const std::string& toolchain();

  Cache* cache_;
  unsigned threads_;
  std::once_flag toolchain_once_;
  std::string toolchain_;
  std::mutex pool_mu_;
  std::unique_ptr<ThreadPool> pool_;
  KeyMemo memo_;
};

// Checks that source is non-empty valid UTF-8; throws KJIT_ERROR_INVALID_SOURCE.
void validate_source(const std::string& source);

// The files on disk that (source, opts) can reach, as the cache key covers them.
IncludeScan scan_for(const std::string& source, const CompileOptions& opts,
                     const NormalisedOptions& norm);

}  // namespace kjit
