#include "key/include_scan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "key/builtin_std.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {
namespace {

// ---------------------------------------------------------------------------------------
// Directive scanning

// Translation phase 2: backslash-newline (also backslash-CR-LF) joins lines.
std::string splice_lines(const std::string& text) {
  if (text.find('\\') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  const size_t n = text.size();
  size_t from = 0;  // the text up to the next backslash is copied as it is
  for (size_t i = text.find('\\'); i != std::string::npos; i = text.find('\\', i + 1)) {
    size_t splice = 0;  // the backslash and its newline
    if (i + 1 < n && text[i + 1] == '\n') splice = 2;
    if (i + 2 < n && text[i + 1] == '\r' && text[i + 2] == '\n') splice = 3;
    if (splice == 0) continue;
    out.append(text, from, i - from);
    from = i + splice;
    i = from - 1;
  }
  out.append(text, from, std::string::npos);
  return out;
}

// ASCII letters, '_' and every byte of a multi-byte character (no locale: the scan reads
// every byte of every header, and these run once per byte).
bool ident_start(unsigned char c) {
  return unsigned((c | 0x20) - 'a') < 26 || c == '_' || c >= 0x80;
}
bool ident_char(unsigned char c) {
  return ident_start(c) || unsigned(c - '0') < 10;
}
bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Skips blanks and comments from p; a block comment may span lines, a line comment ends
// the scan at its newline.
size_t skip_space(const std::string& t, size_t p) {
  const size_t n = t.size();
  while (p < n) {
    if (blank(t[p])) {
      ++p;
    } else if (t.compare(p, 2, "/*") == 0) {
      const size_t end = t.find("*/", p + 2);
      p = end == std::string::npos ? n : end + 2;
    } else if (t.compare(p, 2, "//") == 0) {
      const size_t end = t.find('\n', p);
      p = end == std::string::npos ? n : end;
    } else {
      break;
    }
  }
  return p;
}

// A header-name operand at p ("name" or <name>), else a computed reference (with its
// macro's name when the operand is one identifier followed by `end` or the line's end).
// *next receives the position after the operand.
IncludeRef header_name(const std::string& t, size_t p, char end = '\n', size_t* next = nullptr) {
  IncludeRef ref;
  size_t after = p;
  if (p < t.size() && (t[p] == '"' || t[p] == '<')) {
    const char close = t[p] == '"' ? '"' : '>';
    const size_t stop = t.find_first_of(std::string(1, close) + "\n", p + 1);
    if (stop != std::string::npos && t[stop] == close && stop > p + 1) {
      ref.name = t.substr(p + 1, stop - p - 1);
      ref.angled = close == '>';
      after = stop + 1;
    }
  } else if (p < t.size() && ident_start(static_cast<unsigned char>(t[p]))) {
    size_t q = p;
    while (q < t.size() && ident_char(static_cast<unsigned char>(t[q]))) ++q;
    const size_t r = skip_space(t, q);
    if (r >= t.size() || t[r] == '\n' || t[r] == end) ref.macro = t.substr(p, q - p);
    after = q;
  }
  if (next) *next = after;
  return ref;
}

// After '#' (or '%:') at p: an include-like directive adds its reference, a #define its
// macro.
void directive(const std::string& t, size_t p, Directives* out) {
  p = skip_space(t, p);
  const size_t word = p;
  while (p < t.size() && ident_char(static_cast<unsigned char>(t[p]))) ++p;
  const std::string name = t.substr(word, p - word);
  if (name == "include" || name == "include_next" || name == "import" || name == "embed") {
    out->refs.push_back(header_name(t, skip_space(t, p)));
  } else if (name == "define") {
    p = skip_space(t, p);
    const size_t m = p;
    while (p < t.size() && ident_char(static_cast<unsigned char>(t[p]))) ++p;
    if (p == m) return;
    const std::string macro = t.substr(m, p - m);
    if (p < t.size() && t[p] == '(') {
      out->defines.emplace_back(macro, "");  // function-like
      return;
    }
    const size_t body = skip_space(t, p);
    size_t eol = t.find('\n', body);
    if (eol == std::string::npos) eol = t.size();
    std::string text = t.substr(body, eol - body);
    while (!text.empty() && blank(text.back())) text.pop_back();
    out->defines.emplace_back(macro, text);
  }
}

// After the identifier __has_include / __has_include_next at p.
void has_include(const std::string& t, size_t p, Directives* out) {
  p = skip_space(t, p);
  if (p >= t.size() || t[p] != '(') return;  // e.g. "#ifdef __has_include"
  out->refs.push_back(header_name(t, skip_space(t, p + 1), ')'));
}

bool is_has_include(std::string_view word) {
  return word == "__has_include" || word == "__has_include_next";
}

// Pass 1: a tokenizer that knows comments, string and character literals (raw strings and
// digit separators included) and finds directives only at the start of a line.
void lex_pass(const std::string& t, Directives* out) {
  const size_t n = t.size();
  size_t i = 0;
  bool line_start = true;
  while (i < n) {
    const char c = t[i];
    if (c == '\n') {
      line_start = true;
      ++i;
    } else if (blank(c)) {
      ++i;
    } else if (c == '/' && t.compare(i, 2, "/*") == 0) {
      const size_t end = t.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? n : end + 2;
      // A directive may follow a comment that spans lines: count it as a line start.
      if (t.find('\n', i) < stop) line_start = true;
      i = stop;
    } else if (c == '/' && t.compare(i, 2, "//") == 0) {
      const size_t end = t.find('\n', i);
      i = end == std::string::npos ? n : end;
    } else if (c == '#' || (c == '%' && t.compare(i, 2, "%:") == 0)) {
      const size_t after = i + (c == '#' ? 1 : 2);
      if (line_start) directive(t, after, out);
      line_start = false;
      i = after;
    } else if (ident_start(static_cast<unsigned char>(c))) {
      const size_t word = i;
      while (i < n && ident_char(static_cast<unsigned char>(t[i]))) ++i;
      const std::string_view id(t.data() + word, i - word);
      line_start = false;
      if (is_has_include(id)) {
        has_include(t, i, out);
      } else if (i < n && t[i] == '"' && !id.empty() && id.back() == 'R' &&
                 (id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR")) {
        // Raw string: R"delim( ... )delim"
        const size_t open = t.find('(', i + 1);
        if (open != std::string::npos && open - i - 1 <= 16) {
          const std::string close = ")" + t.substr(i + 1, open - i - 1) + "\"";
          const size_t end = t.find(close, open + 1);
          if (end != std::string::npos) i = end + close.size();
        }
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(t[i + 1])))) {
      // pp-number, with digit separators (1'000) and exponent signs.
      ++i;
      while (i < n) {
        const unsigned char d = static_cast<unsigned char>(t[i]);
        if ((d == 'e' || d == 'E' || d == 'p' || d == 'P') && i + 1 < n &&
            (t[i + 1] == '+' || t[i + 1] == '-')) {
          i += 2;
        } else if (d == '\'' && i + 1 < n && ident_char(static_cast<unsigned char>(t[i + 1]))) {
          i += 2;
        } else if (ident_char(d) || d == '.') {
          ++i;
        } else {
          break;
        }
      }
      line_start = false;
    } else if (c == '"' || c == '\'') {
      // A literal ends at its unescaped closing quote, never past the line.
      ++i;
      while (i < n && t[i] != c && t[i] != '\n') i += (t[i] == '\\' && i + 1 < n) ? 2 : 1;
      if (i < n && t[i] == c) ++i;
      line_start = false;
    } else {
      ++i;
      line_start = false;
    }
  }
}

// Pass 2: line by line, with no knowledge of literals: a directive hidden from pass 1 by
// a literal or comment it misread is still found here. The union only over-includes.
void line_pass(const std::string& t, Directives* out) {
  size_t i = 0;
  const size_t n = t.size();
  while (i < n) {
    size_t eol = t.find('\n', i);
    if (eol == std::string::npos) eol = n;
    size_t p = i;
    for (;;) {  // blanks and comments that close on this line
      while (p < eol && blank(t[p])) ++p;
      if (t.compare(p, 2, "/*") != 0) break;
      const size_t end = t.find("*/", p + 2);
      if (end == std::string::npos || end >= eol) break;
      p = end + 2;
    }
    if (p < eol && t[p] == '#') directive(t, p + 1, out);
    if (p + 1 < eol && t.compare(p, 2, "%:") == 0) directive(t, p + 2, out);
    i = eol + 1;
  }
  for (size_t p = t.find("__has_include"); p != std::string::npos;
       p = t.find("__has_include", p + 1)) {
    size_t end = p;
    while (end < n && ident_char(static_cast<unsigned char>(t[end]))) ++end;
    if (is_has_include(std::string_view(t.data() + p, end - p))) has_include(t, end, out);
  }
}

// ---------------------------------------------------------------------------------------
// Files

// A file as read, with its references. Kept across scans while stat() says it is the same
// file and it was not modified within kRacySeconds of being read: a file rewritten within
// one timestamp tick (same size, same mtime) would otherwise look unchanged (kRacySeconds).

// The stamp of `path` without its name; false when stat() failed for another reason than
// the path's absence.

// The stamp of a regular file; false for anything else.
bool file_stamp(const std::string& path, PathStamp* s) {
  return stat_stamp(path.c_str(), s) && s->kind == 1;
}

bool same_stamp(const PathStamp& a, const PathStamp& b) {
  return a.kind == b.kind && a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

struct FileInfo {
  PathStamp stamp;       // without its path
  bool settled = false;  // last modified well before it was read: the memo may be trusted
  std::shared_ptr<const std::string> content;
  std::string digest;  // SHA-256 of the content
  Directives directives;
};

using FilePtr = std::shared_ptr<const FileInfo>;

std::mutex g_memo_mu;
std::unordered_map<std::string, FilePtr> g_memo;

// The file at `path` as read now (or remembered), nullptr when it is not a readable
// regular file.
FilePtr load(const std::string& path) {
  PathStamp before;
  if (!file_stamp(path, &before)) return nullptr;
  {
    std::lock_guard<std::mutex> lock(g_memo_mu);
    auto it = g_memo.find(path);
    if (it != g_memo.end() && it->second->settled && same_stamp(it->second->stamp, before)) {
      return it->second;
    }
  }
  const int64_t read_at = realtime_ns();
  auto content = read_file(path);
  if (!content) return nullptr;
  auto info = std::make_shared<FileInfo>();
  info->stamp = before;
  info->directives = scan_directives(*content);
  Sha256 h;
  h.update(*content);
  info->digest = to_hex(h.finish());
  info->content = std::make_shared<const std::string>(std::move(*content));
  PathStamp after;
  const bool same = file_stamp(path, &after) && same_stamp(after, before);
  // On a network file system stat() answers from an attribute cache that can be seconds
  // behind another host's edit, while reading revalidates: such files are always read.
  info->settled =
      same && read_at - std::max(before.mtime_ns, before.ctime_ns) >= kRacySeconds * 1000000000 &&
      network_fs_type(path).empty();
  if (same) {
    std::lock_guard<std::mutex> lock(g_memo_mu);
    if (g_memo.size() > 4096) g_memo.clear();
    g_memo[path] = info;
  }
  return info;
}

std::string absolute(const std::string& path, const std::string& cwd) {
  return !path.empty() && path[0] == '/' ? path : join_path(cwd, path);
}

bool under(const std::string& path, const std::string& root) {
  return !root.empty() && path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

// Bounds on what a computed include makes the scan read.
constexpr size_t kMaxListedFiles = 4096;
constexpr uint64_t kMaxListedBytes = 64ull << 20;
constexpr int kMaxListDepth = 16;

class Scanner {
 public:
  explicit Scanner(const IncludeScanInput& in) : in_(in) {
    for (const std::string& root : in.skip_roots) {
      if (!root.empty()) skips_.push_back(real_root(root));
    }
    for (const auto& [name, contents] : in.headers) memory_[name] = &contents;
    for (const std::string& dir : in.include_paths) include_dirs_.push_back(absolute(dir, cwd()));
    for (const std::string& d : in.defines) {
      const size_t eq = d.find('=');
      if (eq != std::string::npos) defines_.emplace(d.substr(0, eq), d.substr(eq + 1));
    }
  }

  IncludeScan run() {
    Directives top = scan_directives(in_.source);
    if (top.refs.empty() && in_.pre_includes.empty()) return std::move(out_);  // reads nothing
    const std::string name_dir = dirname_of(in_.program_name);
    const std::string program_dir = absolute(name_dir.empty() ? "." : name_dir, cwd());
    add(std::move(top), {program_dir});
    for (const std::string& name : in_.pre_includes) {
      // Found by NVRTC in the include paths; the working and program directories too, to
      // be safe.
      probe_everywhere(IncludeRef{name, false, ""}, {cwd(), program_dir});
    }
    // Follow includes, then computed includes through their macros, until nothing is new.
    for (;;) {
      drain();
      if (serve_builtins_to_toolkit()) continue;
      if (!resolve_macros()) break;
    }
    // A computed include that no macro explains could name any file in a searched
    // directory: read them all.
    while (out_.computed && in_.read_directories) {
      std::vector<std::string> dirs = include_dirs_;
      dirs.insert(dirs.end(), searched_.begin(), searched_.end());
      bool more = false;
      for (const std::string& dir : dirs) {
        const std::string real = resolve_path(dir);
        if (skipped(real) || listed_tried_.count(real)) continue;
        listed_tried_.insert(real);
        more = true;
        Budget budget;
        if (list_tree(real, 0, &budget)) {
          out_.listed.insert(real);
        } else {
          out_.complete = false;
        }
      }
      drain();
      resolve_macros();
      drain();
      if (!more) break;
    }
    finish_builtins();
    return std::move(out_);
  }

 private:
  struct Item {
    std::vector<IncludeRef> refs;
    std::vector<std::string> dirs;  // directories of the including file
  };
  struct Computed {
    std::string macro;
    std::vector<std::string> dirs;
  };

  void add(const Directives& d, std::vector<std::string> dirs) {
    for (const auto& [name, body] : d.defines) defines_.emplace(name, body);
    queue_.push_back({d.refs, std::move(dirs)});
  }

  void drain() {
    while (!queue_.empty()) {
      Item item = std::move(queue_.front());
      queue_.pop_front();
      for (const IncludeRef& ref : item.refs) {
        if (ref.name.empty()) {
          if (ref.macro.empty()) {
            out_.computed = true;
          } else {
            computed_.push_back({ref.macro, item.dirs});
          }
          searched_.insert(item.dirs.begin(), item.dirs.end());
          continue;
        }
        // In-memory headers are hashed by the caller; their own includes are followed once.
        auto mem = memory_.find(ref.name);
        if (mem != memory_.end() && scanned_memory_.insert(ref.name).second) {
          add(scan_directives(*mem->second), item.dirs);
        }
        probe_everywhere(ref, ref.angled ? std::vector<std::string>() : item.dirs);
      }
    }
  }

  // Header names a macro can stand for, through every definition seen (conditionals are
  // ignored: all of them count). False when some definition is not a header name or
  // another such macro, or when none was seen.
  bool expand(const std::string& macro, int depth, std::vector<IncludeRef>* out) {
    auto range = defines_.equal_range(macro);
    if (range.first == range.second || depth > 8) return false;
    for (auto it = range.first; it != range.second; ++it) {
      const std::string& body = it->second;
      size_t next = 0;
      IncludeRef ref = header_name(body, 0, '\n', &next);
      if (!ref.name.empty() && skip_space(body, next) == body.size()) {
        out->push_back(ref);
      } else if (!ref.macro.empty()) {
        if (!expand(ref.macro, depth + 1, out)) return false;
      } else {
        return false;
      }
    }
    return true;
  }

  // Probes what the computed includes seen so far can name. True when it probed something
  // new (whose files may define more).
  bool resolve_macros() {
    bool probed = false;
    for (const Computed& c : computed_) {
      std::vector<IncludeRef> refs;
      if (!expand(c.macro, 0, &refs)) {
        out_.computed = true;
        continue;
      }
      for (const IncludeRef& ref : refs) {
        std::string id = c.macro + '\n' + ref.name + (ref.angled ? "<" : "\"");
        for (const std::string& d : c.dirs) id += '\n' + d;
        if (!resolved_.insert(id).second) continue;
        queue_.push_back({{ref}, c.dirs});
        probed = true;
      }
    }
    return probed;
  }

  // Every place NVRTC could find `ref`: the including file's directories (quoted form),
  // then the include paths.
  void probe_everywhere(const IncludeRef& ref, const std::vector<std::string>& dirs) {
    bool found = memory_.count(ref.name) > 0;
    if (ref.name[0] == '/') {
      found = probe_named(ref.name) || found;
    } else {
      for (const std::string& dir : dirs) {
        searched_.insert(dir);
        found = probe_named(join_path(dir, ref.name)) || found;
      }
      for (const std::string& dir : include_dirs_) {
        found = probe_named(join_path(dir, ref.name)) || found;
      }
    }
    if (!found) out_.outside = true;
    if (!found && in_.builtin_std && !toolkit_reached_) {
      for (const std::string& dir : in_.toolkit_includes) {
        if (ref.name[0] != '/' && is_regular_file(join_path(dir, ref.name))) {
          toolkit_reached_ = true;
          break;
        }
      }
    }
    if (in_.builtin_std) note_builtin(ref.name, found);
  }

  // A reference to a built-in standard header's name: the built-in is used when no
  // reference to the name finds a file or an in-memory header. Its own includes are
  // followed (once) as an in-memory header's are.
  void note_builtin(const std::string& name, bool found) {
    if (found) {
      user_std_.insert(name);
      return;
    }
    const std::string_view* text = builtin_std_header(name);
    if (!text || !builtin_refs_.insert(name).second) return;
    add(scan_directives(std::string(*text)), {});
  }

  // Once the program reaches the toolkit's headers (which the scan does not read: the
  // key's toolkit fingerprint covers them), every built-in standard header is served, as
  // those headers may include any of them (<thrust/complex.h> includes <cmath>). Each name
  // is looked for in the include paths as an angled include from a toolkit header would
  // be: a file of that name there is NVRTC's and the scan's, and the built-in is not
  // used. True when this added references to follow.
  bool serve_builtins_to_toolkit() {
    if (!in_.builtin_std || !toolkit_reached_ || toolkit_served_) return false;
    toolkit_served_ = true;
    for (const BuiltinHeader& b : builtin_std_texts()) {
      if (memory_.count(b.name) || builtin_refs_.count(b.name) || user_std_.count(b.name)) {
        continue;
      }
      probe_everywhere(IncludeRef{b.name, true, ""}, {});
    }
    return true;
  }

  // The built-in headers used, once the scan is over.
  void finish_builtins() {
    for (const std::string& name : builtin_refs_) {
      if (!user_std_.count(name)) out_.builtins.push_back(name);
    }
  }

  // NVRTC looks for a name without an extension (<type_traits>, <cuda/std/cstdint>) also
  // with ".stdh" appended, in each directory after the name itself (seen with strace).
  bool probe_named(const std::string& candidate) {
    const size_t slash = candidate.find_last_of('/');
    const bool bare =
        candidate.find('.', slash == std::string::npos ? 0 : slash) == std::string::npos;
    bool found = probe(candidate);
    if (bare) found = probe(candidate + ".stdh") || found;
    return found;
  }

  // Records what stat() says about `path` (once per path) for the scan's memo. A path
  // that does not exist is covered by its directory instead where that is sound: making
  // any entry in a directory updates its modification and change times, so a directory
  // unchanged since well before the scan (settled, on a local file system) still lacks
  // every name it lacked then. One stat() of the directory then stands for all the names
  // probed in it (the working directory and each include path are probed for every
  // quoted include).
  void look(const std::string& path) {
    if (!looked_.insert(path).second) return;
    PathStamp s;
    if (!stamp_path(path, &s)) out_.stamped = false;
    if (s.kind == 0 && cover_absent(path)) return;
    out_.looked.push_back(std::move(s));
  }

  // Records the stamp of `path`'s directory with its times in place of the absent
  // `path`; false (nothing recorded) when the directory cannot vouch for the absence.
  bool cover_absent(const std::string& path) {
    const std::string dir = dirname_of(path);
    if (dir.empty() || dir == path) return false;
    auto known = dir_cover_.find(dir);
    if (known == dir_cover_.end()) {
      PathStamp d;
      const bool vouches = stamp_path(dir, &d) && d.kind == 2 && stamp_settled(d, realtime_ns()) &&
                           network_fs_type(dir).empty();
      known = dir_cover_.emplace(dir, vouches).first;
      if (vouches) {
        d.listing = true;  // its times count: they change when an entry is made
        if (looked_.insert(dir).second) {
          out_.looked.push_back(std::move(d));
        } else {
          for (PathStamp& was : out_.looked) {
            if (was.path == dir) was = d;  // recorded earlier without its times
          }
        }
      }
    }
    return known->second;
  }

  // True when the candidate is a file (read now or before).
  bool probe(const std::string& candidate) {
    // Stamped before it is resolved and read: a change in between makes the stamp differ
    // from what a later look finds, or the file unsettled.
    look(candidate);
    const std::string resolved = resolve_path(candidate);
    if (skipped(resolved)) {
      if (!toolkit_reached_ && in_.builtin_std && is_regular_file(resolved)) {
        toolkit_reached_ = true;  // a toolkit directory given as an include path
      }
      return false;
    }
    if (out_.absent.count(resolved)) return false;
    // Quoted includes in the file are searched from the directory NVRTC names it by (for a
    // symlinked file, the link's directory) and, to be safe, from the real file's directory.
    const std::string from = resolve_path(dirname_of(candidate));
    if (!visited_.insert(resolved + '\n' + from).second) return true;
    const FilePtr info = load(resolved);
    if (!info) {
      out_.absent.insert(resolved);
      return false;
    }
    // Its quoted (and computed) includes are searched from `from`, a resolved name: the
    // directory's identity says it still resolves there.
    for (const IncludeRef& r : info->directives.refs) {
      if (!r.angled) {
        look(dirname_of(candidate));
        break;
      }
    }
    if (!info->settled) out_.settled = false;
    std::vector<std::string> dirs{from};
    if (dirname_of(resolved) != from) dirs.push_back(dirname_of(resolved));
    add(info->directives, std::move(dirs));
    if (files_seen_.insert(resolved).second) {
      out_.files.push_back({resolved, info->content, info->digest});
    }
    return true;
  }

  struct Budget {
    size_t files = kMaxListedFiles;
    uint64_t bytes = kMaxListedBytes;
  };

  // Reads every regular file below `dir`; false when a bound stopped it.
  bool list_tree(const std::string& dir, int depth, Budget* budget) {
    if (depth > kMaxListDepth) return false;
    const std::optional<std::vector<std::string>> names = directory_names(dir);
    if (!names) return false;
    bool whole = true;
    for (const std::string& name : *names) {
      const std::string p = join_path(dir, name);
      if (is_directory(p)) {
        const std::string real = resolve_path(p);
        if (skipped(real)) continue;
        if (!under(real, dir)) {
          whole = false;  // a symlink out of the tree: not followed
          continue;
        }
        if (!list_tree(real, depth + 1, budget)) whole = false;
      } else {
        PathStamp st;
        const uint64_t size = file_stamp(p, &st) ? st.size : 0;
        if (budget->files == 0 || size > budget->bytes) return false;
        --budget->files;
        budget->bytes -= size;
        probe(p);
      }
    }
    return whole;
  }

  // The working directory, read when a relative path first needs it.
  const std::string& cwd() {
    if (cwd_.empty()) {
      const std::string here_path = current_directory();
      out_.cwd = cwd_ = here_path.empty() ? "/" : here_path;  // unreadable: never vouched for
      PathStamp here;
      if (stat_stamp(".", &here) && here.kind == 2) {
        out_.cwd_dev = here.dev;
        out_.cwd_ino = here.ino;
      } else {
        out_.stamped = false;
      }
    }
    return cwd_;
  }

  // The real path of a skipped root (a toolkit: fixed for the life of the process),
  // remembered per thread so that hits take no lock for it.
  static std::string real_root(const std::string& root) {
    if (root.empty()) return root;
    thread_local std::map<std::string, std::string> memo;
    auto it = memo.find(root);
    if (it == memo.end()) {
      if (memo.size() > 64) memo.clear();
      it = memo.emplace(root, resolve_path(root)).first;
    }
    return it->second;
  }

  bool skipped(const std::string& real) const {
    for (const std::string& root : skips_) {
      if (real == root || under(real, root)) return true;
    }
    return false;
  }

  const IncludeScanInput& in_;
  std::string cwd_;
  std::vector<std::string> skips_;
  std::vector<std::string> include_dirs_;
  std::map<std::string, const std::string*> memory_;
  std::multimap<std::string, std::string> defines_;
  std::vector<Computed> computed_;
  std::set<std::string> resolved_;  // computed includes already followed
  std::set<std::string> scanned_memory_;
  std::set<std::string> visited_;          // file + directory it was reached from
  std::set<std::string> looked_;           // paths in out_.looked
  std::map<std::string, bool> dir_cover_;  // directory -> it vouches for absent names in it
  std::set<std::string> files_seen_;       // real paths already in out_.files
  std::set<std::string> searched_;      // includer directories quoted includes were looked for in
  std::set<std::string> listed_tried_;  // real directories already listed for computed includes
  std::set<std::string> builtin_refs_;  // built-in header names referred to and not found
  std::set<std::string> user_std_;      // built-in header names found as a file or in memory
  bool toolkit_reached_ = false;        // a reference found a file in a toolkit
  bool toolkit_served_ = false;         // every built-in was offered to the toolkit's headers
  std::deque<Item> queue_;
  IncludeScan out_;
};

}  // namespace

bool IncludeScan::reads_files() const {
  return !files.empty() || !absent.empty() || computed;
}

Directives scan_directives(const std::string& text) {
  const std::string t = splice_lines(text);
  // Both passes find something only after a '#', a "%:" or at "__has_include": a text
  // with none of them (most kernels without an #include) has nothing to find.
  if (t.find('#') == std::string::npos && t.find("%:") == std::string::npos &&
      t.find("__has_include") == std::string::npos) {
    return {};
  }
  Directives all;
  lex_pass(t, &all);
  line_pass(t, &all);
  // Each reference and definition once, in order of first appearance.
  Directives out;
  std::set<std::tuple<std::string, bool, std::string>> seen_refs;
  for (auto& r : all.refs) {
    if (seen_refs.insert({r.name, r.angled, r.macro}).second) out.refs.push_back(std::move(r));
  }
  std::set<std::pair<std::string, std::string>> seen_defines;
  for (auto& d : all.defines) {
    if (seen_defines.insert(d).second) out.defines.push_back(std::move(d));
  }
  return out;
}

IncludeScan scan_includes(const IncludeScanInput& in) {
  return Scanner(in).run();
}

bool scan_covers(const IncludeScan& scan, const std::string& resolved, bool exists) {
  if (exists) {
    for (const auto& f : scan.files) {
      if (f.path == resolved) return true;
    }
    return false;
  }
  if (scan.absent.count(resolved)) return true;
  for (const std::string& dir : scan.listed) {
    if (under(resolved, dir)) return true;
  }
  return false;
}

}  // namespace kjit
