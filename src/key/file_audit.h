// The files NVRTC really opens during a compile: the ground truth that a compile's cache
// key is checked against before its result is stored (fail closed).
//
// libnvrtc reads source files through the C library (fopen, open, opendir). On first use,
// kjit points libnvrtc's own import slots for those functions (its GOT entries, found
// through the dynamic section of the loaded library) at small wrappers that call the real
// function and, on a thread that is auditing, record the path. Nothing else in the
// process is affected: only libnvrtc's imports are redirected, and the wrappers call the
// functions libnvrtc would have called (through the normal symbol lookup, so an LD_PRELOAD
// interposer still sees every call).
#pragma once

#include <string>
#include <vector>

namespace kjit {

struct OpenedFile {
  std::string path;        // absolute (relative paths joined to the working directory at the call)
  bool relative = false;   // NVRTC named it relative to the working directory
  bool ok = false;         // the open succeeded
  bool write = false;      // opened for writing only (an output, e.g. --time=FILE)
  bool directory = false;  // opendir
  // One of NVRTC's own PCH or temporary files: not an input. Set by whoever ran NVRTC
  // (the compile worker for its own files, compile_audited for this process's), which
  // knows where its PCHs are; the key's checks read only this flag.
  bool nvrtc_private = false;
  // Not opened by NVRTC in this compile but read when the precompiled header it used was
  // made (pch.h): `digest` is the SHA-256 (hex) of the bytes read then, when `ok`.
  bool from_pch = false;
  std::string digest;  // see from_pch; "" for a file NVRTC opened in this compile
};

// What one compile's audit saw, as a value (the compile worker sends it to its client).
struct AuditRecord {
  bool available = false;  // opens could be audited at all (FileAudit::available())
  bool whole = false;      // FileAudit::whole()
  std::vector<OpenedFile> opened;
  // Why the record cannot vouch for the compile although it is whole ("" = it can): NVRTC
  // used a precompiled header whose inputs are not known.
  std::string doubt;
};

class FileAudit {
 public:
  // Installs the wrappers on first call. False when libnvrtc's imports could not be found
  // (an unknown platform or layout): then nothing can be audited and a caller must assume
  // that NVRTC may read any file.
  static bool available();

  // Starts recording the opens libnvrtc makes on this thread. One audit per thread at a time.
  FileAudit();
  ~FileAudit();
  FileAudit(const FileAudit&) = delete;
  FileAudit& operator=(const FileAudit&) = delete;

  // What was recorded so far.
  const std::vector<OpenedFile>& opened() const { return opened_; }

  // False when libnvrtc opened a file on a thread that was not auditing while this audit
  // ran: that open may belong to this compile, so the record is not known to be whole.
  bool whole() const;

  // For tests: pretend the wrappers could not be installed.
  static void disable_for_testing(bool disabled);

 private:
  friend void record_open(const char*, bool, bool, bool);
  std::vector<OpenedFile> opened_;
  unsigned long long stray_at_start_;
};

}  // namespace kjit
