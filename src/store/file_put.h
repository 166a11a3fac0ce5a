// Files of the cache directory written whole: to a temporary name in the directory of
// their final place, then renamed over it, so that a reader sees the old file or the new
// one (payload files, entry_files.h; fact files, fact_files.h). Store-internal.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kjit {

// Temporaries are named <final_dir>/.tmp-<stem>-<pid>-<n>.
constexpr const char* kTempPrefix = ".tmp-";
inline bool is_temp_name(const std::string& name) {
  return name.rfind(kTempPrefix, 0) == 0;
}

// A new temporary in `final_dir` (created 0700 if needed; a link or a file in its place is
// removed) holding `pieces`; returns its path. Throws Error(KJIT_ERROR_CACHE).
std::string write_new_file(const std::string& final_dir, const std::string& stem,
                           const std::vector<std::string_view>& pieces);
// Renames a file written by write_new_file() to `to`, replacing any file there; the
// temporary is removed on failure. Throws Error(KJIT_ERROR_CACHE).
void move_into_place(const std::string& temp, const std::string& to);

}  // namespace kjit
