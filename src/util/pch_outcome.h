// What precompiled headers did in one compile (nvrtc/pch.h makes them). Kept in entries
// (store/entry.h: by name in the JSON metadata, as a u64 in the binary metadata) and sent in
// the worker's reply (worker/protocol.h) as a u32 of these values; docs/formats.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/wire.h"

namespace kjit {

enum class PchOutcome : uint32_t { None = 0, Created = 1, Used = 2, Failed = 3 };

// The outcome a u32 of a message or record stands for. Throws WireError for any other
// value (a message that says something else is not understood, never masked into range).
inline PchOutcome pch_outcome_from_wire(uint64_t v) {
  if (v > uint32_t(PchOutcome::Failed)) throw WireError("unknown PCH outcome " + std::to_string(v));
  return PchOutcome(uint32_t(v));
}

// The outcome's name in an entry's JSON metadata: "none", "created", "used", "failed";
// "unknown" for a value outside the four (written as it is, refused when read back, as the
// binary forms do: never masked into range).
inline const char* pch_outcome_name(PchOutcome p) {
  switch (p) {
    case PchOutcome::None:
      return "none";
    case PchOutcome::Created:
      return "created";
    case PchOutcome::Used:
      return "used";
    case PchOutcome::Failed:
      return "failed";
  }
  return "unknown";
}

// The outcome named `name` (pch_outcome_name); false for any other text.
inline bool pch_outcome_from_name(std::string_view name, PchOutcome* out) {
  for (PchOutcome p :
       {PchOutcome::None, PchOutcome::Created, PchOutcome::Used, PchOutcome::Failed}) {
    if (name == pch_outcome_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace kjit
