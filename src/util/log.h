// Logging: a host callback, or stderr when KJIT_LOG is set. Silent by default.
#pragma once

#include <string>

#include "kjit/common.h"

namespace kjit {

void set_log_callback(kjit_log_fn fn, void* user);
bool log_enabled(kjit_log_level level);
void log(kjit_log_level level, const std::string& message);

inline void log_debug(const std::string& m) { log(KJIT_LOG_DEBUG, m); }
inline void log_info(const std::string& m) { log(KJIT_LOG_INFO, m); }
inline void log_warn(const std::string& m) { log(KJIT_LOG_WARN, m); }
inline void log_error(const std::string& m) { log(KJIT_LOG_ERROR, m); }

}  // namespace kjit
