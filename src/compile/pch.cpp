#include "compile/pch.h"

#include <dirent.h>
#include <nvrtc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "compile/nvrtc_lib.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"

namespace kjit {
namespace {

enum class State { Creating, Ready, Failed };

std::mutex g_mu;  // guards g_prefixes and g_heap_grows
std::condition_variable g_cv;
std::map<std::string, State> g_prefixes;
int g_heap_grows = 0;
std::shared_mutex g_heap;

constexpr auto kCreatorWait = std::chrono::seconds(120);
constexpr int kMaxHeapGrows = 4;

std::string temp_root() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") ::unlink(join_path(dir, n).c_str());
    }
    closedir(d);
  }
  ::rmdir(dir.c_str());
}

// PCH directories of processes that no longer run ("kjit-pch.<pid>.XXXXXX").
void sweep_dead(const std::string& root) {
  DIR* d = opendir(root.c_str());
  if (!d) return;
  std::vector<std::string> dead;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("kjit-pch.", 0) != 0) continue;
    const long pid = std::strtol(n.c_str() + 9, nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) dead.push_back(join_path(root, n));
  }
  closedir(d);
  for (const std::string& dir : dead) remove_tree(dir);
}

std::string* g_dir_for_exit = nullptr;  // never freed: outlives static destructors
pid_t g_dir_owner = 0;

const std::string& directory() {
  static const std::string dir = [] {
    const std::string root = temp_root();
    sweep_dead(root);
    std::string tmpl = join_path(root, "kjit-pch." + std::to_string(getpid()) + ".XXXXXX");
    if (!mkdtemp(tmpl.data())) {
      log_info("cannot make a directory for precompiled headers in " + root + ": " +
               std::strerror(errno) + "; compiling without them");
      return std::string();
    }
    g_dir_for_exit = new std::string(tmpl);
    g_dir_owner = getpid();
    std::atexit([] {
      if (getpid() == g_dir_owner) remove_tree(*g_dir_for_exit);  // not a forked child's
    });
    return tmpl;
  }();
  return dir;
}

// The leading block of blank lines, comments and preprocessor directives: what NVRTC
// compares when it decides whether a PCH fits.
std::string leading_directives(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  bool in_comment = false;
  size_t end = 0;
  while (i < n) {
    size_t eol = s.find('\n', i);
    if (eol == std::string::npos) eol = n;
    size_t p = i;
    bool code = false;
    bool directive_continues = false;
    while (p < eol) {
      if (in_comment) {
        const size_t c = s.find("*/", p);
        if (c == std::string::npos || c >= eol) {
          p = eol;
          break;
        }
        in_comment = false;
        p = c + 2;
      } else if (s[p] == ' ' || s[p] == '\t' || s[p] == '\r') {
        ++p;
      } else if (s.compare(p, 2, "/*") == 0) {
        in_comment = true;
        p += 2;
      } else if (s.compare(p, 2, "//") == 0) {
        p = eol;
      } else if (s[p] == '#') {
        directive_continues = eol > i && s[eol - 1] == '\\';
        p = eol;
      } else {
        code = true;
        break;
      }
    }
    if (code) break;
    end = eol;
    i = eol + 1;
    while (directive_continues && i < n) {  // a directive continued on the next lines
      eol = s.find('\n', i);
      if (eol == std::string::npos) eol = n;
      directive_continues = eol > i && s[eol - 1] == '\\';
      end = eol;
      i = eol + 1;
    }
  }
  return s.substr(0, end);
}

void forget(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_prefixes.erase(prefix);
  g_cv.notify_all();
}

}  // namespace

PchTicket::~PchTicket() {
  if (creator_ && !finished_) forget(prefix_);  // abandoned (exception, cancellation)
}

PchTicket::PchTicket(PchTicket&& other) noexcept
    : prefix_(std::move(other.prefix_)),
      creator_(other.creator_),
      finished_(other.finished_),
      options_(std::move(other.options_)) {
  other.creator_ = false;
}

PchOutcome PchTicket::finish(int create_status, size_t heap_required, bool used, bool created) {
  if (options_.empty() || finished_) return PchOutcome::None;
  finished_ = true;
  PchOutcome out = created ? PchOutcome::Created : used ? PchOutcome::Used : PchOutcome::None;
  if (create_status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) {
    // Grow the heap to what NVRTC asked for, with no PCH compile running; growing frees
    // every PCH in it, so every beginning is made again.
    bool grow;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      grow = g_heap_grows < kMaxHeapGrows;
      if (grow) ++g_heap_grows;
    }
    if (grow) {
      std::unique_lock<std::shared_mutex> exclusive(g_heap);
      size_t current = 0;
      nvrtc().nvrtcGetPCHHeapSize(&current);
      if (heap_required > current && nvrtc().nvrtcSetPCHHeapSize(heap_required) == NVRTC_SUCCESS) {
        log_debug("PCH heap grown from " + std::to_string(current) + " to " +
                  std::to_string(heap_required) + " bytes");
      }
    }
    std::lock_guard<std::mutex> lock(g_mu);
    g_prefixes.clear();
    if (!grow) g_prefixes[prefix_] = State::Failed;
    g_cv.notify_all();
    return PchOutcome::Failed;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (create_status == NVRTC_ERROR_PCH_CREATE) {
    g_prefixes[prefix_] = State::Failed;
    out = PchOutcome::Failed;
  } else if (created || used) {
    g_prefixes[prefix_] = State::Ready;
  } else if (creator_) {
    g_prefixes[prefix_] = State::Failed;  // NVRTC chose not to make one: do not ask again
  }
  g_cv.notify_all();
  return out;
}

PchTicket pch_begin(const std::string& source, const std::vector<std::string>& nvrtc,
                    const std::string& program) {
  PchTicket t;
  const std::string& dir = directory();
  if (dir.empty()) return t;
  Sha256 h;
  h.field("kjit-pch");
  h.field(program);
  h.u64(nvrtc.size());
  for (const std::string& o : nvrtc) h.field(o);
  h.field(leading_directives(source));
  const std::string prefix = to_hex(h.finish());
  std::unique_lock<std::mutex> lock(g_mu);
  const auto deadline = std::chrono::steady_clock::now() + kCreatorWait;
  for (;;) {
    auto it = g_prefixes.find(prefix);
    if (it == g_prefixes.end()) {
      g_prefixes[prefix] = State::Creating;
      t.creator_ = true;
      break;
    }
    if (it->second == State::Ready) break;
    if (it->second == State::Failed) return t;
    // Another thread is creating the PCH this compile would use: wait for it.
    if (g_cv.wait_until(lock, deadline) == std::cv_status::timeout) return t;
  }
  t.prefix_ = prefix;
  t.options_ = {"-pch", "--pch-dir=" + dir, "--pch-messages=true", "--pch-verbose=false"};
  return t;
}

std::string pch_directory() {
  return directory();
}

std::string strip_pch_messages(const std::string& log, bool* used, bool* created) {
  *used = *created = false;
  std::string out;
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    const size_t next = end == std::string::npos ? log.size() : end + 1;
    const std::string line = log.substr(pos, next - pos);
    if (line.find("\": using precompiled header file \"") != std::string::npos) {
      *used = true;
    } else if (line.find("\": creating precompiled header file \"") != std::string::npos) {
      *created = true;
    } else {
      out += line;
    }
    pos = next;
  }
  return out;
}

void pch_heap_lock_shared() {
  g_heap.lock_shared();
}
void pch_heap_unlock_shared() {
  g_heap.unlock_shared();
}

}  // namespace kjit
