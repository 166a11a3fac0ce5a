// The process's switches: settings read from the environment once per process, passed
// from here to what they steer (normalise() gets them in its MachineFacts) so that the
// code they steer reads no environment itself.
#pragma once

namespace kjit {

struct Switches {
  bool pch = true;  // precompiled headers allowed: KJIT_PCH unset or not "0", "off", "false"
};

// The switches, read from the environment on the first call (again after
// reset_switches()). Thread-safe; after the first call one atomic load.
Switches process_switches();

// Forgets the switches read (process_state.h: reset_process_state() calls it). Tests only.
void reset_switches();

}  // namespace kjit
