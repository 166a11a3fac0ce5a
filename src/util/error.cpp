#include "util/error.h"

#include <new>

namespace kjit {
namespace {
// Whether this thread's message was set since it was last cleared: a plain flag, so that
// clearing after a call that set nothing (every successful launch) reads one flag and
// does not touch the string, whose first use on a thread registers its destructor.
thread_local bool t_has_error = false;
thread_local std::string t_last_error;
}  // namespace

void set_last_error(std::string message) {
  t_last_error = std::move(message);
  t_has_error = true;
}
void clear_last_error() {
  if (!t_has_error) return;
  t_last_error.clear();
  t_has_error = false;
}
const char* last_error() {
  return t_has_error ? t_last_error.c_str() : "";
}

kjit_status status_of(const std::exception_ptr& e, std::string* message) noexcept {
  kjit_status status = KJIT_ERROR_INTERNAL;
  try {
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      status = err.status();
      *message = err.message();
    } catch (const std::bad_alloc&) {
      status = KJIT_ERROR_OUT_OF_MEMORY;
      *message = "out of host memory";
    } catch (const std::exception& err) {
      *message = std::string("internal error: ") + err.what();
    } catch (...) {
      *message = "internal error: unknown exception";
    }
  } catch (...) {
    // No memory left for the message: the status alone still tells what happened.
  }
  return status;
}

}  // namespace kjit
