#include "nvrtc/pch.h"

#include <nvrtc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "cuda/nvrtc_lib.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"

namespace kjit {

enum class SlotState { Creating, Ready, Stale, Failed };

namespace {
void remove_tree(const std::string& dir);
}  // namespace

// One PCH directory and what its PCH was made from. The directory goes with the last
// compile that holds the slot once a newer one replaced it.
struct PchSlot {
  std::string dir;
  SlotState state = SlotState::Creating;
  std::string file;              // the PCH NVRTC created in `dir` (set when Ready)
  std::vector<PchInput> inputs;  // what it was made from (set when Ready; then constant)
  ~PchSlot() {
    if (!dir.empty()) remove_tree(dir);
  }
};

namespace {

// The slot of one identity in use now, and how many were made for it.
struct Slots {
  std::shared_ptr<PchSlot> current;
  size_t made = 0;
};

std::mutex g_mu;  // guards g_slots, g_made, the slots' states and g_heap_grows
std::map<std::string, Slots> g_slots;
uint64_t g_made = 0;
int g_heap_grows = 0;
std::shared_mutex g_heap;

constexpr int kMaxHeapGrows = 4;
// PCHs of one identity made again after their inputs changed, before PCH is given up for it
// (a program whose headers change at every compile gains nothing from one).
constexpr size_t kMaxSlotsPerIdentity = 8;

std::string temp_root() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

void remove_tree(const std::string& dir) {
  if (const std::optional<std::vector<std::string>> names = directory_names(dir)) {
    for (const std::string& n : *names) {
      const std::string path = join_path(dir, n);
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(path);
      } else {
        ::unlink(path.c_str());
      }
    }
  }
  ::rmdir(dir.c_str());
}

// PCH directories of processes that no longer run ("kjit-pch.<pid>.XXXXXX").
void sweep_dead(const std::string& root) {
  std::vector<std::string> dead;
  for (const std::string& n : directory_names(root).value_or(std::vector<std::string>())) {
    if (n.rfind("kjit-pch.", 0) != 0) continue;
    const long pid = std::strtol(n.c_str() + 9, nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) dead.push_back(join_path(root, n));
  }
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

std::string slot_identity(const std::string& source, const std::vector<std::string>& nvrtc,
                          const std::string& program,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  Sha256 h;
  h.field("kjit-pch-slot");
  h.field(dirname_of(program));  // quoted includes are looked up from its directory
  char cwd[4096];
  h.field(getcwd(cwd, sizeof cwd) ? cwd : "");  // quoted includes are looked up from it
  h.u64(nvrtc.size());
  for (const std::string& o : nvrtc) h.field(o);
  auto sorted = headers;
  std::sort(sorted.begin(), sorted.end());
  h.u64(sorted.size());
  for (const auto& [name, text] : sorted) {
    h.field(name);
    h.field(text);
  }
  h.field(leading_directives(source));
  return to_hex(h.finish());
}

std::shared_ptr<PchSlot> new_slot(Slots* slots, const std::string& identity) {
  std::string dir = join_path(directory(), identity.substr(0, 16) + "-" + std::to_string(++g_made));
  if (::mkdir(dir.c_str(), 0700) != 0) return nullptr;
  auto slot = std::make_shared<PchSlot>();
  slot->dir = std::move(dir);
  slots->current = slot;
  slots->made++;
  return slot;
}

void set_state(const std::shared_ptr<PchSlot>& slot, SlotState state) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (slot->state == SlotState::Creating || state == SlotState::Stale) slot->state = state;
}

}  // namespace

// Files NVRTC makes for itself during a compile: its precompiled headers (in kjit's PCH
// directory, or NVRTC's own when the caller asked for -pch) and the temporary file that
// backs its PCH heap (<tmp>/edg<N>_<pid>). They are not inputs of the program.
bool nvrtc_private(const std::string& path) {
  const std::string& pch = directory();
  if (!pch.empty() && (path == pch || path.compare(0, pch.size() + 1, pch + "/") == 0)) return true;
  const std::string tmp = resolve_path(temp_root());
  if (dirname_of(path) != tmp) return false;
  const std::string name = path.substr(path.find_last_of('/') + 1);
  const std::string pid = std::to_string(getpid());
  if (name.rfind("__nvrtc_auto_pch_" + pid + "_", 0) == 0) return true;
  if (name.rfind("edg", 0) != 0) return false;
  size_t i = 3;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > 3 && name.compare(i, std::string::npos, "_" + pid) == 0;
}

PchTicket::~PchTicket() {
  abandon();
}

void PchTicket::abandon() {
  // Abandoned (an exception, a cancellation): a slot being created is not trusted.
  if (slot_ && creator_ && !settled_) set_state(slot_, SlotState::Stale);
  settled_ = true;
}

PchTicket::PchTicket(PchTicket&& other) noexcept
    : slot_(std::move(other.slot_)),
      program_(std::move(other.program_)),
      creator_(other.creator_),
      done_(other.done_),
      settled_(other.settled_),
      started_ns_(other.started_ns_),
      create_status_(other.create_status_),
      said_(std::move(other.said_)),
      options_(std::move(other.options_)) {
  other.creator_ = false;
  other.slot_.reset();
}

PchOutcome PchTicket::nvrtc_done(int create_status, size_t heap_required, const PchMessages& said) {
  if (options_.empty() || done_) return PchOutcome::None;
  done_ = true;
  create_status_ = create_status;
  said_ = said;
  if (create_status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) {
    // Grow the heap to what NVRTC asked for, with no PCH compile running; growing frees
    // every PCH in it, so every slot is made again.
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
    for (auto& [identity, slots] : g_slots) {
      if (slots.current) slots.current->state = SlotState::Stale;
    }
    if (!grow && slot_) slot_->state = SlotState::Failed;
    return PchOutcome::Failed;
  }
  if (create_status == NVRTC_ERROR_PCH_CREATE) return PchOutcome::Failed;
  if (!said.created.empty()) return PchOutcome::Created;
  return said.used.empty() ? PchOutcome::None : PchOutcome::Used;
}

bool PchTicket::settle(AuditRecord* audit) {
  if (options_.empty() || settled_) return true;
  settled_ = true;
  if (!done_) {  // NVRTC did not return normally: nothing of this compile is trusted
    if (creator_) set_state(slot_, SlotState::Stale);
    return said_.used.empty();
  }
  if (creator_) {
    std::vector<PchInput> inputs;
    std::string why;
    if (said_.created.empty() || create_status_ != NVRTC_SUCCESS) {
      // NVRTC made none (it chose not to, or could not): do not ask again for this slot.
      std::lock_guard<std::mutex> lock(g_mu);
      if (slot_->state == SlotState::Creating) slot_->state = SlotState::Failed;
    } else if (!record_inputs(*audit, program_, started_ns_, {}, &inputs, &why)) {
      log_debug("precompiled header " + said_.created + " is not reused: " + why);
      set_state(slot_, SlotState::Stale);
    } else {
      std::lock_guard<std::mutex> lock(g_mu);
      if (slot_->state == SlotState::Creating) {
        slot_->file = said_.created;
        slot_->inputs = std::move(inputs);
        slot_->state = SlotState::Ready;
      }
    }
    return said_.used.empty();
  }
  // Another compile made a PCH in this slot: it is not the one whose inputs were recorded.
  if (!said_.created.empty()) set_state(slot_, SlotState::Stale);
  if (said_.used.empty()) return true;
  if (said_.used != slot_->file) {
    set_state(slot_, SlotState::Stale);
    return false;
  }
  for (const PchInput& in : slot_->inputs) {
    OpenedFile f;
    f.path = in.opened;  // as NVRTC opened it: a link there is checked as a link
    f.relative = in.relative;
    f.ok = in.exists;
    f.from_pch = true;
    f.digest = in.digest;
    audit->opened.push_back(std::move(f));
  }
  return true;
}

PchTicket pch_begin(const std::string& source, const std::vector<std::string>& nvrtc,
                    const std::string& program,
                    const std::vector<std::pair<std::string, std::string>>& headers) {
  PchTicket t;
  if (directory().empty()) return t;
  const std::string identity = slot_identity(source, nvrtc, program, headers);
  t.program_ = program;
  t.started_ns_ = realtime_ns();
  std::unique_lock<std::mutex> lock(g_mu);
  for (;;) {
    Slots& slots = g_slots[identity];
    std::shared_ptr<PchSlot> slot = slots.current;
    if (slot && slot->state == SlotState::Failed) return t;
    if (!slot || slot->state == SlotState::Stale) {
      if (slots.made >= kMaxSlotsPerIdentity) return t;
      slot = new_slot(&slots, identity);
      if (!slot) return t;
      t.creator_ = true;
      t.slot_ = slot;
      break;
    }
    if (slot->state == SlotState::Ready) {
      // Check its inputs without the lock (they do not change once the slot is ready).
      lock.unlock();
      const bool holds = inputs_hold(slot->inputs);
      lock.lock();
      if (holds) {
        t.slot_ = slot;
        break;
      }
      slot->state = SlotState::Stale;  // a header changed or appeared: make a new PCH
      continue;
    }
    // Another compile is creating the PCH this one would use: it is not waited for (for a
    // heavy program that would put one whole compile before another); this one runs now,
    // without PCH.
    return t;
  }
  t.options_ = {"-pch", "--pch-dir=" + t.slot_->dir, "--pch-messages=true", "--pch-verbose=false"};
  return t;
}

std::string pch_directory() {
  return directory();
}

namespace {

// The quoted file name after `marker` in `line`.
std::string quoted_after(const std::string& line, const std::string& marker) {
  const size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = line.find('"', start);
  return end == std::string::npos ? "" : line.substr(start, end - start);
}

}  // namespace

std::string strip_pch_messages(const std::string& log, PchMessages* said) {
  *said = PchMessages();
  static const std::string kUsing = "\": using precompiled header file \"";
  static const std::string kCreating = "\": creating precompiled header file \"";
  std::string out;
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    const size_t next = end == std::string::npos ? log.size() : end + 1;
    const std::string line = log.substr(pos, next - pos);
    if (line.find(kUsing) != std::string::npos) {
      said->used = quoted_after(line, kUsing);
    } else if (line.find(kCreating) != std::string::npos) {
      said->created = quoted_after(line, kCreating);
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
