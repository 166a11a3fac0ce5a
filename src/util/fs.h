// Small file-system helpers (POSIX).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kjit {

// Whole file as bytes; nullopt if it cannot be opened or read.
std::optional<std::string> read_file(const std::string& path);

// Identity of a file's current contents as far as stat() can tell (device, inode, size,
// mtime and ctime in ns). Empty when the file does not exist or is not a regular file.
std::string file_identity(const std::string& path);

bool is_regular_file(const std::string& path);
bool is_directory(const std::string& path);

// Create `path` and missing parents with `mode`. Returns false with errno set on failure.
bool make_directories(const std::string& path, unsigned mode);
// True when `path` is one of `roots` or below one (plain string comparison of resolved paths).
bool path_under_any(const std::string& path, const std::vector<std::string>& roots);

// Directory part of a path ("" when there is none).
std::string dirname_of(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);

// Name of the file system type when it is a network or FUSE file system ("nfs", "cifs",
// "smb2", "fuse", ...), else "".
std::string network_fs_type(const std::string& path);

int64_t unix_time();           // seconds
double monotonic_ms();         // steady clock, milliseconds

}  // namespace kjit
