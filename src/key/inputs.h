// The files one NVRTC run read, as recorded from its audit (file_audit.h), and the check
// that they are still what it read. Both the precompiled headers (pch.h) and the cache's
// dependency manifests (dep_manifest.h) are vouched for this way.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "key/file_audit.h"
#include "key/include_scan.h"

namespace kjit {

// One file NVRTC read, or one place it looked for a file and found none.
struct FileInput {
  std::string path;       // resolved (resolve_path)
  std::string opened;     // as NVRTC opened it, made absolute (a manifest keeps it relative
                          // where NVRTC named it so): what is checked (stat() and reading
                          // follow links there, so a retargeted link is a change)
  bool relative = false;  // NVRTC named it relative to the working directory
  bool exists = false;
  std::string digest;    // SHA-256 (hex) of the bytes NVRTC read, when it exists
  PathStamp stamp;       // taken when the record was made
};

// The inputs of one NVRTC run from its audit, or false (with *why) when they cannot be
// vouched for: the audit is not whole, NVRTC listed a directory, a place NVRTC found empty
// is no longer empty, or a file's bytes now may not be the bytes NVRTC read. A file whose
// modification or change time is not before `started_ns` (CLOCK_REALTIME, read before NVRTC
// began) by kStampLagNs (by the racy window for times coarser than nanoseconds and for
// network file systems) may have changed while NVRTC read it, whatever its bytes are now:
// the run cannot be vouched for (as ccache refuses "too new" include files). Skipped: files opened
// for writing, NVRTC's own PCH and temporary files, NVRTC's first look at the program's own name,
// inputs of a PCH the compile used (from_pch), and files under `skip_roots` (resolved; the CUDA
// toolkits).
bool record_inputs(const AuditRecord& audit, const std::string& program, int64_t started_ns,
                   const std::vector<std::string>& skip_roots, std::vector<FileInput>* out,
                   std::string* why);

// True when every input is as recorded: a file with the same bytes, a place that was empty
// still empty, each looked up by `opened` (a relative name from the working directory). A
// file is read and hashed unless this process already hashed it to that digest under the
// stamp it has now (on a local file system, settled then): a record's stamps, taken by
// another process or before, are not trusted alone, since a write through a shared memory
// mapping can change the bytes and keep the stamp. Within one process an unchanged stamp
// is trusted (such a write made after the first use is not seen until the stamp moves).
// `now`, when given, receives the stamps taken (for the hit memo; absolute paths) and
// *settled whether all of them may be trusted by stat() alone from now on.
bool inputs_hold(const std::vector<FileInput>& inputs, std::vector<PathStamp>* now = nullptr,
                 bool* settled = nullptr);

// Forgets which files this process has hashed (tests: as a new process would start).
void forget_seen_files();

}  // namespace kjit
