#include "compile/process_state.h"

#include "key/toolchain.h"
#include "key/toolkit.h"
#include "util/switches.h"

namespace kjit {
namespace {

struct ProcessPart {
  const char* name;
  void (*reset)();
};

// One row per part (process_state.h says what each holds).
constexpr ProcessPart kProcessState[] = {
    {"switches", reset_switches},
    {"toolchain facts", reset_toolchain_facts},
    {"toolkits", reset_toolkits},
};

}  // namespace

void reset_process_state() {
  for (const ProcessPart& part : kProcessState) part.reset();
}

}  // namespace kjit
