// The link step: kjit binaries and raw device code (LTO-IR, PTX, CUBIN, fatbinary, object,
// static library) linked by nvJitLink into a CUBIN (and PTX, with -lto), behind the cache.
//
// A link result is an ordinary cache entry. Its key lives in its own domain ("kjit-link-key")
// so it can never equal a compile key, and covers: every input's kind and bytes in order
// (a kjit binary's input is its compile key and the part used, which determine its
// bytes), the target, the options in order, the outputs, nvJitLink's version and the build
// id of the loaded library, and the cache format version. Failures are never stored.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/cache.h"
#include "store/entry.h"
#include "store/outcome.h"

namespace kjit::link {

// Kinds of input, numbered as nvJitLinkInputType (and kjit_link_input in link.h).
enum class InputKind : int { Cubin = 1, Ptx = 2, LtoIr = 3, Fatbin = 4, Object = 5, Library = 6 };

const char* kind_name(InputKind k);

struct Input {
  InputKind kind = InputKind::LtoIr;
  std::string name;  // shown in nvJitLink's log and kjit's messages
  // Raw bytes (owned), or the part of a kjit binary's entry.
  std::shared_ptr<const std::string> bytes;
  EntryPtr entry;
  BlobKind blob = BlobKind::LtoIr;

  std::string_view data() const;
};

struct LinkRequest {
  std::vector<Input> inputs;
  std::string target;                // "sm_90"; "" = from the first kjit binary input
  std::vector<std::string> options;  // nvJitLink options other than -arch, in order
  unsigned outputs = 0;              // KJIT_OUTPUT_CUBIN | KJIT_OUTPUT_PTX; 0 = CUBIN
};

// An input from a kjit binary's entry: its LTO-IR, else its CUBIN when compiled for the
// architecture `target` names (any CUBIN when `target` is ""), else its PTX. Throws
// KJIT_ERROR_INVALID_ARGUMENT for an entry without code.
Input input_from_entry(const EntryPtr& entry, const std::string& name, const std::string& target);

// A raw input; its bytes are copied. Throws KJIT_ERROR_INVALID_ARGUMENT for empty bytes and
// bytes that cannot be of `kind` (a CUBIN or object that is not ELF, a fatbinary or a
// static library without its magic number, PTX that is not UTF-8 text).
Input input_from_bytes(InputKind kind, std::string bytes, const std::string& name);

// A raw input read from `path` now; kind 0 picks it from the file name's extension
// (.cubin, .ptx, .ltoir/.lto, .fatbin, .o, .a). KJIT_ERROR_IO when it cannot be read.
Input input_from_file(int kind, const std::string& path);

// Checks the request and fills in what was left out: the target, the outputs. Throws
// KJIT_ERROR_INVALID_ARGUMENT (no inputs), KJIT_ERROR_INVALID_OPTION (no target, a malformed
// option, PTX output without -lto), KJIT_ERROR_UNSUPPORTED_TARGET (an input compiled for a
// newer or, for CUBIN, another architecture than the target).
LinkRequest resolve(const LinkRequest& request);

// The cache key of a resolved request, with `identity` from nvjitlink_identity().
std::string link_key(const LinkRequest& resolved, const std::string& identity);

// Links (or hits `cache`, which may be null). On success an entry with the CUBIN and/or
// PTX, the kernels of the CUBIN, the name expressions of the kjit binaries linked and
// nvJitLink's info log. A failure nvJitLink reported (KJIT_ERROR_LINK,
// KJIT_ERROR_INVALID_OPTION, KJIT_ERROR_UNSUPPORTED_TARGET, KJIT_ERROR_NVJITLINK) carries
// an entry with no code whose log is nvJitLink's error and info log. Throws kjit::Error for
// the request's own errors (see resolve) and when nvJitLink cannot be loaded.
Outcome link(Cache* cache, const LinkRequest& request);

// Number of times this process has run nvJitLink (a hit does not count).
uint64_t link_runs() noexcept;

}  // namespace kjit::link
