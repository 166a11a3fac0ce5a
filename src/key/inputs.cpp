#include "key/inputs.h"

#include <unistd.h>

#include <set>

#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {

namespace {

bool same_file_stamp(const PathStamp& a, const PathStamp& b) {
  return a.kind == b.kind && a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
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

// True when the stamp shows no change after `started_ns` (CLOCK_REALTIME). A file system
// that keeps nanoseconds stamps a change with the kernel's coarse clock, at most a tick
// (a few ms) behind: 50 ms before the start are enough there. Whole seconds (a file system
// with coarse times, or one in a billion fine stamps) need the racy window.
bool modified_before(const PathStamp& s, int64_t started_ns) {
  constexpr int64_t kSecond = 1000000000;
  const bool fine = s.mtime_ns % kSecond != 0 && s.ctime_ns % kSecond != 0;
  const int64_t margin = fine ? 50 * 1000000 : int64_t(kRacySeconds) * kSecond;
  return s.mtime_ns < started_ns - margin && s.ctime_ns < started_ns - margin;
}

}  // namespace

bool record_inputs(const AuditRecord& audit, const std::string& program, int64_t started_ns,
                   const std::map<std::string, std::shared_ptr<const std::string>>* before,
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
    in.digest = to_hex(sha256(*bytes));
    if (!stamp_settled(in.stamp, started_ns) && !(before && f.digest == in.digest) &&
        !(before && modified_before(in.stamp, started_ns) && network_fs_type(f.path).empty())) {
      // Modified shortly before the compile (or during it): the bytes NVRTC opened (the
      // audit's snapshot) or read before the compile began must be the bytes now.
      const auto it = before ? before->find(path) : decltype(before->end()){};
      if (!before || it == before->end() || !it->second || *it->second != *bytes) {
        *why = path + " was modified around the time of the compile";
        return false;
      }
    }
    in.trusted = stamp_settled(in.stamp, now_ns);
    out->push_back(std::move(in));
  }
  return true;
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
      const bool same = in.trusted && same_file_stamp(s, in.stamp) && dirs.local(in.opened);
      if (!same) {
        const auto bytes = read_file(in.opened);
        if (!bytes || to_hex(sha256(*bytes)) != in.digest) return false;
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
