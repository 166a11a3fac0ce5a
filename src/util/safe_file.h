// Opening and reading files in the cache directory so that nothing found there (a FIFO, a
// device, a link, a directory, a file of any size) can block, exhaust or redirect the caller.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <optional>
#include <string>

namespace kjit {

// How open_regular() ended.
enum class Opened { Ok, Absent, NotRegular, Failed };

// Opens `path` so that nothing found there can block the caller or send it elsewhere: with
// O_NONBLOCK (a FIFO without a peer does not block the open), O_NOFOLLOW unless `follow` (a
// symbolic link is then NotRegular), O_NOCTTY and O_CLOEXEC added to `flags` (open()'s
// access flags, O_CREAT with `mode` included); then fstat(): anything but a regular file
// (directory, FIFO, socket, device) is closed and NotRegular. On Ok, *fd is the descriptor
// (O_NONBLOCK cleared; the caller closes it) and *st its fstat(). Absent: ENOENT or ENOTDIR.
// Failed: another error, in *err (errno). O_NOATIME in `flags` is dropped when not allowed.
Opened open_regular(const std::string& path, int flags, unsigned mode, bool follow, int* fd,
                    struct stat* st, int* err = nullptr);
// As open_regular(), `name` taken relative to the directory descriptor `dir_fd`.
Opened open_regular_at(int dir_fd, const std::string& name, int flags, unsigned mode, bool follow,
                       int* fd, struct stat* st, int* err = nullptr);

// The whole of the regular file at `path` (open_regular(); links followed only when
// `follow`), read only when it holds at most `max_bytes`. nullopt otherwise, with *why
// saying why ("" when it is absent).
std::optional<std::string> read_regular_file(const std::string& path, size_t max_bytes, bool follow,
                                             std::string* why);
// What is at `path`, for messages: "a regular file", "a directory", "a FIFO", "a symbolic
// link", "a socket", "a device", "nothing".
std::string file_kind(const std::string& path);

// Removes what is at `path`: a file, link or any other non-directory by unlink(); a
// directory with everything below it (links are removed, never followed; at most `depth`
// levels). True when nothing is left there.
bool remove_any(const std::string& path, int depth = 16);

// Makes sure `path` is a directory of its own (not a link to one elsewhere, nor a file):
// created with `mode` when absent; anything else there is removed first (remove_any).
// Its parent must exist. Returns false with errno set on failure.
bool ensure_own_directory(const std::string& path, unsigned mode);

}  // namespace kjit
