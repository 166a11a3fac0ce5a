// Small file-system helpers (POSIX).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kjit {

// Whole file as bytes; nullopt if it cannot be opened or read.
std::optional<std::string> read_file(const std::string& path);

// The names in directory `dir` (without "." and ".."), sorted; nullopt if it cannot be opened.
std::optional<std::vector<std::string>> directory_names(const std::string& dir);

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

// What stat() said about a path (an include scan, a manifest and the memo take them), as it was
// looked up (links are followed again when it is checked): enough to tell, without reading or
// resolving anything, that looking again would find the same thing.
struct PathStamp {
  std::string path;
  int kind = 0;          // 0: absent (ENOENT or ENOTDIR), 1: regular file, 2: directory, 3: other
  bool listing = false;  // a directory whose entries were read: its times count too
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
};

// Takes the stamp of `path` now. False when stat() failed for another reason than the
// path's absence (then the stamp proves nothing).
bool stamp_path(const std::string& path, PathStamp* out);

// True when every path still stats as it did (a file: same device, inode, size,
// modification and change times; a directory: same device and inode, and the times too
// when its listing was read; absent: still absent). A file is only trusted this way when it had not
// been modified for kRacySeconds when it was read (IncludeScan::settled), so an edit within the
// same timestamp tick is seen; renames, hard links and permission changes update the change time,
// and replacing a file changes its inode.
//
// `cwd_now`, when given, is the stamp of "." taken now and known to be the directory
// object `cwd` named when the stamps were taken (same device and inode): a stamp of `cwd`
// (or `cwd`/.) is then checked against it instead of looking the path up again.
bool paths_unchanged(const std::vector<PathStamp>& looked, const std::string& cwd = {},
                     const PathStamp* cwd_now = nullptr);

// How long after its last change a file's stamp is trusted to show the next change: an
// edit within one timestamp tick keeps the modification time.
constexpr int64_t kRacySeconds = 2;

// True when the stamp's modification and change times are kRacySeconds or more before
// `now_ns` (CLOCK_REALTIME): a change after `now_ns` then shows in the stamp.
bool stamp_settled(const PathStamp& s, int64_t now_ns);
int64_t realtime_ns();
// CLOCK_REALTIME in ns once it reads `t` or later: at once, or after sleeping until then.
int64_t realtime_ns_from(int64_t t);

// How far behind the real time a local file system may stamp a change: file systems stamp
// with the kernel's coarse clock, updated once a tick (4 ms at 250 Hz; up to about 5.3 ms
// was measured behind CLOCK_REALTIME read before the write, on a loaded 2-core machine),
// four times over. A stamp is never ahead of the real time.
constexpr int64_t kStampLagNs = 20 * 1000000;

// The stamp of `path` without setting its `path` field (as stamp_path).
bool stat_stamp(const char* path, PathStamp* out);

// The resolved form of a path that may not exist: the real path of its deepest existing
// ancestor directory followed by the rest. Relative paths are taken from the working
// directory. Used for both the scan's and the audit's paths, so they compare equal.
std::string resolve_path(const std::string& path);

// The working directory (getcwd), or "" when it cannot be read.
std::string current_directory();

int64_t unix_time();    // seconds
double monotonic_ms();  // steady clock, milliseconds

}  // namespace kjit
