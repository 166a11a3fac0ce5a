// kjit warm: the manifest, read into the kernels it lists (format in kjit(1), MANIFEST
// FORMAT, and in `kjit warm --help`).
#pragma once

#include <kjit/kjit.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kjit_cli {

// The value of a define given without one ("-DNAME").
extern const char kNoValue[];

// One manifest kernel, with the defaults merged in.
struct KernelSpec {
  std::string name;
  std::string source;  // inline source, or the file's contents once read
  std::string file;    // path as written, "" for inline sources
  std::string program_name;
  std::vector<std::string> targets, options, include_paths, name_expressions, outputs;
  std::vector<std::pair<std::string, std::string>> defines;  // value kNoValue = no value
  std::vector<std::pair<std::string, std::string>> headers;
  // NUL bytes in the inline source and in headers (by name): "" or what is wrong.
  std::string source_nul;
  std::map<std::string, std::string> header_nul;
  // Why the kernel cannot be compiled ("" when it can), and the status it fails with.
  std::string problem;
  kjit_status problem_status = KJIT_OK;
};

// Reads and checks the manifest at `path`. `targets_given`: --arch replaces the targets, so
// a kernel may have none. Fails with kExitError, naming the file, the place in it and the
// problem, when it cannot be read or is malformed; an unknown field's message suggests the
// closest known one.
std::vector<KernelSpec> load_manifest(const std::string& path, bool targets_given);

}  // namespace kjit_cli
