#include "key/toolkit.h"

#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>

#include "key/include_scan.h"
#include "key/toolchain.h"
#include "store/facts.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/wire.h"

namespace kjit {
namespace {

std::string target_triple_dir() {
  utsname u;
  const std::string machine = uname(&u) == 0 ? u.machine : "x86_64";
  if (machine == "aarch64") return "sbsa-linux";
  return machine + "-linux";
}

// Every file-system question discovery asks, answered and stamped, so that a discovery
// can be kept across processes and trusted while the stamps hold (paths_unchanged()).
class Looker {
 public:
  bool is_directory(const std::string& p) { return stamp(p).kind == 2; }
  bool is_file(const std::string& p) { return stamp(p).kind == 1; }
  std::string resolve(const std::string& p) {
    stamp(p);
    std::string real = resolve_path(p);
    stamp(real);  // a directory renamed keeps its inode but not its real path
    return real;
  }
  std::optional<std::string> read(const std::string& p) {
    const PathStamp& s = stamp(p);
    if (s.kind != 1) return std::nullopt;
    if (!trusted(s)) keep_ = false;
    return read_file(p);
  }
  // The names in directory `p`, sorted (none where it is not a directory).
  std::vector<std::string> list(const std::string& p) {
    std::vector<std::string> names;
    PathStamp& s = stamp(p);
    s.listing = true;
    if (s.kind != 2) return names;
    if (!trusted(s)) keep_ = false;
    return directory_names(p).value_or(names);
  }
  // True when the stamps decide every answer (nothing changed within kRacySeconds).
  bool keepable() const { return keep_; }
  std::vector<PathStamp>& looked() { return looked_; }

 private:
  // Its stamp will show a later change: not changed within kRacySeconds, and not on a
  // network file system (whose stat() may answer from a stale attribute cache).
  bool trusted(const PathStamp& s) const {
    return stamp_settled(s, now_) && network_fs_type(s.path).empty();
  }

  PathStamp& stamp(const std::string& p) {
    for (PathStamp& s : looked_) {
      if (s.path == p) return s;
    }
    looked_.emplace_back();
    if (!stamp_path(p, &looked_.back())) keep_ = false;
    return looked_.back();
  }

  const int64_t now_ = realtime_ns();
  std::vector<PathStamp> looked_;
  bool keep_ = true;
};

// Include directories under a toolkit root, CCCL first (it overrides the older copies of
// libcu++ that some toolkits also keep in include/).
std::vector<std::string> include_dirs_of(const std::string& root, Looker& fs) {
  std::vector<std::string> out;
  for (const std::string& base : {join_path(root, "include"),
                                  join_path(root, "targets/" + target_triple_dir() + "/include")}) {
    for (const std::string& dir : {join_path(base, "cccl"), base}) {
      if (!fs.is_directory(dir)) continue;
      const std::string real = fs.resolve(dir);
      if (std::find(out.begin(), out.end(), real) == out.end()) out.push_back(real);
    }
  }
  // Without the toolkit's own headers this is not a usable toolkit.
  bool runtime = false;
  for (const std::string& dir : out) runtime = runtime || fs.is_file(join_path(dir, "cuda_fp16.h"));
  if (!runtime) out.clear();
  return out;
}

std::string fingerprint_of(const std::string& root, const std::vector<std::string>& dirs,
                           Looker& fs) {
  Sha256 h;
  h.field("kjit-toolkit");
  h.u64(dirs.size());
  for (const std::string& d : dirs) {
    h.field(d);
    const auto cccl = fs.read(join_path(d, "cuda/std/__cccl/version.h"));
    h.field(cccl ? *cccl : std::string());
  }
  for (const char* name : {"version.json", "version.txt"}) {
    const auto v = fs.read(join_path(root, name));
    h.field(v ? *v : std::string());
  }
  // Toolkits assembled from wheels keep each component's version in its dist-info name.
  const std::vector<std::string> infos = fs.list(join_path(root, "dist-info"));  // sorted
  h.u64(infos.size());
  for (const std::string& n : infos) h.field(n);
  return to_hex(h.finish());
}

std::vector<std::pair<std::string, std::string>> candidates_for(const std::string& explicit_root) {
  std::vector<std::pair<std::string, std::string>> candidates;
  if (!explicit_root.empty()) {
    candidates.emplace_back("option", explicit_root);
  } else {
    for (const char* var : {"KJIT_CUDA_HOME", "CUDA_PATH", "CUDA_HOME"}) {
      const char* v = std::getenv(var);
      if (v && *v) candidates.emplace_back(var, v);
    }
    candidates.emplace_back("libnvrtc", toolkit_root());
  }
  return candidates;
}

Toolkit discover(const std::vector<std::pair<std::string, std::string>>& candidates, Looker& fs) {
  Toolkit t;
  for (const auto& [how, root] : candidates) {
    if (root.empty()) continue;
    std::vector<std::string> dirs = include_dirs_of(root, fs);
    if (dirs.empty()) {
      // A choice made for kjit that holds no headers is reported (the caller sees it in
      // find_toolkit's result), not replaced by another toolkit silently.
      if (how == "option" || how == "KJIT_CUDA_HOME") {
        t.found_by = how;
        t.root = fs.resolve(root);
        return t;
      }
      continue;
    }
    t.found_by = how;
    t.root = fs.resolve(root);
    t.include_dirs = std::move(dirs);
    t.fingerprint = fingerprint_of(t.root, t.include_dirs, fs);
    return t;
  }
  return t;
}

// ---- the record kept in the cache database ---------------------------------------------

// The text fields of the record's name ("<bytes>:<text>"), so that any path can be held.
void put_field(std::string* out, const std::string& v) {
  *out += std::to_string(v.size());
  *out += ':';
  *out += v;
}

void put_stamp(WireWriter& w, const PathStamp& s) {
  w.str(s.path);
  w.u32(uint32_t(s.kind));
  w.u32(s.listing ? 1 : 0);
  w.u64(s.dev);
  w.u64(s.ino);
  w.u64(s.size);
  w.u64(uint64_t(s.mtime_ns));
  w.u64(uint64_t(s.ctime_ns));
}

PathStamp get_stamp(WireReader& r) {
  PathStamp s;
  s.path = r.str();
  const uint32_t kind = r.u32();
  if (kind > 3) throw WireError("unknown path kind");
  s.kind = int(kind);
  s.listing = r.boolean();
  s.dev = r.u64();
  s.ino = r.u64();
  s.size = r.u64();
  s.mtime_ns = int64_t(r.u64());
  s.ctime_ns = int64_t(r.u64());
  return s;
}

}  // namespace

std::string encode_toolkit_record(const Toolkit& t, const std::vector<PathStamp>& looked) {
  WireWriter w;
  w.str(kToolkitMagic);
  w.u32(kToolkitRecordVersion);
  w.str(t.root);
  w.str(t.found_by);
  w.str(t.fingerprint);
  w.strs(t.include_dirs);
  w.u64(looked.size());
  for (const PathStamp& s : looked) put_stamp(w, s);
  return std::move(w.bytes());
}

bool decode_toolkit_record(const std::string& record, Toolkit* t, std::vector<PathStamp>* looked) {
  try {
    WireReader r(record);
    if (r.str() != kToolkitMagic || r.u32() != kToolkitRecordVersion) return false;
    Toolkit got;
    got.root = r.str();
    got.found_by = r.str();
    got.fingerprint = r.str();
    got.include_dirs = r.strs();
    std::vector<PathStamp> stamps(r.count());
    for (PathStamp& s : stamps) s = get_stamp(r);
    r.finish();
    *t = std::move(got);
    *looked = std::move(stamps);
    return true;
  } catch (const WireError&) {
    return false;
  }
}

namespace {

// The discovery for these candidates: the record kept in `facts` while what it looked at
// stats the same, else a new discovery (kept there when nothing it read was changing).
Toolkit find(const std::string& explicit_root, Facts* facts) {
  const auto candidates = candidates_for(explicit_root);
  const std::string name = toolkit_record_name(explicit_root);
  if (facts) {
    if (auto record = facts->get(name)) {
      Toolkit t;
      std::vector<PathStamp> looked;
      if (decode_toolkit_record(*record, &t, &looked) && paths_unchanged(looked)) return t;
    }
  }
  Looker fs;
  Toolkit t = discover(candidates, fs);
  if (facts && fs.keepable()) facts->set(name, encode_toolkit_record(t, fs.looked()));
  return t;
}

}  // namespace

std::string toolkit_record_name(const std::string& explicit_root) {
  std::string name = "toolkit-2:";
  for (const auto& [how, root] : candidates_for(explicit_root)) {
    put_field(&name, how);
    put_field(&name, root);
  }
  return name;
}

namespace {

// The automatic toolkit (nullptr: not found yet), and those of explicit roots. A reset
// leaves the toolkits it forgets allocated, so that references handed out stay valid.
std::atomic<const Toolkit*> g_automatic{nullptr};
std::mutex g_toolkits_mu;  // held to find one, and for g_named
std::map<std::string, const Toolkit*> g_named;

}  // namespace

const Toolkit& find_toolkit(const std::string& explicit_root, Facts* facts) {
  // The automatic one is asked for on every compile and hit: no lock once it is known.
  if (explicit_root.empty()) {
    if (const Toolkit* known = g_automatic.load(std::memory_order_acquire)) return *known;
  }
  std::lock_guard<std::mutex> lock(g_toolkits_mu);
  if (explicit_root.empty()) {
    if (const Toolkit* known = g_automatic.load(std::memory_order_acquire)) return *known;
    const Toolkit* found = new Toolkit(find("", facts));
    g_automatic.store(found, std::memory_order_release);
    return *found;
  }
  const Toolkit*& slot = g_named[explicit_root];
  if (!slot) slot = new Toolkit(find(explicit_root, facts));
  return *slot;
}

void reset_toolkits() {
  std::lock_guard<std::mutex> lock(g_toolkits_mu);
  g_automatic.store(nullptr, std::memory_order_release);
  g_named.clear();
}

}  // namespace kjit
