// Conservative #include scanner: finds every file on disk that a program can reach through
// #include, #include_next, __has_include and pre-include options, so that the cache key can
// cover the files' bytes. Over-including is harmless (a few more misses); missing a file is
// not, so the compiler also records the files NVRTC really opens (file_audit.h) and stores
// a result only when every one of them is covered by the scan (covers() below).
//
// The scan follows NVRTC's own search: a quoted include is looked for in the directory of
// the file that includes it (for the program itself: the directory of its name, or the
// working directory when the name has none), then in each include path in order; an angled
// include in the include paths. Every candidate that exists is read and scanned (not only
// the first, as NVRTC would); every candidate that does not exist is remembered, because a
// file created there later would change what NVRTC reads. A computed include whose macro
// is defined (anywhere in the scanned files or by -D) as a header name, directly or through
// other such macros, is followed to every definition; any other computed include could
// name anything, so every file below the searched directories is read (bounded; past the
// bound the scan is marked incomplete).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/fs.h"

namespace kjit {

struct IncludeScanInput {
  std::string source;
  std::string program_name;                                  // as given to NVRTC ("" = none)
  std::vector<std::pair<std::string, std::string>> headers;  // in-memory headers
  std::vector<std::string> include_paths;                    // in NVRTC's order
  std::vector<std::string> pre_includes;
  std::vector<std::string> defines;     // from -D options: NAME or NAME=BODY
  std::vector<std::string> skip_roots;  // files under these (CUDA toolkits) are not read
  bool builtin_std = false;  // a standard header found nowhere else is kjit's (builtin_std.h)
  // The toolkit's include directories (not read: the key's fingerprint covers them). A
  // reference found there reaches the toolkit's headers, which may include any standard
  // header: with `builtin_std`, every built-in one is then served (`builtins`).
  std::vector<std::string> toolkit_includes;
  // A computed include no macro explains makes the scan read every searched directory
  // whole. False: it is left unexplained (`computed` stays set) and nothing is listed, for
  // a scan that only previews what NVRTC will read (the key then comes from NVRTC's own
  // reads: dep_manifest.h).
  bool read_directories = true;
};

struct IncludedFile {
  std::string path;                            // real path
  std::shared_ptr<const std::string> content;  // the bytes
  std::string digest;                          // their SHA-256 (hex)
};

struct IncludeScan {
  std::vector<IncludedFile> files;  // every existing candidate, in discovery order
  std::set<std::string> absent;     // resolved paths of candidates that do not exist
  std::set<std::string> listed;     // real directories whose whole tree was read
  bool computed = false;            // a computed include or __has_include was seen
  bool complete = true;             // false when a bound stopped a directory listing
  bool outside = false;             // a reference that no scanned location holds (the
                                    // toolkit's headers, or a missing file)
  bool reads_files() const;         // the program can make NVRTC open a file at all
  // Built-in standard headers the program uses (builtin_std.h), sorted: names it includes
  // that no reference found as a file or an in-memory header. The places they were looked
  // for are in `absent`, so a file made there later changes the key.
  std::vector<std::string> builtins;

  // For remembering the scan (compiler.cpp): every path looked at, each directory whose
  // files were searched relative to it, and the working directory when the scan used it.
  std::vector<PathStamp> looked;
  std::string cwd;
  uint64_t cwd_dev = 0, cwd_ino = 0;  // the directory `cwd` named when it was read
  bool settled = true;                // every file read had been unmodified for kRacySeconds
  bool stamped = true;                // every stat() of `looked` succeeded or found nothing
  // True when `looked` (with `cwd`) decides the scan's result: paths_unchanged() then
  // means the same scan would give the same files with the same bytes.
  bool rememberable() const { return settled && stamped && complete && listed.empty(); }
};

// One include-like reference in a text.
struct IncludeRef {
  std::string name;  // "" for a computed reference
  bool angled = false;
  std::string macro;  // a computed reference that is one identifier: its name
};

struct Directives {
  std::vector<IncludeRef> refs;
  // Object-like macros: name -> body ("" for a function-like macro, which is never used to
  // resolve a computed include).
  std::vector<std::pair<std::string, std::string>> defines;
};

// Every #include / #include_next / #import / #embed directive target and every
// __has_include / __has_include_next operand in `text`, after line splicing and with
// comments, string literals and digraphs handled as the preprocessor does, and every
// #define. A reference whose operand is not a literal header name is reported with an
// empty name (and its macro's name when the operand is a single identifier).
Directives scan_directives(const std::string& text);

IncludeScan scan_includes(const IncludeScanInput& in);

// True when NVRTC opening `resolved` (a resolve_path() result) was foreseen by the scan:
// an existing file it read, a candidate it found absent, or a path below a directory it
// listed whole.
bool scan_covers(const IncludeScan& scan, const std::string& resolved, bool exists);

}  // namespace kjit
