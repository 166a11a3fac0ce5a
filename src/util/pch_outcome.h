// What precompiled headers did in one compile (compile/pch.h makes them). Kept in entries
// (store/entry.h: as its number) and sent in the worker's reply (worker/protocol.h) as a u32
// of these values; docs/formats.md.
#pragma once

#include <cstdint>

#include "util/wire.h"

namespace kjit {

enum class PchOutcome : uint32_t { None = 0, Created = 1, Used = 2, Failed = 3 };

// The outcome a u32 of a message or record stands for. Throws WireError for any other
// value (a message that says something else is not understood, never masked into range).
inline PchOutcome pch_outcome_from_wire(uint64_t v) {
  if (v > uint32_t(PchOutcome::Failed)) throw WireError("unknown PCH outcome " + std::to_string(v));
  return PchOutcome(uint32_t(v));
}

}  // namespace kjit
