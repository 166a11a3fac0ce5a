#include "compile/toolkit.h"

#include <dirent.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "compile/include_scan.h"
#include "compile/toolchain.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {
namespace {

std::string target_triple_dir() {
  utsname u;
  const std::string machine = uname(&u) == 0 ? u.machine : "x86_64";
  if (machine == "aarch64") return "sbsa-linux";
  return machine + "-linux";
}

// Include directories under a toolkit root, CCCL first (it overrides the older copies of
// libcu++ that some toolkits also keep in include/).
std::vector<std::string> include_dirs_of(const std::string& root) {
  std::vector<std::string> out;
  for (const std::string& base : {join_path(root, "include"),
                                  join_path(root, "targets/" + target_triple_dir() + "/include")}) {
    for (const std::string& dir : {join_path(base, "cccl"), base}) {
      if (!is_directory(dir)) continue;
      const std::string real = resolve_path(dir);
      if (std::find(out.begin(), out.end(), real) == out.end()) out.push_back(real);
    }
  }
  // Without the toolkit's own headers this is not a usable toolkit.
  bool runtime = false;
  for (const std::string& dir : out)
    runtime = runtime || is_regular_file(join_path(dir, "cuda_fp16.h"));
  if (!runtime) out.clear();
  return out;
}

std::string fingerprint_of(const std::string& root, const std::vector<std::string>& dirs) {
  Sha256 h;
  h.field("kjit-toolkit");
  h.u64(dirs.size());
  for (const std::string& d : dirs) {
    h.field(d);
    const auto cccl = read_file(join_path(d, "cuda/std/__cccl/version.h"));
    h.field(cccl ? *cccl : std::string());
  }
  for (const char* name : {"version.json", "version.txt"}) {
    const auto v = read_file(join_path(root, name));
    h.field(v ? *v : std::string());
  }
  // Toolkits assembled from wheels keep each component's version in its dist-info name.
  std::vector<std::string> infos;
  if (DIR* d = opendir(join_path(root, "dist-info").c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") infos.push_back(n);
    }
    closedir(d);
  }
  std::sort(infos.begin(), infos.end());
  h.u64(infos.size());
  for (const std::string& n : infos) h.field(n);
  return to_hex(h.finish());
}

Toolkit discover(const std::string& explicit_root) {
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
  Toolkit t;
  for (const auto& [how, root] : candidates) {
    if (root.empty()) continue;
    std::vector<std::string> dirs = include_dirs_of(root);
    if (dirs.empty()) {
      // A choice made for kjit that holds no headers is reported (the caller sees it in
      // find_toolkit's result), not replaced by another toolkit silently.
      if (how == "option" || how == "KJIT_CUDA_HOME") {
        t.found_by = how;
        t.root = resolve_path(root);
        return t;
      }
      continue;
    }
    t.found_by = how;
    t.root = resolve_path(root);
    t.include_dirs = std::move(dirs);
    t.fingerprint = fingerprint_of(t.root, t.include_dirs);
    return t;
  }
  return t;
}

}  // namespace

const Toolkit& find_toolkit(const std::string& explicit_root) {
  // The automatic one is asked for on every compile and hit: no lock once it is known.
  if (explicit_root.empty()) {
    static const Toolkit automatic = discover("");
    return automatic;
  }
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Toolkit>> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = memo[explicit_root];
  if (!slot) slot = std::make_unique<Toolkit>(discover(explicit_root));
  return *slot;
}

}  // namespace kjit
