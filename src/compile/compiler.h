// The compiler: NVRTC behind the cache, with a worker pool for async and batch compiles.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "key/dep_manifest.h"
#include "key/file_audit.h"
#include "key/include_scan.h"
#include "key/key_memo.h"
#include "nvrtc/options.h"
#include "store/cache.h"
#include "store/outcome.h"
#include "worker/client.h"

namespace kjit {

class ThreadPool;

// A source handed over once and never changed (the C API's kjit_source): checked when it is
// made and numbered uniquely in the process, so that the compiler's memo files its keys
// under the number and a repeated request reads none of its bytes.
class SourceObject {
 public:
  // Throws kjit::Error (KJIT_ERROR_INVALID_SOURCE) as validate_source() does.
  explicit SourceObject(std::string text);
  const std::string& text() const { return text_; }
  uint64_t id() const { return id_; }

 private:
  std::string text_;
  uint64_t id_;
};

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
  // The same for a NUL-terminated source (the C API's): a repeated large source is
  // compared with the remembered one in the pass that finds its end.
  Outcome compile(const char* source, const CompileOptions& opts,
                  const CancelFlag& cancel = nullptr);
  // The same for a source object: a request seen before is found by the object's number.
  Outcome compile(const SourceObject& source, const CompileOptions& opts,
                  const CancelFlag& cancel = nullptr);

  // The cache key of (source, opts), as compile() gives it. For a program that can read
  // files: from a stored record that holds, else by compiling it (dep_manifest.h).
  std::string key(const std::string& source, const CompileOptions& opts);

  // The key as key() gives it, without compiling: for a program that can read files, only
  // from a stored record that holds (nullopt when there is none, or a file of it changed,
  // or the compiler has no cache).
  std::optional<std::string> known_key(const std::string& source, const CompileOptions& opts);

  // The hash of the request alone, without compiling or reading any file: the key of a
  // program that can read no file, the base hash of one that can (dep_manifest.h).
  std::string request_hash(const std::string& source, const CompileOptions& opts);

  // Run `job` on the worker pool (started on first use).
  void submit(std::function<void()> job);

  Cache* cache() const { return cache_; }

  // Where NVRTC runs (worker/client.h). Starts as $KJIT_COMPILE_MODE says.
  void set_mode(CompileMode m) { mode_.store(int(m), std::memory_order_relaxed); }
  CompileMode mode() const { return CompileMode(mode_.load(std::memory_order_relaxed)); }

 private:
  // A request checked (valid UTF-8, options) and made concrete: whether it can make NVRTC
  // read files (options.h: may_read_files), and its options normalised with this
  // machine's facts, read through the cache.
  struct Prepared {
    bool reads_files;
    NormalisedOptions norm;
  };
  Prepared prepare(const std::string& source, const CompileOptions& opts);

  // The entry of a key remembered by memo_, from the memory or disk tier.
  std::optional<Outcome> remembered_hit(const std::string& key);
  // compile() after the memo could not answer.
  Outcome compile_request(std::string_view source, const CompileOptions& opts,
                          const CancelFlag& cancel);

  // Runs the compile in the worker. nullopt when the worker cannot be used and `mode` lets
  // the compile run in this process instead. *audit receives the worker's audit.
  // `before_nvrtc` as for run_compile().
  std::optional<Outcome> compile_in_worker_process(
      const std::string& source, const CompileOptions& opts, const NormalisedOptions& norm,
      const std::string& key, bool use_pch, const CancelFlag& cancel, CompileMode mode,
      AuditRecord* audit, const std::function<void()>& before_nvrtc);

  // One audited NVRTC run where the compile mode says: in the worker, else (auto mode when
  // it cannot be used, or in-process mode) in this process. `before_nvrtc` (may be empty)
  // is called before NVRTC can start: once the worker answers (so that a wait there
  // overlaps the worker's start), or before an NVRTC run in this process; at least once
  // before any NVRTC run, perhaps twice (a worker that cannot be used, then this process).
  Outcome run_compile(const std::string& source, const CompileOptions& opts,
                      const NormalisedOptions& norm, const std::string& key, bool use_pch,
                      const CancelFlag& cancel, AuditRecord* audit,
                      const std::function<void()>& before_nvrtc = {});

  // compile_request() for a program that can read files: its key comes from what NVRTC
  // read (dep_manifest.h).
  Outcome compile_reading_files(const std::string& source, const CompileOptions& opts,
                                const NormalisedOptions& norm, const CancelFlag& cancel);
  // One compile of compile_reading_files(), with the built-in headers that the include
  // scan finds when it also takes scan_norm's pre-includes (norm's, and built-in headers
  // that an earlier attempt found missing). `arrived`: when the request arrived
  // (realtime_ns), which NVRTC starts kStampLagNs after at the earliest.
  Outcome compile_scanned(const std::string& source, const CompileOptions& opts,
                          const NormalisedOptions& norm, const NormalisedOptions& scan_norm,
                          const std::string& base, const std::string& cwd_tag, int64_t arrived,
                          const CancelFlag& cancel);
  // The entry of the first record of the request's manifest that holds here, remembered
  // by the memo; `fresh` reads the manifest from disk (not the memory tier).
  std::optional<Outcome> manifest_hit(const std::string& base, const std::string& cwd_tag,
                                      const std::string& source, const CompileOptions& opts,
                                      bool fresh);
  // Adds `record` to the request's manifest (newest first) and stores it.
  bool add_to_manifest(const std::string& base, DepRecord record, const Entry& like);

  // The toolchain id, read once per compiler (the process-wide lookup takes a lock).
  const std::string& toolchain();

  Cache* cache_;
  unsigned threads_;
  std::once_flag toolchain_once_;
  std::string toolchain_;
  std::mutex pool_mu_;
  std::unique_ptr<ThreadPool> pool_;
  KeyMemo memo_;
  std::atomic<int> mode_;
  WorkerLimits limits_;
};

// Checks that source is non-empty valid UTF-8; throws KJIT_ERROR_INVALID_SOURCE.
void validate_source(const std::string& source);

}  // namespace kjit
