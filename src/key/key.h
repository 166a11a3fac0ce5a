// The cache key of a compile request: what it covers and how it is computed.
//
// A program that can read no file has one key: a hash of the request (source, in-memory
// headers, normalised options, target, outputs, name expressions, NVRTC's identity and the
// toolkit's fingerprint). A program that can read files has a base hash of the same request;
// its entries' keys come from the files NVRTC actually read for it (dep_manifest.h), checked
// against the audit of its compile (file_audit.h: fail closed). docs/cache-keys.md tells it
// for users.
#pragma once

#include <string>
#include <vector>

#include "key/file_audit.h"
#include "key/include_scan.h"
#include "key/request.h"
#include "util/fs.h"

namespace kjit {

// The key of a program that can read no file (options.h: may_read_files), or of one whose
// files the scan read (`scan`, hashed by path and digest, with the built-in standard headers
// it uses). Length-prefixed and versioned (kCacheFormatVersion).
std::string compute_key(const std::string& source, const CompileOptions& opts,
                        const NormalisedOptions& norm, const std::string& toolchain,
                        const IncludeScan& scan);

// The base hash of a program that can read files: the request alone, and whether built-in
// standard headers may be given (the records say which were). Keys of its manifest and
// entries derive from it (dep_manifest.h).
std::string compute_base(const std::string& source, const CompileOptions& opts,
                         const NormalisedOptions& norm, const std::string& toolchain);

// Whether the options write the names of source files into the code (debug and line
// information): a key from names NVRTC used relative to the working directory then also
// covers that directory.
bool writes_source_paths(const NormalisedOptions& norm);

// Why a compile's result must not be stored, or "" when every file NVRTC opened for it is
// covered by the key: a file the scan read (with the same bytes now), a candidate the scan
// found absent, or a path below a directory the scan read whole. Not counted: NVRTC's first
// look at the program's own name (it compiles the source it was given), files opened only
// for writing (outputs such as --time=FILE), files marked nvrtc_private (NVRTC's own PCH
// and temporary files, marked by whoever ran it), and the CUDA toolkit's files (covered by
// the toolchain id and the toolkit fingerprint in the key). `audit` is null when opens
// cannot be audited.
std::string uncovered(const IncludeScan& scan, const AuditRecord* audit,
                      const std::string& program_name, const NormalisedOptions& norm);

// The files on disk that (source, opts) can reach, as a scan of the preprocessor's
// directives finds them. `read_directories`: IncludeScanInput::read_directories.
IncludeScan scan_for(const std::string& source, const CompileOptions& opts,
                     const NormalisedOptions& norm, bool read_directories = true);

// The places the scan found empty where a file would shadow a built-in standard header
// the program uses: a record's absent places, which must stay empty.
std::vector<std::string> builtin_shadow_places(const IncludeScan& scan);

// The stamps the memo checks for a record (key_memo.h): its files' own, and for places
// found empty, their directory's stamp (one stat() for all the names it lacks; any entry
// made, removed or renamed there changes its times) where the directory had been settled
// for the racy window and is on a local file system; else the place's own.
std::vector<PathStamp> memo_stamps(std::vector<PathStamp> now);

}  // namespace kjit
