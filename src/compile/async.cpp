#include "compile/async.h"

#include <chrono>
#include <exception>
#include <utility>

namespace kjit {

Outcome compile_catching(Compiler& c, const std::string& source, const CompileOptions& opts,
                         const CancelFlag& cancel) {
  try {
    return c.compile(source, opts, cancel);
  } catch (...) {
    Outcome o;
    o.status = status_of(std::current_exception(), &o.message);
    return o;
  }
}

CompileFuture::Wait CompileFuture::wait(int64_t timeout_ms, Outcome* out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout_ms < 0) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; })) {
    return Wait::Timeout;
  }
  if (taken_) return Wait::Taken;
  taken_ = true;
  *out = std::move(outcome_);
  return Wait::Ready;
}

bool CompileFuture::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void CompileFuture::finish(Outcome o) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outcome_ = std::move(o);
    done_ = true;
  }
  cv_.notify_all();
}

std::shared_ptr<CompileFuture> compile_async(Compiler& c, std::string source, CompileOptions opts) {
  auto future = std::make_shared<CompileFuture>();
  c.submit([&c, future, src = std::move(source), o = std::move(opts)] {
    if (future->cancel_->load()) {
      future->finish(Outcome{KJIT_ERROR_CANCELLED, "compilation was cancelled before it started",
                             nullptr, KJIT_TIER_COMPILED});
    } else {
      future->finish(compile_catching(c, src, o, future->cancel_));
    }
  });
  return future;
}

std::vector<Outcome> compile_many(Compiler& c, std::vector<CompileRequest> requests) {
  const size_t count = requests.size();
  std::vector<Outcome> results(count);
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = count;
  for (size_t i = 0; i < count; ++i) {
    c.submit([&, i] {
      Outcome r = compile_catching(c, requests[i].source, requests[i].options, nullptr);
      std::lock_guard<std::mutex> lock(mu);
      results[i] = std::move(r);
      if (--remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  return results;
}

}  // namespace kjit
