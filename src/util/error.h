// Internal error type: core code throws kjit::Error; the C shims catch it and map it to a
// status plus the thread-local message.
#pragma once

#include <exception>
#include <string>

#include "kjit/common.h"

namespace kjit {

class Error : public std::exception {
 public:
  Error(kjit_status status, std::string message)
      : status_(status), message_(std::move(message)) {}
  kjit_status status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  kjit_status status_;
  std::string message_;
};

[[noreturn]] inline void fail(kjit_status status, std::string message) {
  throw Error(status, std::move(message));
}

// The status and message of an exception as the C boundary reports it: a kjit::Error keeps
// its own, allocation failure is KJIT_ERROR_OUT_OF_MEMORY, anything else KJIT_ERROR_INTERNAL.
// The one mapping, used by the shims' guard() and by compiles that run on pool threads.
kjit_status status_of(const std::exception_ptr& e, std::string* message) noexcept;

// Thread-local "last error" message behind kjit_last_error().
void set_last_error(std::string message);
void clear_last_error();
const char* last_error();

}  // namespace kjit
