// Compiles on the compiler's pool: one at a time behind a future, or a batch waited for
// together. The C shims only check arguments and hand the outcomes out.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compile/compiler.h"

namespace kjit {

// Whether the caller gets a binary for this outcome: on success, and for the failures whose
// binary holds the log (compile errors, name expressions that name nothing).
inline bool delivers_binary(const Outcome& o) {
  return o.status == KJIT_OK ||
         ((o.status == KJIT_ERROR_COMPILE || o.status == KJIT_ERROR_NAME_NOT_FOUND) && o.entry);
}

// Compiler::compile on a pool thread: an exception becomes the failure outcome that the
// C boundary would have reported for it (status_of in util/error.h).
Outcome compile_catching(Compiler& c, const std::string& source, const CompileOptions& opts,
                         const CancelFlag& cancel);

// The result of a compile running on the pool, shared by its handle and the job.
class CompileFuture {
 public:
  enum class Wait { Ready, Timeout, Taken };

  // Waits up to timeout_ms (forever when negative). Ready moves the outcome to *out, once;
  // later calls answer Taken.
  Wait wait(int64_t timeout_ms, Outcome* out);
  bool ready();
  // The compile stops at its next check; one not yet started never starts.
  void cancel() { cancel_->store(true); }

 private:
  friend std::shared_ptr<CompileFuture> compile_async(Compiler&, std::string, CompileOptions);
  void finish(Outcome o);

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool taken_ = false;
  Outcome outcome_;
  CancelFlag cancel_ = std::make_shared<std::atomic<bool>>(false);
};

// Queues one compile on the compiler's pool.
std::shared_ptr<CompileFuture> compile_async(Compiler& c, std::string source, CompileOptions opts);

struct CompileRequest {
  std::string source;
  CompileOptions options;
};

// Runs every request on the compiler's pool and waits for all; outcomes in request order.
std::vector<Outcome> compile_many(Compiler& c, std::vector<CompileRequest> requests);

}  // namespace kjit
