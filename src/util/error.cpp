#include "util/error.h"

namespace kjit {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(std::string message) { t_last_error = std::move(message); }
void clear_last_error() { t_last_error.clear(); }
const char* last_error() { return t_last_error.c_str(); }

}  // namespace kjit
