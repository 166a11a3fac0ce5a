#include "key/key.h"

#include <algorithm>
#include <map>

#include "key/builtin_std.h"
#include "store/entry.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {
namespace {

// The request's own part of the key: everything that affects the output except the files
// NVRTC reads (length-prefixed, versioned). `domain` separates the keys of programs that
// read no file ("kjit-key", hashed with their empty scan) from the base hashes of those
// that do (dep_manifest.h).
void hash_request(Sha256& h, const char* domain, const std::string& source,
                  const CompileOptions& opts, const NormalisedOptions& norm,
                  const std::string& toolchain) {
  h.field(domain);
  h.u64(kCacheFormatVersion);
  h.field(toolchain);
  h.field(norm.target);
  h.u64(norm.outputs);
  h.field(opts.name);
  h.field(source);
  auto headers = opts.headers;
  std::sort(headers.begin(), headers.end());
  h.u64(headers.size());
  for (const auto& [name, contents] : headers) {
    h.field(name);
    h.field(contents);
  }
  h.u64(norm.key.size());
  for (const auto& o : norm.key) h.field(o);
  h.u64(opts.name_expressions.size());
  for (const auto& e : opts.name_expressions) h.field(e);
  h.field(norm.toolkit_fingerprint);
}

}  // namespace

std::string compute_base(const std::string& source, const CompileOptions& opts,
                         const NormalisedOptions& norm, const std::string& toolchain) {
  Sha256 h;
  hash_request(h, "kjit-base", source, opts, norm, toolchain);
  // Whether built-in standard headers may be given: the records say which were.
  h.u64(norm.builtin_std ? 1 : 0);
  return to_hex(h.finish());
}

std::string compute_key(const std::string& source, const CompileOptions& opts,
                        const NormalisedOptions& norm, const std::string& toolchain,
                        const IncludeScan& scan) {
  Sha256 h;
  hash_request(h, "kjit-key", source, opts, norm, toolchain);
  h.u64(scan.files.size());
  for (const auto& f : scan.files) {
    h.field(f.path);
    h.field(f.digest);  // SHA-256 of the bytes, computed once per version of the file
  }
  if (!scan.builtins.empty()) {  // only programs that use the built-in headers carry them
    h.field("builtin-std");
    h.field(builtin_std_version());
    h.u64(scan.builtins.size());
    for (const auto& name : scan.builtins) h.field(name);
  }
  return to_hex(h.finish());
}

bool writes_source_paths(const NormalisedOptions& norm) {
  for (const std::string& o : norm.key) {
    for (const char* p : {"-G", "--device-debug", "-lineinfo", "--generate-line-info"}) {
      if (o == p || o.rfind(std::string(p) + "=", 0) == 0) return true;
    }
  }
  return false;
}

std::string uncovered(const IncludeScan& scan, const AuditRecord* audit,
                      const std::string& program_name, const NormalisedOptions& norm) {
  if (!audit) {
    return scan.reads_files() ? "the files NVRTC reads cannot be audited on this system" : "";
  }
  if (!audit->whole) {
    return "NVRTC opened files in a way that cannot be audited (another thread or program)";
  }
  if (!audit->doubt.empty()) return audit->doubt;
  std::vector<std::string> roots;
  for (const std::string& r : norm.skip_roots) roots.push_back(resolve_path(r));
  const auto& opened = audit->opened;
  for (size_t i = 0; i < opened.size(); ++i) {
    const OpenedFile& f = opened[i];
    if (f.write) continue;
    const std::string path = resolve_path(f.path);
    if (i == 0 && !program_name.empty() && path == resolve_path(program_name)) continue;
    if (f.nvrtc_private || path_under_any(path, roots)) continue;
    bool covered;
    if (f.directory) {
      covered =
          path_under_any(path, std::vector<std::string>(scan.listed.begin(), scan.listed.end()));
    } else {
      covered = scan_covers(scan, path, f.ok);
    }
    if (!covered) {
      return std::string(f.from_pch ? "the precompiled header NVRTC used was made after NVRTC "
                                    : "NVRTC ") +
             (f.ok ? "read " : "looked for ") + path + ", which the cache key does not cover";
    }
    if (f.from_pch) {
      // Read when the PCH was made: those bytes must be the ones the key covers.
      if (!f.ok) continue;
      bool same = false;
      for (const auto& file : scan.files)
        same = same || (file.path == path && file.digest == f.digest);
      if (!same) {
        return "the precompiled header NVRTC used was made from other bytes of " + path +
               " than the cache key covers";
      }
      continue;
    }
    if (f.ok && !f.directory) {
      for (const auto& file : scan.files) {
        if (file.path != path) continue;
        const auto now = read_file(path);
        if (!now || *now != *file.content) return path + " changed during the compile";
      }
    }
  }
  return "";
}

IncludeScan scan_for(const std::string& source, const CompileOptions& opts,
                     const NormalisedOptions& norm, bool read_directories) {
  IncludeScanInput in;
  in.source = source;
  in.program_name = opts.name;
  in.headers = opts.headers;
  in.include_paths = norm.include_paths;
  in.pre_includes = norm.pre_includes;
  in.defines = norm.defines;
  in.skip_roots = norm.skip_roots;
  in.toolkit_includes = norm.toolkit_dirs;
  in.builtin_std = norm.builtin_std;
  in.read_directories = read_directories;
  return scan_includes(in);
}

std::vector<std::string> builtin_shadow_places(const IncludeScan& scan) {
  std::vector<std::string> out;
  for (const std::string& place : scan.absent) {
    for (const std::string& name : scan.builtins) {
      for (const std::string& tail : {"/" + name, "/" + name + ".stdh"}) {
        if (place.size() > tail.size() &&
            place.compare(place.size() - tail.size(), tail.size(), tail) == 0) {
          out.push_back(place);
        }
      }
    }
  }
  return out;
}

std::vector<PathStamp> memo_stamps(std::vector<PathStamp> now) {
  std::vector<PathStamp> out;
  std::map<std::string, bool> dirs;  // directory -> its stamp vouches (and was added)
  const int64_t now_ns = realtime_ns();
  for (PathStamp& s : now) {
    const size_t slash = s.path.rfind('/');
    if (s.kind != 0 || slash == std::string::npos || slash == 0) {
      out.push_back(std::move(s));
      continue;
    }
    const std::string dir = s.path.substr(0, slash);
    auto it = dirs.find(dir);
    if (it == dirs.end()) {
      PathStamp d;
      const bool vouches = stamp_path(dir, &d) && d.kind == 2 && stamp_settled(d, now_ns) &&
                           network_fs_type(dir).empty();
      if (vouches) {
        d.listing = true;
        out.push_back(std::move(d));
      }
      it = dirs.emplace(dir, vouches).first;
    }
    if (!it->second) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kjit
