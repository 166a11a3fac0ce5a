// The kjit command-line tool: numbers, times and names as it prints them, and the clock it
// times with.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

#include "cli.h"

namespace kjit_cli {

std::string human_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  }
  return buf;
}

const char* tier_name(int tier) {
  switch (tier) {
    case KJIT_TIER_COMPILED:
      return "compiled";
    case KJIT_TIER_MEMORY:
      return "memory";
    case KJIT_TIER_DISK:
      return "disk";
    case KJIT_TIER_REMOTE:
      return "remote";
    default:
      return "unknown";
  }
}

const char* disk_state_name(int state) {
  switch (state) {
    case KJIT_DISK_OK:
      return "ok";
    case KJIT_DISK_READ_ONLY:
      return "read-only";
    case KJIT_DISK_DISABLED:
      return "disabled";
    case KJIT_DISK_UNAVAILABLE:
      return "unavailable";
    default:
      return "unknown";
  }
}

// ---- times ----------------------------------------------------------------------------

double now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1000.0 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::string human_ms(double ms) {
  char buf[32];
  if (ms < 1.0) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  } else if (ms < 1000.0) {
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  } else if (ms < 60000.0) {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  } else {
    const long s = static_cast<long>(ms / 1000.0);
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  }
  return buf;
}

std::string format_time(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!localtime_r(&t, &tm)) return "-";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

double wait_ms_of(bool waited, int tier, double elapsed_ms, double compile_ms) {
  if (!waited) return 0;
  const double own = tier == KJIT_TIER_COMPILED ? compile_ms : 0;
  return elapsed_ms > own ? elapsed_ms - own : 0;
}

std::string waited_text(double wait_ms) {
  if (wait_ms <= 0) return std::string();
  return " after waiting " + human_ms(wait_ms) + " for another process";
}

}  // namespace kjit_cli
