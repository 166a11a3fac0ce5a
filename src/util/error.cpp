#include "util/error.h"

#include <new>

namespace kjit {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(std::string message) {
  t_last_error = std::move(message);
}
void clear_last_error() {
  t_last_error.clear();
}
const char* last_error() {
  return t_last_error.c_str();
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
