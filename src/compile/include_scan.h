// Conservative #include scanner: finds every file on disk that a program can reach
// through #include in its own directory and the caller's include paths, so that editing
// any of them changes the cache key. Over-including is harmless; missing one is not.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kjit {

struct IncludeScanInput {
  std::string source;
  std::string program_dir;  // directory of the program name ("" = none)
  std::vector<std::pair<std::string, std::string>> headers;  // in-memory headers
  std::vector<std::string> include_paths;
  std::vector<std::string> pre_includes;
  std::string skip_root;  // files under this directory (the CUDA toolkit) are not hashed
};

struct IncludedFile {
  std::string path;     // as resolved
  std::string content;  // the bytes
};

// Include directive targets found in `text` (quoted or angled). A computed include
// (#include MACRO) is reported as an empty string.
std::vector<std::string> scan_include_directives(const std::string& text);

// Every reachable on-disk file, in a deterministic order (discovery order).
std::vector<IncludedFile> find_included_files(const IncludeScanInput& in);

}  // namespace kjit
