#include "compile/include_scan.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>

#include "util/fs.h"

namespace kjit {
namespace {

// Memo of file contents and their include directives, keyed by path and validated by
// stat identity, so repeated key computations read each header once.
struct FileInfo {
  std::string identity;
  std::string content;
  std::vector<std::string> includes;
};

std::mutex g_memo_mu;
std::unordered_map<std::string, FileInfo> g_memo;

bool load(const std::string& path, FileInfo* out) {
  const std::string id = file_identity(path);
  if (id.empty()) return false;
  {
    std::lock_guard<std::mutex> lock(g_memo_mu);
    auto it = g_memo.find(path);
    if (it != g_memo.end() && it->second.identity == id) {
      *out = it->second;
      return true;
    }
  }
  auto content = read_file(path);
  if (!content) return false;
  FileInfo info{id, std::move(*content), {}};
  info.includes = scan_include_directives(info.content);
  // Re-check the identity: a file rewritten while we read it is read again next time.
  if (file_identity(path) == id) {
    std::lock_guard<std::mutex> lock(g_memo_mu);
    if (g_memo.size() > 4096) g_memo.clear();
    g_memo[path] = info;
  }
  *out = std::move(info);
  return true;
}

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

bool under(const std::string& path, const std::string& root) {
  return !root.empty() && path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

// All regular files below `dir` (bounded), for computed includes.
void list_files(const std::string& dir, std::vector<std::string>* out, size_t limit) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (out->size() >= limit) return;
    const std::string p = join_path(dir, name);
    if (is_directory(p)) {
      list_files(p, out, limit);
    } else if (is_regular_file(p)) {
      out->push_back(p);
    }
  }
}

// Real path of a directory, memoised (include directories are few and stable).
std::string real_dir(const std::string& dir) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::string> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find(dir);
  if (it != memo.end()) return it->second;
  if (memo.size() > 1024) memo.clear();
  return memo[dir] = real(dir);
}

}  // namespace

std::vector<std::string> scan_include_directives(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    // At the start of a line: skip blanks, expect '#'.
    size_t p = i;
    while (p < n && (text[p] == ' ' || text[p] == '\t')) ++p;
    if (p < n && text[p] == '#') {
      ++p;
      while (p < n && (text[p] == ' ' || text[p] == '\t')) ++p;
      size_t word = p;
      while (p < n && std::isalpha(static_cast<unsigned char>(text[p]))) ++p;
      std::string directive = text.substr(word, p - word);
      if (directive == "include" && p < n && text[p] == '_') {
        // #include_next
        size_t q = p + 1;
        while (q < n && std::isalpha(static_cast<unsigned char>(text[q]))) ++q;
        directive = text.substr(word, q - word);
        p = q;
      }
      if (directive == "include" || directive == "include_next") {
        while (p < n && (text[p] == ' ' || text[p] == '\t')) ++p;
        if (p < n && (text[p] == '"' || text[p] == '<')) {
          const char close = text[p] == '"' ? '"' : '>';
          const size_t start = p + 1;
          const size_t end = text.find_first_of(std::string(1, close) + "\n", start);
          if (end != std::string::npos && text[end] == close && end > start) {
            out.push_back(text.substr(start, end - start));
          } else {
            out.emplace_back();
          }
        } else {
          out.emplace_back();  // computed include
        }
      }
    }
    const size_t nl = text.find('\n', i);
    if (nl == std::string::npos) break;
    i = nl + 1;
  }
  return out;
}

std::vector<IncludedFile> find_included_files(const IncludeScanInput& in) {
  std::vector<IncludedFile> out;
  std::set<std::string> seen_files;
  std::set<std::string> memory_names;
  for (const auto& [name, contents] : in.headers) memory_names.insert(name);
  const std::string skip = in.skip_root.empty() ? "" : real_dir(in.skip_root);
  bool computed = false;
  // Include directories inside the CUDA toolkit are covered by the NVRTC version.
  std::vector<std::string> include_paths;
  for (const std::string& dir : in.include_paths) {
    const std::string r = real_dir(dir);
    if (r != skip && !under(r, skip)) include_paths.push_back(dir);
  }

  struct Item {
    std::vector<std::string> includes;
    std::string dir;
  };
  std::deque<Item> queue;
  std::set<std::string> scanned_memory;
  std::vector<std::string> first = scan_include_directives(in.source);
  first.insert(first.end(), in.pre_includes.begin(), in.pre_includes.end());
  queue.push_back({first, in.program_dir});

  auto visit_file = [&](const std::string& path) {
    const std::string resolved = real(path);
    if (under(resolved, skip)) return;
    if (!seen_files.insert(resolved).second) return;
    FileInfo info;
    if (!load(resolved, &info)) return;
    out.push_back({resolved, info.content});
    queue.push_back({info.includes, dirname_of(resolved)});
  };

  auto drain = [&]() {
    while (!queue.empty()) {
      Item item = std::move(queue.front());
      queue.pop_front();
      for (const std::string& inc : item.includes) {
        if (inc.empty()) {
          computed = true;
          continue;
        }
        // In-memory headers are hashed by the caller; scan their own includes once.
        if (memory_names.count(inc) && scanned_memory.insert(inc).second) {
          for (const auto& [name, contents] : in.headers) {
            if (name == inc) queue.push_back({scan_include_directives(contents), item.dir});
          }
        }
        // Every candidate location, not only the one NVRTC would pick: conservative.
        if (inc[0] == '/') {
          visit_file(inc);
          continue;
        }
        if (!item.dir.empty()) visit_file(join_path(item.dir, inc));
        for (const std::string& dir : include_paths) visit_file(join_path(dir, inc));
      }
    }
  };
  drain();
  // A computed include (#include MACRO) could name any file in the include paths.
  if (computed) {
    for (const std::string& dir : include_paths) {
      std::vector<std::string> files;
      list_files(dir, &files, 20000);
      for (const auto& f : files) visit_file(f);
    }
    drain();
  }
  return out;
}

}  // namespace kjit
