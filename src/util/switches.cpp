#include "util/switches.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kjit {
namespace {

// -1: not read yet; else the PCH switch.
std::atomic<int> g_pch_switch{-1};

bool pch_from_environment() {
  const char* v = std::getenv("KJIT_PCH");
  return !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 ||
                 std::strcmp(v, "false") == 0));
}

}  // namespace

Switches process_switches() {
  int pch = g_pch_switch.load(std::memory_order_acquire);
  if (pch < 0) {  // two first callers read the same environment: either store is right
    pch = pch_from_environment() ? 1 : 0;
    g_pch_switch.store(pch, std::memory_order_release);
  }
  Switches s;
  s.pch = pch != 0;
  return s;
}

void reset_switches() {
  g_pch_switch.store(-1, std::memory_order_release);
}

}  // namespace kjit
