// The result of a compile, as the compiler returns it and the cache's single flight
// (Cache::get_or_compile) carries it: OK with an entry, or a failure. A compile error
// (KJIT_ERROR_COMPILE) still carries an entry holding only the log.
#pragma once

#include <string>

#include "kjit/compile.h"
#include "store/entry.h"
#include "util/pch_outcome.h"

namespace kjit {

struct Outcome {
  kjit_status status = KJIT_OK;
  std::string message;
  EntryPtr entry;
  kjit_tier tier = KJIT_TIER_COMPILED;
  // False when the compile read a file that the key does not cover: the result is handed
  // to the caller (and to threads waiting on the same compile) but never stored or shared.
  bool cacheable = true;
  // A failure that is not a compile error but must be answered like one for a while (the
  // compiler crashed on this input): recorded for every waiter and newcomer.
  bool remember_failure = false;
  // What precompiled headers did in this compile.
  PchOutcome pch = PchOutcome::None;
  // The compile stored its result itself, under the entry's own key (not the flight's).
  bool stored = false;
  // Why a compiled result was not stored in the disk tier ("" when it was, or when it came
  // from a cache tier): the one place every such reason flows to, for kjit_binary_stored()
  // and the tool's "compiled, not cached: <reason>". Set with keep_out() by the compile
  // (the key cannot vouch for what NVRTC read), or by the cache (no disk tier, read-only,
  // disk full, a failed write).
  std::string not_stored{};
  // Keeps the result out of every shared tier, saying why (a sentence without a final
  // full stop: "NVRTC listed the directory /x").
  void keep_out(std::string why) {
    cacheable = false;
    not_stored = std::move(why);
  }
};

}  // namespace kjit
