// Dependency manifests: the cache key of a program that can read files comes from what
// NVRTC actually read for it, the way ccache's direct mode does it.
//
// A request (source, in-memory headers, options, target, outputs, name expressions,
// toolchain, toolkit) has a base hash. Under manifest_key(base) the cache keeps a manifest:
// the records of earlier compiles of that request, newest first, each listing the files
// NVRTC read (with the SHA-256 of their bytes and their stat() stamps), the places it
// looked for a file and found none, and the built-in standard headers it was given, with
// the key of the entry compiled from them. A lookup takes the first record whose files
// still hold those bytes and whose empty places are still empty (inputs.h: inputs_hold);
// a miss compiles, records NVRTC's reads from the fail-closed audit and adds a record. No
// directory is ever read whole. Names NVRTC used relative to the working directory are
// kept relative, so the record is checked where the next compile would look.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "key/inputs.h"

namespace kjit {

struct DepRecord {
  std::string entry_key;              // the entry compiled from these inputs
  std::vector<std::string> builtins;  // built-in standard headers given to NVRTC (sorted)
  std::vector<FileInput> inputs;      // `opened` relative where NVRTC named it so
};

// At most this many records per manifest (the newest are kept).
constexpr size_t kMaxDepRecords = 16;

// The key the manifest of a request with this base hash is stored under.
std::string manifest_key(const std::string& base);

// The key of the entry compiled from `r` for the request `base`: over the base, every
// input's name as NVRTC opened it (relative names as such), whether it existed and its
// bytes' digest, and the built-in headers with the built-in set's version. `cwd` is
// hashed too when not empty (options that write source paths into the code).
std::string dep_entry_key(const std::string& base, const DepRecord& r, const std::string& cwd);

// The record of a compile from its audit (record_inputs: the same rules, the CUDA
// toolkits in `skip_roots` left to the key's toolkit fingerprint), with relative names
// made relative to `cwd` (the working directory of the compile). `extra_absent` are
// places that must stay empty although NVRTC may not have looked there (where a built-in
// header would be shadowed by a file). False with *why when it cannot be vouched for.
bool make_dep_record(const AuditRecord& audit, const std::string& program, int64_t started_ns,
                     const std::vector<std::string>& skip_roots,
                     const std::vector<std::string>& extra_absent, const std::string& cwd,
                     DepRecord* out, std::string* why);

// The manifest's text (stored in an Entry's `manifest` field) and back. parse returns
// nullopt for text that is not a manifest of this version.
std::string manifest_text(const std::vector<DepRecord>& records);
std::optional<std::vector<DepRecord>> parse_manifest(const std::string& text);

}  // namespace kjit
