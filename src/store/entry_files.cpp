// The payload files of the disk tier (entry_files.h): written whole, read and verified.
#include "store/entry_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "store/file_put.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"
#include "util/sha256.h"
#include "util/wire.h"

namespace kjit {
namespace {

// The header: magic, layout version, header size, the key, then for each part (metadata,
// PTX, CUBIN, LTO-IR) its size (8 bytes) and its checksum (16 bytes). Little-endian.
constexpr char kMagic[8] = {'k', 'j', 'i', 't', 'e', 'n', 't', '\n'};
constexpr size_t kParts = 4;
constexpr size_t kKeyAt = 16, kSizesAt = kKeyAt + 64, kSumsAt = kSizesAt + 8 * kParts;
constexpr size_t kHeaderBytes = kSumsAt + 16 * kParts;
constexpr EntryPart kPartOrder[kParts] = {EntryPart::Metadata, EntryPart::Ptx, EntryPart::Cubin,
                                          EntryPart::LtoIr};

// Part `i` (in kPartOrder) made `size` bytes long, unfilled, in `meta` for the metadata and
// in `e`'s blob for the others; where to read it.
char* part_storage(Entry* e, std::string* meta, size_t i, size_t size) {
  if (i > 0) return e->blob(static_cast<BlobKind>(kPartOrder[i]))->uninitialized(size);
  meta->resize(size);
  return meta->data();
}

// Part `i` of `e` (in kPartOrder); `meta` for the metadata.
std::string_view part_bytes(const Entry& e, const std::string& meta, size_t i) {
  return i == 0 ? std::string_view(meta) : e.blob(static_cast<BlobKind>(kPartOrder[i]))->view();
}

// Calls `fn` with the path and name of every file in the two-digit directories of `root`.
// Only real directories are walked: a link in their place (to a directory elsewhere) is not
// followed, so that nothing outside the cache directory is removed.
void for_each_file(const std::string& root,
                   const std::function<bool(const std::string& dir, const std::string& name)>& fn) {
  struct stat st;
  if (::lstat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  const auto dirs = directory_names(root);
  if (!dirs) return;
  for (const std::string& d : *dirs) {
    if (d.size() != 2) continue;
    const std::string dir = join_path(root, d);
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    const auto names = directory_names(dir);
    if (!names) continue;
    for (const std::string& name : *names) {
      if (fn(dir, name)) return;
    }
  }
}

}  // namespace

EntryFiles::EntryFiles(std::string cache_dir)
    : cache_dir_(cache_dir), root_(join_path(cache_dir, "entries")) {}

std::string EntryFiles::path(const std::string& key) const {
  return join_path(join_path(root_, key.substr(0, 2)), key);
}

EntryFiles::Read EntryFiles::read(const std::string& key, Entry* e, bool touch,
                                  std::string* why) const {
  const std::string file = path(key);
  int fd = -1, err = 0;
  struct stat st;
  // Nothing at the path can block the read (a FIFO), send it elsewhere (a link) or make it
  // allocate without bound (a device, a huge file): only a regular file of a size kjit
  // writes is read.
  switch (open_regular(file, O_RDONLY | O_NOATIME, 0, /*follow=*/false, &fd, &st, &err)) {
    case Opened::Ok:
      break;
    case Opened::Absent:
      return Read::Missing;
    case Opened::NotRegular:
      *why = "not a regular file (" + file_kind(file) + ")";
      return Read::Corrupt;
    case Opened::Failed:
      fail(KJIT_ERROR_CACHE, "cannot open " + file + ": " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  unsigned char h[kHeaderBytes];
  const uint64_t size = uint64_t(st.st_size);
  if (size > kMaxEntryBytes) {
    *why = "the file is larger than any entry kjit writes (" + std::to_string(size) + " bytes)";
    return Read::Corrupt;
  }
  if (size < kHeaderBytes || ::pread(fd, h, kHeaderBytes, 0) != ssize_t(kHeaderBytes)) {
    *why = "the file is shorter than its header";
    return Read::Corrupt;
  }
  uint64_t sizes[kParts], total = kHeaderBytes;
  for (size_t i = 0; i < kParts; ++i) {
    sizes[i] = get_le(h + kSizesAt + 8 * i, 8);
    total += sizes[i] > size ? size + 1 : sizes[i];
  }
  const uint64_t layout = get_le(h + 8, 4), header_bytes = get_le(h + 12, 4);
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) {
    *why = "not a kjit entry file";
  } else if (header_bytes != kHeaderBytes || layout != kLayoutVersion) {
    *why = "another layout version or header size";
  } else if (std::memcmp(h + kKeyAt, key.data(), 64) != 0) {
    *why = "the file was written for another key";
  } else if (total != size) {
    *why = "the file's size does not match its header (truncated or extended)";
  }
  if (!why->empty()) return Read::Corrupt;
  std::string meta;
  std::vector<iovec> iov;
  for (size_t i = 0; i < kParts; ++i) {
    char* dst = part_storage(e, &meta, i, size_t(sizes[i]));
    if (sizes[i]) iov.push_back({dst, size_t(sizes[i])});
  }
  off_t at = off_t(kHeaderBytes);
  for (size_t first = 0; first < iov.size();) {
    const ssize_t n = ::preadv(fd, iov.data() + first, int(iov.size() - first), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = "the file could not be read to its end";
      return Read::Corrupt;
    }
    at += n;
    size_t left = size_t(n);
    for (; first < iov.size() && left >= iov[first].iov_len; ++first) left -= iov[first].iov_len;
    if (left > 0) {  // a short read inside a part: go on from where it stopped
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  for (size_t i = 0; i < kParts; ++i) {
    const std::string_view stored(reinterpret_cast<const char*>(h + kSumsAt + 16 * i), 16);
    if (!checksum_equals(stored, entry_checksum(key, kPartOrder[i], part_bytes(*e, meta, i)))) {
      *why = i == 0 ? "metadata checksum mismatch" : "blob checksum mismatch";
      return Read::Corrupt;
    }
  }
  try {
    e->load_metadata_binary(meta);
  } catch (const Error& ex) {
    if (ex.status() != KJIT_ERROR_CACHE_CORRUPT) throw;
    *why = ex.message();
    return Read::Corrupt;
  }
  if (const char* problem = e->parts_problem(); *problem) {
    *why = problem;
    return Read::Corrupt;
  }
  e->last_used = int64_t(st.st_mtim.tv_sec);
  const int64_t now = unix_time();
  if (touch && now - e->last_used > kTouchSeconds && ::futimens(fd, nullptr) == 0) {
    e->last_used = now;
  }
  return Read::Ok;
}

std::string EntryFiles::write_temp(const Entry& e, int64_t created) const {
  const std::string meta = e.metadata_binary(created);
  unsigned char h[kHeaderBytes] = {};
  std::memcpy(h, kMagic, sizeof kMagic);
  put_le(h + 8, uint64_t(kHeaderBytes) << 32 | kLayoutVersion, 8);
  std::memcpy(h + kKeyAt, e.key.data(), 64);
  std::vector<std::string_view> pieces{{reinterpret_cast<const char*>(h), kHeaderBytes}};
  for (size_t i = 0; i < kParts; ++i) {
    const std::string_view part = part_bytes(e, meta, i);
    put_le(h + kSizesAt + 8 * i, part.size(), 8);
    const Checksum sum = entry_checksum(e.key, kPartOrder[i], part);
    std::memcpy(h + kSumsAt + 16 * i, sum.data(), sum.size());
    pieces.push_back(part);
  }
  uint64_t total = 0;
  for (std::string_view p : pieces) total += p.size();
  if (total > kMaxEntryBytes) {
    fail(KJIT_ERROR_CACHE, "entry " + e.key + " is " + std::to_string(total) +
                               " bytes, more than the largest the cache keeps (" +
                               std::to_string(kMaxEntryBytes) + ")");
  }
  ensure_own_directory(root_, 0700);  // (a failure shows when the file is created)
  return write_new_file(dirname_of(path(e.key)), e.key, pieces);
}

void EntryFiles::install(const std::string& temp, const std::string& key) const {
  move_into_place(temp, path(key));
}

bool EntryFiles::remove(const std::string& key) const {
  const std::string p = path(key);
  if (::unlink(p.c_str()) == 0) return true;
  // A directory at an entry's path (never kjit's): removed with what it holds.
  return errno == EISDIR && remove_any(p);
}

void EntryFiles::remove_temp(const std::string& temp) {
  ::unlink(temp.c_str());
}

int64_t EntryFiles::last_use(const std::string& key) const {
  struct stat st;
  return ::lstat(path(key).c_str(), &st) == 0 ? int64_t(st.st_mtim.tv_sec) : 0;
}

void EntryFiles::for_each(const std::function<bool(const std::string& key)>& fn) const {
  for_each_file(root_, [&](const std::string& dir, const std::string& name) {
    return is_hex_key(name) && name.compare(0, 2, dir.substr(dir.size() - 2)) == 0 && fn(name);
  });
}

bool EntryFiles::any_payload() const {
  bool found = false;
  for_each([&](const std::string&) { return found = true; });
  return found;
}

uint64_t EntryFiles::remove_stale_temps(int64_t seconds, uint64_t* bytes_left) const {
  uint64_t removed = 0, left = 0;
  const int64_t now = unix_time();
  for_each_file(root_, [&](const std::string& dir, const std::string& name) {
    struct stat st;
    const std::string p = join_path(dir, name);
    if (!is_temp_name(name) || ::lstat(p.c_str(), &st) != 0) return false;
    if (now - int64_t(st.st_mtim.tv_sec) > seconds && remove_any(p)) {
      ++removed;
    } else if (S_ISREG(st.st_mode)) {
      left += uint64_t(st.st_blocks) * 512;  // what it takes on disk (a sparse file: little)
    }
    return false;
  });
  if (bytes_left) *bytes_left = left;
  return removed;
}

uint64_t EntryFiles::sweep_stale_temps() const {
  // One stat() of entries/.swept decides; the sweep itself reads every directory.
  const std::string stamp = join_path(root_, ".swept");
  struct stat st;
  const int64_t now = unix_time();
  if (::lstat(stamp.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      now - int64_t(st.st_mtim.tv_sec) < kStaleTempSeconds / 6 &&
      int64_t(st.st_mtim.tv_sec) <= now + 60) {
    return 0;
  }
  int fd = -1;
  if (open_regular(stamp, O_WRONLY | O_CREAT, 0600, false, &fd, &st) == Opened::Ok) {
    ::futimens(fd, nullptr);
    ::close(fd);
  } else if (::lstat(stamp.c_str(), &st) == 0) {
    remove_any(stamp);  // not a regular file: made again by the next sweep
  }
  const uint64_t removed = remove_stale_temps(kStaleTempSeconds);
  if (removed) {
    log_info("removed " + std::to_string(removed) + " temporary file(s) of cache writers that " +
             "died, in " + root_);
  }
  return removed;
}

void EntryFiles::remove_all() const {
  for_each_file(root_, [](const std::string& dir, const std::string& name) {
    remove_any(join_path(dir, name));
    return false;
  });
}

}  // namespace kjit
