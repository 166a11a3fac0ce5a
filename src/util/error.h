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

// Thread-local "last error" message behind kjit_last_error().
void set_last_error(std::string message);
void clear_last_error();
const char* last_error();

}  // namespace kjit
