#include "link/linker.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "cuda/device.h"
#include "kjit/compile.h"
#include "link/elf.h"
#include "link/nvjitlink.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/text.h"
#include "util/utf8.h"

namespace kjit::link {
namespace {

std::atomic<uint64_t> g_runs{0};

// 90 for "sm_90", "sm_90a", "compute_90", "lto_90"; -1 when there is no number.
int arch_number(const std::string& target) {
  const size_t u = target.find('_');
  if (u == std::string::npos) return -1;
  size_t i = u + 1, n = 0;
  int v = 0;
  while (i < target.size() && std::isdigit(static_cast<unsigned char>(target[i])) && n < 6) {
    v = v * 10 + (target[i++] - '0');
    ++n;
  }
  return n ? v : -1;
}

bool valid_target(const std::string& t) {
  if (t.rfind("sm_", 0) != 0 || t.size() < 5) return false;
  size_t i = 3;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  return i > 4 && (i == t.size() || (i + 1 == t.size() && (t[i] == 'a' || t[i] == 'f')));
}

std::string describe(const Input& in, size_t index) {
  std::string d = "input " + std::to_string(index + 1) + " (" + kind_name(in.kind);
  if (in.entry) d += " of a kjit binary";
  if (!in.name.empty()) d += ", '" + in.name + "'";
  return d + ")";
}

// Each input's target when it is known (kjit binaries): newer than the link target is an
// error for every kind, another architecture is one for a CUBIN.
void check_targets(const LinkRequest& r) {
  const int want = arch_number(r.target);
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const Input& in = r.inputs[i];
    if (!in.entry) continue;
    const int have = arch_number(in.entry->target);
    if (have < 0) continue;
    const bool cubin = in.kind == InputKind::Cubin;
    if (have > want || (cubin && have != want)) {
      fail(KJIT_ERROR_UNSUPPORTED_TARGET,
           describe(in, i) + " was compiled for " + in.entry->target + ", the link targets " +
               r.target +
               (cubin ? " (a CUBIN links only for its own architecture)"
                      : " (code links only for its own or a newer architecture)"));
    }
  }
}

kjit_status status_of(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
    case NVJITLINK_ERROR_MISSING_ARCH:
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS:
    case NVJITLINK_ERROR_LTO_NOT_ENABLED:
      return KJIT_ERROR_INVALID_OPTION;
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH:
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH:
    case NVJITLINK_ERROR_ARCH_MISMATCH:
      return KJIT_ERROR_UNSUPPORTED_TARGET;
    case NVJITLINK_ERROR_INTERNAL:
    case NVJITLINK_ERROR_THREADPOOL:
      return KJIT_ERROR_NVJITLINK;
    default:
      return KJIT_ERROR_LINK;
  }
}

// One nvJitLink handle, destroyed with the object.
class Session {
 public:
  Session(const NvJitLink& lib, const std::vector<std::string>& options) : lib_(lib) {
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    result_ = lib_.create(&h_, static_cast<uint32_t>(argv.size()), argv.data());
    if (result_ != NVJITLINK_SUCCESS) h_ = nullptr;
  }
  ~Session() {
    if (h_) lib_.destroy(&h_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  nvJitLinkHandle handle() const { return h_; }
  nvJitLinkResult created() const { return result_; }

  std::string logs() const {
    if (!h_) return "";
    std::string out;
    size_t n = 0;
    if (lib_.error_log_size(h_, &n) == NVJITLINK_SUCCESS && n > 1) {
      std::string e(n, '\0');
      if (lib_.error_log(h_, e.data()) == NVJITLINK_SUCCESS) out += e.c_str();
    }
    n = 0;
    if (lib_.info_log_size(h_, &n) == NVJITLINK_SUCCESS && n > 1) {
      std::string i(n, '\0');
      if (lib_.info_log(h_, i.data()) == NVJITLINK_SUCCESS) out += i.c_str();
    }
    return out;
  }
  std::string info_log() const {
    size_t n = 0;
    if (!h_ || lib_.info_log_size(h_, &n) != NVJITLINK_SUCCESS || n <= 1) return "";
    std::string i(n, '\0');
    return lib_.info_log(h_, i.data()) == NVJITLINK_SUCCESS ? std::string(i.c_str()) : "";
  }

 private:
  const NvJitLink& lib_;
  nvJitLinkHandle h_ = nullptr;
  nvJitLinkResult result_ = NVJITLINK_SUCCESS;
};

Outcome failure(nvJitLinkResult r, const std::string& what, const std::string& log) {
  Outcome o;
  o.status = status_of(r);
  o.message = what + ": " + result_name(r) + (log.empty() ? "" : "\n" + log);
  auto e = std::make_shared<Entry>();
  e->log = log;
  o.entry = e;
  return o;
}

// One nvJitLink run; *out receives the CUBIN (ptx false) or the PTX (ptx true).
Outcome run_once(const NvJitLink& lib, const LinkRequest& r, bool ptx, std::string* out,
                 std::string* info) {
  std::vector<std::string> options{"-arch=" + r.target};
  options.insert(options.end(), r.options.begin(), r.options.end());
  if (ptx) options.push_back("-ptx");
  g_runs.fetch_add(1, std::memory_order_relaxed);
  Session s(lib, options);
  if (!s.handle()) {
    std::string list;
    for (const auto& o : options) list += (list.empty() ? "" : " ") + o;
    return failure(s.created(), "nvJitLink refused the options (" + list + ")", "");
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const Input& in = r.inputs[i];
    std::string_view d = in.data();
    std::string with_nul;  // PTX is handed over NUL-terminated
    if (in.kind == InputKind::Ptx && (d.empty() || d.back() != '\0')) {
      with_nul.assign(d.data(), d.size());
      with_nul.push_back('\0');
      d = with_nul;
    }
    const nvJitLinkResult a = lib.add_data(s.handle(), static_cast<nvJitLinkInputType>(in.kind),
                                           d.data(), d.size(), in.name.c_str());
    if (a != NVJITLINK_SUCCESS)
      return failure(a, "nvJitLink rejected " + describe(in, i), s.logs());
  }
  const nvJitLinkResult c = lib.complete(s.handle());
  if (c != NVJITLINK_SUCCESS) return failure(c, "link failed", s.logs());
  size_t n = 0;
  nvJitLinkResult g =
      ptx ? lib.linked_ptx_size(s.handle(), &n) : lib.linked_cubin_size(s.handle(), &n);
  if (g == NVJITLINK_SUCCESS) {
    out->assign(n, '\0');
    g = ptx ? lib.linked_ptx(s.handle(), out->data()) : lib.linked_cubin(s.handle(), out->data());
  }
  if (g != NVJITLINK_SUCCESS) {
    return failure(g, ptx ? "nvJitLinkGetLinkedPtx" : "nvJitLinkGetLinkedCubin", s.logs());
  }
  if (ptx) {
    while (!out->empty() && out->back() == '\0') out->pop_back();
  }
  const std::string i = s.info_log();
  if (!i.empty()) *info += i;
  return Outcome{};
}

Outcome run_link(const LinkRequest& r, const std::string& key) {
  const NvJitLink& lib = nvjitlink();
  const double start = monotonic_ms();
  auto e = std::make_shared<Entry>();
  std::string info;
  if (r.outputs & KJIT_OUTPUT_CUBIN) {
    std::string cubin;
    Outcome o = run_once(lib, r, false, &cubin, &info);
    if (o.status != KJIT_OK) return o;
    e->cubin = cubin;
    if (!is_cubin(e->cubin)) {
      return Outcome{KJIT_ERROR_NVJITLINK, "nvJitLink returned an output that is not a CUBIN",
                     nullptr, KJIT_TIER_COMPILED};
    }
  }
  if (r.outputs & KJIT_OUTPUT_PTX) {
    std::string ptx;
    Outcome o = run_once(lib, r, true, &ptx, &info);
    if (o.status != KJIT_OK) return o;
    e->ptx = ptx;
  }
  e->key = key;
  e->target = r.target;
  e->log = info;
  e->toolchain = lib.identity;
  e->program_name = "link";
  e->options.push_back("-arch=" + r.target);
  e->options.insert(e->options.end(), r.options.begin(), r.options.end());
  e->kernels = e->cubin.empty() ? ptx_entry_names(e->ptx) : cubin_kernels(e->cubin);
  for (const Input& in : r.inputs) {
    if (!in.entry) continue;
    for (const auto& n : in.entry->names) {
      const bool seen = std::any_of(e->names.begin(), e->names.end(),
                                    [&](const auto& have) { return have.first == n.first; });
      if (!seen) e->names.push_back(n);
    }
  }
  e->compile_ms = monotonic_ms() - start;
  e->created = unix_time();
  e->last_used = e->created;
  return Outcome{KJIT_OK, "", e, KJIT_TIER_COMPILED};
}

}  // namespace

const char* kind_name(InputKind k) {
  switch (k) {
    case InputKind::Cubin:
      return "CUBIN";
    case InputKind::Ptx:
      return "PTX";
    case InputKind::LtoIr:
      return "LTO-IR";
    case InputKind::Fatbin:
      return "fatbinary";
    case InputKind::Object:
      return "object";
    case InputKind::Library:
      return "library";
  }
  return "unknown";
}

std::string_view Input::data() const {
  if (entry) {
    const Blob* b = entry->blob(blob);
    return b ? b->view() : std::string_view();
  }
  return bytes ? std::string_view(*bytes) : std::string_view();
}

Input input_from_entry(const EntryPtr& entry, const std::string& name, const std::string& target) {
  if (!entry) fail(KJIT_ERROR_INVALID_ARGUMENT, "the binary holds no result");
  Input in;
  in.entry = entry;
  in.name = name.empty() ? entry->program_name : name;
  const bool cubin_fits = !entry->cubin.empty() &&
                          (target.empty() || arch_number(target) == arch_number(entry->target));
  if (!entry->ltoir.empty()) {
    in.kind = InputKind::LtoIr;
    in.blob = BlobKind::LtoIr;
  } else if (cubin_fits) {
    in.kind = InputKind::Cubin;
    in.blob = BlobKind::Cubin;
  } else if (!entry->ptx.empty()) {
    in.kind = InputKind::Ptx;
    in.blob = BlobKind::Ptx;
  } else if (!entry->cubin.empty()) {
    in.kind = InputKind::Cubin;  // check_targets() reports the architecture
    in.blob = BlobKind::Cubin;
  } else {
    fail(KJIT_ERROR_INVALID_ARGUMENT, "the binary '" + in.name + "' holds no code to link");
  }
  return in;
}

Input input_from_bytes(InputKind kind, std::string bytes, const std::string& name) {
  const int k = static_cast<int>(kind);
  if (k < 1 || k > 6)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "unknown link input kind " + std::to_string(k));
  const std::string what =
      std::string(kind_name(kind)) + " input" + (name.empty() ? "" : " '" + name + "'");
  if (bytes.empty()) fail(KJIT_ERROR_INVALID_ARGUMENT, what + " is empty");
  const std::string_view b = bytes;
  switch (kind) {
    case InputKind::Cubin:
      if (!is_cubin(b))
        fail(KJIT_ERROR_INVALID_ARGUMENT, what + " is not a CUBIN (no ELF header for a GPU)");
      break;
    case InputKind::Object:
      if (!is_elf(b)) fail(KJIT_ERROR_INVALID_ARGUMENT, what + " is not an ELF object file");
      break;
    case InputKind::Library:
      if (!starts_with(b, "!<arch>\n"))
        fail(KJIT_ERROR_INVALID_ARGUMENT, what + " is not a static library (ar archive)");
      break;
    case InputKind::Fatbin:
      if (!starts_with(b, std::string_view("\x50\xed\x55\xba", 4))) {
        fail(KJIT_ERROR_INVALID_ARGUMENT, what + " is not a fatbinary (no fatbinary magic number)");
      }
      break;
    case InputKind::Ptx: {
      std::string_view text = b;
      while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
      const size_t bad = utf8_error(std::string(text));
      if (text.empty() || bad != std::string::npos) {
        fail(KJIT_ERROR_INVALID_ARGUMENT,
             what + " is not PTX text (" +
                 (text.empty() ? std::string("empty") : "byte " + std::to_string(bad)) + ")");
      }
      break;
    }
    case InputKind::LtoIr:
      break;  // nvJitLink checks it (its format has no stable magic)
  }
  Input in;
  in.kind = kind;
  in.name = name;
  in.bytes = std::make_shared<const std::string>(std::move(bytes));
  return in;
}

Input input_from_file(int kind, const std::string& path) {
  if (kind == 0) {
    const size_t dot = path.find_last_of('.');
    const std::string ext = dot == std::string::npos || path.find('/', dot) != std::string::npos
                                ? ""
                                : path.substr(dot + 1);
    if (ext == "cubin")
      kind = int(InputKind::Cubin);
    else if (ext == "ptx")
      kind = int(InputKind::Ptx);
    else if (ext == "ltoir" || ext == "lto")
      kind = int(InputKind::LtoIr);
    else if (ext == "fatbin")
      kind = int(InputKind::Fatbin);
    else if (ext == "o")
      kind = int(InputKind::Object);
    else if (ext == "a")
      kind = int(InputKind::Library);
    else {
      fail(KJIT_ERROR_INVALID_ARGUMENT,
           "cannot tell the kind of link input '" + path +
               "' from its name (.cubin, .ptx, .ltoir, .fatbin, .o, .a)");
    }
  }
  auto bytes = read_file(path);
  if (!bytes) fail(KJIT_ERROR_IO, "cannot read link input '" + path + "': " + std::strerror(errno));
  return input_from_bytes(static_cast<InputKind>(kind), std::move(*bytes), path);
}

LinkRequest resolve(const LinkRequest& request) {
  LinkRequest r;
  r.target = request.target;
  r.outputs = request.outputs ? request.outputs : unsigned(KJIT_OUTPUT_CUBIN);
  bool lto = false;
  for (const std::string& o : request.options) {
    if (o.empty() || o[0] != '-' || utf8_error(o) != std::string::npos) {
      fail(KJIT_ERROR_INVALID_OPTION,
           "link option '" + o + "' is not an option (it must start with '-')");
    }
    if (starts_with(o, "-arch=")) {
      r.target = o.substr(6);
      continue;
    }
    if (o == "-ptx") {
      fail(KJIT_ERROR_INVALID_OPTION, "link option -ptx: ask for PTX output instead (outputs)");
    }
    if (o == "-lto") lto = true;
    r.options.push_back(o);
  }
  if (request.inputs.empty()) fail(KJIT_ERROR_INVALID_ARGUMENT, "nothing to link: no inputs");
  if (r.outputs & ~unsigned(KJIT_OUTPUT_CUBIN | KJIT_OUTPUT_PTX)) {
    fail(KJIT_ERROR_INVALID_OPTION, "a link produces CUBIN and/or PTX, not LTO-IR");
  }
  if ((r.outputs & KJIT_OUTPUT_PTX) && !lto) {
    fail(KJIT_ERROR_INVALID_OPTION,
         "PTX output of a link needs -lto (nvJitLink makes PTX only from LTO-IR)");
  }
  if (r.target.empty()) {
    for (const Input& in : request.inputs) {
      const int n = in.entry ? arch_number(in.entry->target) : -1;
      if (n < 0) continue;
      r.target = "sm_" + std::to_string(n);
      if (in.entry->target.rfind("sm_", 0) == 0) r.target = in.entry->target;
      break;
    }
  }
  if (r.target == "auto") r.target = cuda::device_arch(0);
  if (r.target.empty()) {
    fail(KJIT_ERROR_INVALID_OPTION, "the link has no target: set one (e.g. sm_90 or -arch=sm_90)");
  }
  if (!valid_target(r.target)) {
    fail(KJIT_ERROR_INVALID_OPTION,
         "link target '" + r.target + "' is not an exact GPU architecture (sm_XY, sm_XYa, sm_XYf)");
  }
  r.inputs.reserve(request.inputs.size());
  for (const Input& in : request.inputs) {
    // A kjit binary's part is chosen for the final target.
    r.inputs.push_back(in.entry ? input_from_entry(in.entry, in.name, r.target) : in);
  }
  check_targets(r);
  return r;
}

std::string link_key(const LinkRequest& r, const std::string& identity) {
  Sha256 h;
  h.field("kjit-link-key");
  h.u64(kCacheFormatVersion);
  h.field(identity);
  h.field(r.target);
  h.u64(r.outputs);
  h.u64(r.options.size());
  for (const auto& o : r.options) h.field(o);
  h.u64(r.inputs.size());
  for (const Input& in : r.inputs) {
    h.u64(static_cast<uint64_t>(in.kind));  // names only label the log: not in the key
    if (in.entry && is_hex_key(in.entry->key)) {
      // A compile key determines the compile's bytes; the part used and its size go with it.
      h.field("kjit-binary");
      h.field(in.entry->key);
      h.u64(static_cast<uint64_t>(in.blob));
      h.u64(in.data().size());
    } else {
      h.field("bytes");
      h.field(in.data());
    }
  }
  return to_hex(h.finish());
}

Outcome link(Cache* cache, const LinkRequest& request) {
  const LinkRequest r = resolve(request);
  const std::string key = link_key(r, nvjitlink_identity(facts_of(cache)));
  auto run = [&] {
    Outcome o = run_link(r, key);
    if (o.status == KJIT_OK) remember_identity(facts_of(cache));
    return o;
  };
  if (!cache) return run();
  return cache->get_or_compile(key, run);
}

uint64_t link_runs() noexcept {
  return g_runs.load(std::memory_order_relaxed);
}

}  // namespace kjit::link
