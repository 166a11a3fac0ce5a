#include "key/dep_manifest.h"

#include <algorithm>
#include <cstdlib>

#include "key/builtin_std.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {

namespace {

constexpr const char* kMagic = "kjit-manifest 1\n";

// Fields are written as <decimal length>:<bytes>, so any byte may appear in a name.
void put(std::string* out, const std::string& s) {
  *out += std::to_string(s.size());
  *out += ':';
  *out += s;
}
void put(std::string* out, uint64_t v) {
  put(out, std::to_string(v));
}
void put(std::string* out, int64_t v) {
  put(out, std::to_string(v));
}

class Reader {
 public:
  explicit Reader(const std::string& s, size_t at) : s_(s), at_(at) {}
  bool str(std::string* v) {
    size_t n = 0, i = at_;
    if (i >= s_.size() || s_[i] < '0' || s_[i] > '9') return false;
    for (; i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; ++i) {
      if (n > (s_.size() >> 3)) return false;
      n = n * 10 + size_t(s_[i] - '0');
    }
    if (i >= s_.size() || s_[i] != ':' || s_.size() - i - 1 < n) return false;
    v->assign(s_, i + 1, n);
    at_ = i + 1 + n;
    return true;
  }
  bool u64(uint64_t* v) {
    std::string t;
    if (!str(&t) || t.empty() || t.size() > 20) return false;
    char* end = nullptr;
    *v = std::strtoull(t.c_str(), &end, 10);
    return end && *end == '\0' && t[0] != '-';
  }
  bool i64(int64_t* v) {
    std::string t;
    if (!str(&t) || t.empty() || t.size() > 20) return false;
    char* end = nullptr;
    *v = std::strtoll(t.c_str(), &end, 10);
    return end && *end == '\0';
  }
  bool done() const { return at_ == s_.size(); }

 private:
  const std::string& s_;
  size_t at_;
};

}  // namespace

std::string manifest_key(const std::string& base) {
  Sha256 h;
  h.field("kjit-manifest");
  h.field(base);
  return to_hex(h.finish());
}

std::string dep_entry_key(const std::string& base, const DepRecord& r, const std::string& cwd) {
  std::vector<const FileInput*> sorted;
  for (const FileInput& in : r.inputs) sorted.push_back(&in);
  std::sort(sorted.begin(), sorted.end(),
            [](const FileInput* a, const FileInput* b) { return a->opened < b->opened; });
  Sha256 h;
  h.field("kjit-entry-from-inputs");
  h.field(base);
  const bool any_relative = std::any_of(r.inputs.begin(), r.inputs.end(),
                                        [](const FileInput& in) { return in.relative; });
  h.field(any_relative ? cwd : std::string());
  h.u64(sorted.size());
  for (const FileInput* in : sorted) {
    h.field(in->opened);
    h.u64(in->exists ? 1 : 0);
    h.field(in->digest);
  }
  h.u64(r.builtins.size());
  if (!r.builtins.empty()) h.field(builtin_std_version());
  for (const std::string& name : r.builtins) h.field(name);
  return to_hex(h.finish());
}

bool make_dep_record(const AuditRecord& audit, const std::string& program, int64_t started_ns,
                     const std::vector<std::string>& skip_roots,
                     const std::vector<std::string>& extra_absent, const std::string& cwd,
                     DepRecord* out, std::string* why) {
  std::vector<FileInput> inputs;
  if (!record_inputs(audit, program, started_ns, skip_roots, &inputs, why)) return false;
  // A compile that used a precompiled header read its headers when the PCH was made: they
  // are inputs too, with the bytes read then, which must be the bytes now.
  std::vector<std::string> roots;
  for (const std::string& r : skip_roots) roots.push_back(resolve_path(r));
  for (const OpenedFile& f : audit.opened) {
    if (!f.from_pch) continue;
    // Covered by the toolkit's fingerprint in the base.
    if (path_under_any(resolve_path(f.path), roots)) continue;
    FileInput in;
    in.path = f.path;
    in.opened = f.path;
    in.relative = f.relative;  // named as a compile without the PCH names it
    in.exists = f.ok;
    if (!stamp_path(f.path, &in.stamp)) {
      *why = "cannot stat " + f.path;
      return false;
    }
    if (f.ok) {
      std::vector<FileInput> one{in};
      one[0].digest = f.digest;
      if (!inputs_hold(one)) {
        *why = "the precompiled header NVRTC used was made from other bytes of " + f.path +
               " than are there now";
        return false;
      }
      in.digest = f.digest;
    } else if (in.stamp.kind != 0) {
      *why = "the precompiled header NVRTC used was made when " + f.path + " did not exist";
      return false;
    }
    inputs.push_back(std::move(in));
  }
  for (const std::string& p : extra_absent) {
    FileInput in;
    in.path = p;
    in.opened = p;
    if (!stamp_path(p, &in.stamp) || in.stamp.kind != 0) {
      *why = p + " appeared during the compile";
      return false;
    }
    inputs.push_back(std::move(in));
  }
  // Names NVRTC used relative to the working directory are checked relative to it.
  const std::string prefix = cwd + "/";
  for (FileInput& in : inputs) {
    if (!in.relative) continue;
    if (cwd.empty() || in.opened.compare(0, prefix.size(), prefix) != 0) {
      *why = "the working directory changed during the compile";
      return false;
    }
    in.opened.erase(0, prefix.size());
  }
  // One input per name: the first look decides.
  std::vector<FileInput> unique;
  for (FileInput& in : inputs) {
    const bool seen = std::any_of(unique.begin(), unique.end(), [&](const FileInput& u) {
      return u.opened == in.opened && u.relative == in.relative;
    });
    if (!seen) unique.push_back(std::move(in));
  }
  out->inputs = std::move(unique);
  return true;
}

std::string manifest_text(const std::vector<DepRecord>& records) {
  std::string out = kMagic;
  put(&out, uint64_t(records.size()));
  for (const DepRecord& r : records) {
    put(&out, r.entry_key);
    put(&out, uint64_t(r.builtins.size()));
    for (const std::string& b : r.builtins) put(&out, b);
    put(&out, uint64_t(r.inputs.size()));
    for (const FileInput& in : r.inputs) {
      put(&out, in.opened);
      put(&out, in.path);
      put(&out, uint64_t((in.relative ? 1 : 0) | (in.exists ? 2 : 0)));
      put(&out, in.digest);
      put(&out, uint64_t(in.stamp.kind));
      put(&out, in.stamp.dev);
      put(&out, in.stamp.ino);
      put(&out, in.stamp.size);
      put(&out, in.stamp.mtime_ns);
      put(&out, in.stamp.ctime_ns);
    }
  }
  return out;
}

std::optional<std::vector<DepRecord>> parse_manifest(const std::string& text) {
  const std::string magic = kMagic;
  if (text.compare(0, magic.size(), magic) != 0) return std::nullopt;
  Reader r(text, magic.size());
  uint64_t n = 0;
  if (!r.u64(&n) || n > kMaxDepRecords) return std::nullopt;
  std::vector<DepRecord> out(n);
  for (DepRecord& rec : out) {
    uint64_t builtins = 0, inputs = 0;
    if (!r.str(&rec.entry_key) || rec.entry_key.size() != 64 || !r.u64(&builtins) ||
        builtins > 4096) {
      return std::nullopt;
    }
    rec.builtins.resize(builtins);
    for (std::string& b : rec.builtins) {
      if (!r.str(&b)) return std::nullopt;
    }
    if (!r.u64(&inputs) || inputs > text.size() / 10) return std::nullopt;
    rec.inputs.resize(inputs);
    for (FileInput& in : rec.inputs) {
      uint64_t flags = 0, kind = 0;
      if (!r.str(&in.opened) || in.opened.empty() || !r.str(&in.path) || !r.u64(&flags) ||
          !r.str(&in.digest) || !r.u64(&kind) || !r.u64(&in.stamp.dev) || !r.u64(&in.stamp.ino) ||
          !r.u64(&in.stamp.size) || !r.i64(&in.stamp.mtime_ns) || !r.i64(&in.stamp.ctime_ns) ||
          flags > 7 || kind > 3) {
        return std::nullopt;
      }
      in.relative = flags & 1;
      in.exists = flags & 2;
      // 4: "stamp settled when recorded", written before 0.3 and never read: a record's
      // stamp never vouches for bytes alone (inputs_hold).
      in.stamp.kind = int(kind);
      in.stamp.path = in.opened;
      if (in.exists != (in.digest.size() == 64) || in.relative == (in.opened[0] == '/')) {
        return std::nullopt;
      }
    }
  }
  if (!r.done()) return std::nullopt;
  return out;
}

}  // namespace kjit
