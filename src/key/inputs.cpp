#include "key/inputs.h"

#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <unordered_map>

#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {

namespace {

bool same_file_stamp(const PathStamp& a, const PathStamp& b) {
  return a.kind == b.kind && a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

// The files whose bytes this process has read and hashed, by identity (device and inode),
// with the stamp they had (settled, so that a later edit shows in it) and their digest. A
// stamp in a record is never trusted by itself: another process (or this one, earlier)
// took it, and a write through a shared memory mapping can change a file's bytes while
// its size and times stay (a page already dirty takes more writes without a new stamp).
// So each process hashes a record's files on its first use of them, and from then on
// takes an unchanged stamp as the bytes it hashed.
class SeenFiles {
 public:
  bool seen(const PathStamp& s, const std::string& digest) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = files_.find(Id{s.dev, s.ino});
    return it != files_.end() && same_file_stamp(it->second.stamp, s) &&
           it->second.digest == digest;
  }

  void add(const PathStamp& s, const std::string& digest) {
    std::lock_guard<std::mutex> lock(mu_);
    if (files_.size() >= kMaxFiles) files_.clear();  // a bound, not a cache policy
    files_[Id{s.dev, s.ino}] = Seen{s, digest};
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    files_.clear();
  }

 private:
  static constexpr size_t kMaxFiles = 1 << 16;
  struct Id {
    uint64_t dev, ino;
    bool operator==(const Id& o) const { return dev == o.dev && ino == o.ino; }
  };
  struct IdHash {
    size_t operator()(const Id& i) const { return size_t(i.ino * 0x9E3779B97F4A7C15ull ^ i.dev); }
  };
  struct Seen {
    PathStamp stamp;
    std::string digest;
  };
  std::mutex mu_;
  std::unordered_map<Id, Seen, IdHash> files_;
};

SeenFiles& seen_files() {
  static SeenFiles* files = new SeenFiles;  // never destroyed: used until the process exits
  return *files;
}

// Whether stamps can be trusted in a directory (not on a network file system, whose
// times come from the server and are cached), asked once per directory per check.
class LocalDirs {
 public:
  bool local(const std::string& file) {
    const size_t slash = file.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash + 1);
    auto it = seen_.find(dir);
    if (it == seen_.end()) it = seen_.emplace(dir, network_fs_type(file).empty()).first;
    return it->second;
  }

 private:
  std::map<std::string, bool> seen_;
};

// True when `path` lives on a local file system known to stamp changes in nanoseconds from
// the kernel's clock (ext4, XFS, Btrfs, tmpfs, overlayfs, F2FS, ZFS). Anything else (FAT's two
// seconds, a network file system's server clock, a file system not in the list) is not.
bool nanosecond_times(const std::string& path) {
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:      // ext2/3/4 (an ext4 of 128-byte inodes keeps seconds: see below)
    case 0x58465342:  // XFS
    case 0x9123683E:  // Btrfs
    case 0x01021994:  // tmpfs
    case 0x794C7630:  // overlayfs (its upper file system's times)
    case 0xF2F52010:  // F2FS
    case 0x2FC12FC1:  // ZFS
      return true;
    default:
      return false;
  }
}

// True when the stamp proves the file's last change came before `started_ns` (CLOCK_REALTIME,
// read before NVRTC began), so that NVRTC read the bytes there now. A local file system with
// nanosecond times stamps a change at most kStampLagNs behind the real time, so a change at
// or after the start is stamped no earlier than kStampLagNs before it. Other file systems
// (coarser times, a server's clock) and whole-second change times (an ext4 of small inodes;
// a fine stamp is a whole second once in a billion) need the racy window instead.
bool changed_before(const PathStamp& s, int64_t started_ns, bool nanosecond_fs) {
  const bool fine = nanosecond_fs && s.ctime_ns % 1000000000 != 0;
  const int64_t margin = fine ? kStampLagNs : int64_t(kRacySeconds) * 1000000000;
  return s.mtime_ns < started_ns - margin && s.ctime_ns < started_ns - margin;
}

}  // namespace

bool record_inputs(const AuditRecord& audit, const std::string& program, int64_t started_ns,
                   const std::vector<std::string>& skip_roots, std::vector<FileInput>* out,
                   std::string* why) {
  if (!audit.available || !audit.whole) {
    *why = "the files NVRTC read could not all be recorded";
    return false;
  }
  std::vector<std::string> roots;
  for (const std::string& r : skip_roots) roots.push_back(resolve_path(r));
  const std::string program_path = program.empty() ? std::string() : resolve_path(program);
  std::set<std::string> seen;
  const int64_t now_ns = realtime_ns();
  for (size_t i = 0; i < audit.opened.size(); ++i) {
    const OpenedFile& f = audit.opened[i];
    if (f.write || f.nvrtc_private || f.from_pch) continue;
    const std::string path = resolve_path(f.path);
    if (path_under_any(path, roots)) continue;
    // NVRTC's first look at the program's own name: it compiles the source it was given.
    if (i == 0 && !program_path.empty() && path == program_path) continue;
    if (f.directory) {
      *why = "NVRTC listed the directory " + path;
      return false;
    }
    if (!seen.insert(f.path).second) continue;
    FileInput in;
    in.path = path;
    in.opened = f.path;
    in.relative = f.relative;
    in.exists = f.ok;
    if (!stamp_path(f.path, &in.stamp)) {
      *why = "cannot stat " + f.path;
      return false;
    }
    if (!f.ok) {
      if (in.stamp.kind != 0) {
        *why = path + " appeared during the compile";
        return false;
      }
      out->push_back(std::move(in));
      continue;
    }
    const auto bytes = read_file(f.path);
    PathStamp after;
    if (!bytes || in.stamp.kind != 1 || !stamp_path(f.path, &after) ||
        !same_file_stamp(after, in.stamp)) {
      *why = path + " was modified around the time of the compile";
      return false;
    }
    // A file changed at or after the compile began may have been read by NVRTC in any state
    // between (a rewrite with the same bytes truncates it first): equal bytes before and
    // after prove nothing, so such a result is not stored.
    if (!changed_before(in.stamp, started_ns, nanosecond_times(f.path))) {
      const int64_t last = std::max(in.stamp.mtime_ns, in.stamp.ctime_ns);
      *why = path + " was modified while NVRTC was reading the program's files (last changed " +
             std::to_string((last - started_ns) / 1000) + " us after the compile began)";
      return false;
    }
    in.digest = to_hex(sha256(*bytes));
    // A settled stamp vouches for these bytes within this process (never in a record).
    if (stamp_settled(in.stamp, now_ns) && network_fs_type(f.path).empty()) {
      seen_files().add(in.stamp, in.digest);
    }
    out->push_back(std::move(in));
  }
  return true;
}

void forget_seen_files() {
  seen_files().clear();
}

bool inputs_hold(const std::vector<FileInput>& inputs, std::vector<PathStamp>* now, bool* settled) {
  LocalDirs dirs;
  std::string cwd;
  const int64_t now_ns = settled ? realtime_ns() : 0;
  if (settled) *settled = true;
  for (const FileInput& in : inputs) {
    PathStamp s;
    if (!stamp_path(in.opened, &s)) return false;
    if (!in.exists) {
      if (s.kind != 0) return false;
    } else {
      if (s.kind != 1) return false;
      const bool local = dirs.local(in.opened);
      if (!(local && seen_files().seen(s, in.digest))) {
        const auto bytes = read_file(in.opened);
        if (!bytes || to_hex(sha256(*bytes)) != in.digest) return false;
        // Remembered when the stamp is settled (a later edit shows in it) and the file did
        // not change while it was read.
        PathStamp after;
        if (local && stamp_settled(s, realtime_ns()) && stat_stamp(in.opened.c_str(), &after) &&
            same_file_stamp(after, s)) {
          seen_files().add(s, in.digest);
        }
      }
      if (settled && !(stamp_settled(s, now_ns) && dirs.local(in.opened))) *settled = false;
    }
    if (now) {
      if (in.opened.empty() || in.opened[0] != '/') {
        if (cwd.empty()) {
          char buf[4096];
          if (!getcwd(buf, sizeof buf)) return false;
          cwd = buf;
        }
        s.path = cwd + "/" + in.opened;
      } else {
        s.path = in.opened;
      }
      now->push_back(std::move(s));
    }
  }
  return true;
}

}  // namespace kjit
