// The kjit command-line tool: how a command fails (a message and an exit status) and the
// library's words for what went wrong.
#include <string>
#include <utility>

#include "cli.h"

namespace kjit_cli {

void fail(int code, std::string message) {
  throw Failure{code, std::move(message)};
}

void fail_status(kjit_status st, const std::string& what) {
  const std::string msg = what + ": " + error_text(st) + " [" + status_name(st) + "]";
  int code = kExitError;
  if (st == KJIT_ERROR_NOT_FOUND) code = kExitNotFound;
  if (st == KJIT_ERROR_CACHE_CORRUPT) code = kExitCorrupt;
  fail(code, msg);
}

std::string status_name(int status) {
  const std::string s = kjit_status_string(status);
  const size_t colon = s.find(':');
  return colon == std::string::npos ? s : s.substr(0, colon);
}

std::string error_text(int status) {
  const char* e = kjit_last_error();
  return e && *e ? std::string(e) : std::string(kjit_status_string(status));
}

int exit_code_for_compile_status(kjit_status st) {
  switch (st) {
    case KJIT_ERROR_COMPILE:
    case KJIT_ERROR_INVALID_SOURCE:
    case KJIT_ERROR_NAME_NOT_FOUND:
      return kExitCompile;
    case KJIT_ERROR_INVALID_OPTION:
    case KJIT_ERROR_UNSUPPORTED_TARGET:
      return kExitUsage;
    default:
      return kExitError;
  }
}

std::string log_for_cli(std::string log) {
  const std::string note = "kjit: note: a name expression is looked up in every program";
  const size_t at = log.find(note);
  if (at == std::string::npos || (at > 0 && log[at - 1] != '\n')) return log;
  size_t end = log.find('\n', at);
  end = end == std::string::npos ? log.size() : end + 1;
  log.replace(at, end - at,
              "kjit: note: a name expression (-n, or a manifest entry's \"name_expressions\") "
              "must name a __global__ function or an instantiation of a __global__ template "
              "that its source declares, spelled as in C++ (e.g. 'scale<float, 4>')\n");
  return log;
}

}  // namespace kjit_cli
