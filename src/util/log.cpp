#include "util/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kjit {
namespace {

struct Sink {
  std::mutex mu;
  kjit_log_fn fn = nullptr;
  void* user = nullptr;
};

Sink& sink() {
  static Sink s;
  return s;
}

// Minimum level for the default stderr sink; -1 = silent (KJIT_LOG unset).
int env_level() {
  static const int level = [] {
    const char* v = std::getenv("KJIT_LOG");
    if (!v || !*v || std::strcmp(v, "0") == 0) return -1;
    if (std::strcmp(v, "debug") == 0) return int(KJIT_LOG_DEBUG);
    if (std::strcmp(v, "info") == 0) return int(KJIT_LOG_INFO);
    if (std::strcmp(v, "error") == 0) return int(KJIT_LOG_ERROR);
    return int(KJIT_LOG_WARN);
  }();
  return level;
}

const char* level_name(kjit_log_level level) {
  switch (level) {
    case KJIT_LOG_DEBUG: return "debug";
    case KJIT_LOG_INFO: return "info";
    case KJIT_LOG_WARN: return "warning";
    case KJIT_LOG_ERROR: return "error";
  }
  return "?";
}

}  // namespace

void set_log_callback(kjit_log_fn fn, void* user) {
  std::lock_guard<std::mutex> lock(sink().mu);
  sink().fn = fn;
  sink().user = user;
}

bool log_enabled(kjit_log_level level) {
  Sink& s = sink();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.fn) return true;
  }
  const int min = env_level();
  return min >= 0 && int(level) >= min;
}

void log(kjit_log_level level, const std::string& message) {
  Sink& s = sink();
  kjit_log_fn fn;
  void* user;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    fn = s.fn;
    user = s.user;
  }
  if (fn) {
    fn(int(level), message.c_str(), user);
    return;
  }
  const int min = env_level();
  if (min >= 0 && int(level) >= min) {
    std::fprintf(stderr, "kjit %s: %s\n", level_name(level), message.c_str());
  }
}

}  // namespace kjit
