#include "nvrtc/nvrtc_program.h"

#include <nvrtc.h>

#include <exception>

#include "cuda/nvrtc_lib.h"
#include "key/builtin_std.h"
#include "nvrtc/name_map.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace kjit {
namespace {

// Owns an nvrtcProgram.
class Program {
 public:
  ~Program() {
    if (prog_) nvrtc().nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram* out() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
};

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtc().nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtc().nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the terminating NUL
  return log;
}

// NVRTC 13.0 lets C++ exceptions escape its C functions on some inputs (seen:
// std::out_of_range "basic_string::at" from nvrtcCompileProgram). They become an
// NVRTC status with the exception's text, never an internal error of kjit's.
template <typename F>
nvrtcResult nvrtc_call(F&& f, std::string* thrown) {
  try {
    return f();
  } catch (const std::exception& e) {
    *thrown = e.what();
  } catch (...) {
    *thrown = "an unknown exception";
  }
  return NVRTC_ERROR_INTERNAL_ERROR;
}

Outcome nvrtc_threw(const char* function, const std::string& program, const std::string& what) {
  return Outcome{KJIT_ERROR_NVRTC,
                 std::string(function) + " failed for '" + program +
                     "': NVRTC failed internally on this input (it threw: " + what + ")",
                 nullptr, KJIT_TIER_COMPILED};
}

// Holds the PCH heap shared for the length of one nvrtcCompileProgram call.
class PchHeapShared {
 public:
  explicit PchHeapShared(bool on) : on_(on) {
    if (on_) pch_heap_lock_shared();
  }
  ~PchHeapShared() { release(); }
  void release() {
    if (on_) pch_heap_unlock_shared();
    on_ = false;
  }

 private:
  bool on_;
};

int cancel_callback(void* payload, void*) {
  auto* flag = static_cast<std::atomic<bool>*>(payload);
  return flag->load(std::memory_order_relaxed) ? 1 : 0;
}

// First lines of a log, for messages.
std::string head(const std::string& log, size_t lines) {
  size_t pos = 0;
  for (size_t i = 0; i < lines && pos != std::string::npos; ++i) {
    pos = log.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  std::string out = pos == std::string::npos ? log : log.substr(0, pos);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

bool only_name_map_errors(const std::string& log) {
  size_t errors = 0, name_map = 0, pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(pos, end - pos);
    if (line.find(": error:") != std::string::npos) {
      ++errors;
      if (line.rfind("__nv_name_map(", 0) == 0) ++name_map;
    }
    pos = end + 1;
  }
  return errors > 0 && errors == name_map;
}

std::string fetch(nvrtcProgram prog, nvrtcResult (*size_fn)(nvrtcProgram, size_t*),
                  nvrtcResult (*get_fn)(nvrtcProgram, char*), const char* what) {
  size_t size = 0;
  nvrtcResult r = size_fn(prog, &size);
  if (r != NVRTC_SUCCESS) {
    fail(KJIT_ERROR_NVRTC, std::string("NVRTC could not report the ") + what +
                               " size: " + nvrtc().nvrtcGetErrorString(r));
  }
  std::string data(size, '\0');
  if (size) {
    r = get_fn(prog, data.data());
    if (r != NVRTC_SUCCESS) {
      fail(KJIT_ERROR_NVRTC, std::string("NVRTC could not return the ") + what + ": " +
                                 nvrtc().nvrtcGetErrorString(r));
    }
  }
  return data;
}

// The file whose #include NVRTC could not open, from the log line before `at` (NVRTC
// writes "FILE(LINE): catastrophic error: cannot open source file \"NAME\""); "" when the
// line does not say.
std::string includer_of(const std::string& log, size_t at) {
  const size_t line = log.rfind('\n', at);
  const size_t begin = line == std::string::npos ? 0 : line + 1;
  const size_t paren = log.find('(', begin);
  if (paren == std::string::npos || paren >= at) return "";
  return log.substr(begin, paren - begin);
}

// `path` with its toolkit root (one of `roots`) cut off: "thrust/complex.h"; "" when it is
// not under one.
std::string toolkit_relative(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    for (const std::string& real : {root, resolve_path(root)}) {
      if (real.empty()) continue;
      const std::string prefix = real.back() == '/' ? real : real + "/";
      if (path.rfind(prefix, 0) != 0) continue;
      std::string rest = path.substr(prefix.size());
      const size_t inc = rest.find("include/");
      if (inc != std::string::npos) rest = rest.substr(inc + 8);
      if (rest.rfind("cccl/", 0) == 0) rest = rest.substr(5);
      return rest;
    }
  }
  return "";
}

// NVRTC has no host C++ standard library: when a compile fails for want of one of its
// headers, say which and why, naming the real cause: a header kjit does not provide (and
// the toolkit header that needs it), or kjit's built-in one turned off.
std::string std_library_hint(const std::string& log, const NormalisedOptions& norm) {
  static const char* const kStd[] = {
      "cmath",     "cstdlib",     "cstdio",   "cstring",  "vector",  "string",     "iostream",
      "memory",    "algorithm",   "map",      "complex",  "cassert", "functional", "utility",
      "limits",    "type_traits", "cstddef",  "cstdint",  "array",   "tuple",      "new",
      "exception", "stdexcept",   "iterator", "numeric",  "atomic",  "mutex",      "thread",
      "chrono",    "random",      "math.h",   "stdlib.h", "stdio.h", "string.h",   "assert.h"};
  const std::string marker = "open source file \"";  // "cannot ..." or "could not ..."
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = log.find('"', start);
  if (end == std::string::npos) return "";
  const std::string name = log.substr(start, end - start);
  const std::string includer = includer_of(log, at);
  const std::string in_toolkit = toolkit_relative(includer, norm.skip_roots);
  if (builtin_std_header(name)) {
    if (!norm.builtin_std) {
      return "NVRTC has no host C++ standard library, and kjit's built-in <" + name +
             "> was turned off (--no-builtin-std): put a file of that name on the include "
             "path, or leave the option out";
    }
    return "NVRTC has no host C++ standard library; kjit serves its built-in <" + name +
           "> to the program and to every header it includes, but did not see this include "
           "of it" +
           (includer.empty() ? std::string() : " (in " + includer + ")") +
           ": a computed #include? Include <" + name + "> from the program itself";
  }
  for (const char* s : kStd) {
    if (name != s) continue;
    std::string hint = "NVRTC has no host C++ standard library, so <" + name +
                       "> is not available to run-time compilation (kjit's built-in standard "
                       "headers, listed by kjit info, do not include it)";
    if (!in_toolkit.empty()) {
      return hint + "; the toolkit's <" + in_toolkit + "> includes it: that header is host " +
             "code or needs the host's library, which NVRTC cannot compile (thrust's " +
             "containers such as device_vector are host code); include the device-side " +
             "headers instead (e.g. <cub/block/block_reduce.cuh>, <cuda/std/...>)";
    }
    return hint +
           "; use the cuda::std headers (e.g. <cuda/std/atomic>) or leave out the header "
           "that needs it";
  }
  return "";
}

// libcu++ (CUDA 13's CCCL) refuses C++14 with an #error in a header the program may never
// have included itself: kjit's built-in standard headers are built on it.
std::string dialect_hint(const std::string& log, const NormalisedOptions& norm) {
  if (log.find("libcu++ requires at least C++ 17") == std::string::npos) return "";
  bool builtins = false;
  for (const std::string& o : norm.nvrtc) {
    if (o.rfind("-D__KJIT_BUILTIN_STD=", 0) == 0) builtins = true;
  }
  return std::string(builtins ? "kjit's built-in standard headers (<cstdint>, <cmath> ...) are "
                                "built on libcu++ (cuda::std), and "
                              : "") +
         "this toolkit's libcu++ (<cuda/std/...>, also under CUB and Thrust) needs C++17 or "
         "later: compile with -std=c++17 (NVRTC's default) or later; C++14 code that needs "
         "none of it can leave the header out";
}

// A toolkit header that is host code (thrust's containers and algorithms, CUB's device-wide
// algorithms) or needs the host's C++ library fails under NVRTC with errors inside it: say
// that this, not a missing header, is the cause, and what to include instead.
std::string toolkit_host_code_hint(const std::string& log, const NormalisedOptions& norm) {
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(pos, end - pos);
    pos = end + 1;
    const size_t err = line.find(": error: ");
    if (err == std::string::npos) continue;
    const bool host = line.find("not allowed in JIT mode", err) != std::string::npos;
    const bool host_std = line.find("namespace \"std\" has no member", err) != std::string::npos;
    if (!host && !host_std) continue;
    const size_t paren = line.find('(');
    const std::string header =
        toolkit_relative(line.substr(0, paren == std::string::npos ? err : paren), norm.skip_roots);
    if (header.empty()) continue;
    return "the toolkit's <" + header + "> " +
           (host ? "holds host code" : "needs the host's C++ standard library") +
           ", which NVRTC cannot compile (it compiles device code only; kjit serves its "
           "built-in standard headers to the toolkit's headers too, so no header is "
           "missing). Thrust's containers and algorithms, <thrust/complex.h> and CUB's "
           "device-wide algorithms (<cub/cub.cuh>, <cub/device/...>) are host code: include "
           "the block- and warp-level headers (<cub/block/...>, <cub/warp/...>) and "
           "<cuda/std/...> (cuda::std::complex) instead";
  }
  return "";
}

// NVRTC's words for a flag that only nvcc has, said in NVRTC's terms.
std::string nvcc_flag_hint(const std::string& log) {
  if (log.find("requires --extended-lambda nvcc flag") != std::string::npos) {
    return "NVRTC has no --extended-lambda: it compiles no host code, and a lambda in device "
           "code is device code already; write the lambda without __device__ or __host__";
  }
  return "";
}

// A name expression that names nothing: the status message, and a binary whose log says
// the same (with NVRTC's own log before it), so callers need no thread-local error.
Outcome name_not_found(const std::string& message, const std::string& key,
                       const std::string& log_before, const std::string& kjit_lines) {
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  entry->log = log_before;
  if (!entry->log.empty() && entry->log.back() != '\n') entry->log += '\n';
  entry->log += kjit_lines;
  return Outcome{KJIT_ERROR_NAME_NOT_FOUND, message, entry, KJIT_TIER_COMPILED};
}

// The outcome of an nvrtcCompileProgram that did not succeed (`r`), its log in *entry.
Outcome failed_compile(nvrtcResult r, const CompileOptions& opts, const NormalisedOptions& norm,
                       const std::string& key, const std::shared_ptr<Entry>& entry,
                       PchOutcome pch_outcome) {
  if (r == NVRTC_ERROR_COMPILATION) {
    // A name expression that names nothing is reported by NVRTC as compile errors in a
    // synthesised file "__nv_name_map": the log says instead which expression failed and
    // why; when those are the only errors, the status says so too.
    if (!opts.name_expressions.empty()) {
      const NameMapReport names = explain_name_map(entry->log, opts.name_expressions, opts.name);
      if (!names.failed.empty()) {
        entry->log = names.log;
        if (names.program_errors == 0) {
          Outcome o{KJIT_ERROR_NAME_NOT_FOUND, name_map_summary(names, opts.name), entry,
                    KJIT_TIER_COMPILED};
          o.pch = pch_outcome;
          return o;
        }
      } else if (only_name_map_errors(entry->log)) {
        Outcome o = name_not_found(
            "a name expression names nothing in '" + opts.name + "': " + head(entry->log, 2), key,
            entry->log, "");
        o.pch = pch_outcome;
        return o;
      }
    }
    // The kjit note on the cause is added by the caller once the compile is back, wherever
    // it ran (add_failure_note()).
    Outcome failed{
        KJIT_ERROR_COMPILE,
        "compilation of '" + opts.name + "' for " + norm.target + " failed: " + head(entry->log, 4),
        entry, KJIT_TIER_COMPILED};
    failed.pch = pch_outcome;
    return failed;
  }
  if (r == NVRTC_ERROR_INVALID_OPTION) {
    return Outcome{KJIT_ERROR_INVALID_OPTION,
                   "NVRTC rejected an option for '" + opts.name +
                       "': " + nvrtc().nvrtcGetErrorString(r) +
                       (entry->log.empty() ? "" : ": " + head(entry->log, 4)),
                   nullptr, KJIT_TIER_COMPILED};
  }
  if (r == NVRTC_ERROR_CANCELLED) {
    return Outcome{KJIT_ERROR_CANCELLED, "compilation of '" + opts.name + "' was cancelled",
                   nullptr, KJIT_TIER_COMPILED};
  }
  return Outcome{KJIT_ERROR_NVRTC,
                 "nvrtcCompileProgram failed for '" + opts.name +
                     "': " + nvrtc().nvrtcGetErrorString(r) +
                     (entry->log.empty() ? "" : ": " + head(entry->log, 4)),
                 nullptr, KJIT_TIER_COMPILED};
}

// Why a compile with the caller's own PCH options cannot be vouched for ("" = it can):
// NVRTC never checks a PCH's inputs, and kjit does not know those of the caller's PCHs. A
// compile that says it created one, or says nothing of PCHs, read the headers themselves.
std::string user_pch_doubt(const std::vector<std::string>& options, const std::string& log) {
  bool pch = false, quiet = false;
  for (const std::string& o : options) {
    for (const char* p : {"-pch", "--pch", "-use-pch", "--use-pch"}) {
      if (o == p || o.rfind(std::string(p) + "=", 0) == 0) pch = true;
    }
    for (const char* p :
         {"-pch-messages=false", "--pch-messages=false", "-pch-messages=0", "--pch-messages=0"}) {
      if (o == p) quiet = true;
    }
  }
  if (!pch) return "";
  if (quiet) {
    return "the options ask NVRTC for precompiled headers and silence its PCH messages: "
           "whether one was used, and what it was made from, cannot be known";
  }
  if (log.find("\": using precompiled header file \"") != std::string::npos) {
    return "NVRTC used a precompiled header of the caller's own (-pch options), whose inputs "
           "cannot be checked (kjit's automatic PCHs are)";
  }
  return "";
}

}  // namespace

void add_failure_note(const NormalisedOptions& norm, Outcome* o) {
  if (o->status != KJIT_ERROR_COMPILE || !o->entry) return;
  const std::string& log = o->entry->log;
  if (log.find("\nkjit: note: ") != std::string::npos || log.rfind("kjit: note: ", 0) == 0) {
    return;  // said already (a result remembered with its note)
  }
  std::string hint = std_library_hint(log, norm);
  if (hint.empty()) hint = dialect_hint(log, norm);
  if (hint.empty()) hint = toolkit_host_code_hint(log, norm);
  if (hint.empty()) hint = nvcc_flag_hint(log);
  if (hint.empty()) return;
  auto entry = std::make_shared<Entry>(*o->entry);
  if (!entry->log.empty() && entry->log.back() != '\n') entry->log += '\n';
  entry->log += "kjit: note: " + hint + "\n";
  o->entry = entry;
  o->message += " (" + hint + ")";
}

Outcome run_nvrtc(const std::string& source, const CompileOptions& opts,
                  const NormalisedOptions& norm, const std::string& key,
                  const std::string& toolchain, const CancelFlag& cancel, PchTicket* pch) {
  const bool with_pch = pch && !pch->options().empty();
  std::vector<const char*> header_sources, header_names;
  for (const auto& [name, contents] : opts.headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(contents.c_str());
  }
  Program prog;
  std::string thrown;
  nvrtcResult r = nvrtc_call(
      [&] {
        return nvrtc().nvrtcCreateProgram(prog.out(), source.c_str(), opts.name.c_str(),
                                          int(header_names.size()), header_sources.data(),
                                          header_names.data());
      },
      &thrown);
  if (!thrown.empty()) return nvrtc_threw("nvrtcCreateProgram", opts.name, thrown);
  if (r != NVRTC_SUCCESS) {
    return Outcome{r == NVRTC_ERROR_OUT_OF_MEMORY ? KJIT_ERROR_OUT_OF_MEMORY : KJIT_ERROR_NVRTC,
                   std::string("nvrtcCreateProgram failed for '") + opts.name +
                       "': " + nvrtc().nvrtcGetErrorString(r),
                   nullptr, KJIT_TIER_COMPILED};
  }
  for (const std::string& expr : opts.name_expressions) {
    r = nvrtc_call([&] { return nvrtc().nvrtcAddNameExpression(prog.get(), expr.c_str()); },
                   &thrown);
    if (!thrown.empty()) return nvrtc_threw("nvrtcAddNameExpression", opts.name, thrown);
    if (r != NVRTC_SUCCESS) {
      const std::string msg = "name expression '" + expr + "' was refused by NVRTC for '" +
                              opts.name + "': " + nvrtc().nvrtcGetErrorString(r);
      return name_not_found(msg, key, "", "kjit: error: " + msg + "\n");
    }
  }
  if (cancel) nvrtc().nvrtcSetFlowCallback(prog.get(), cancel_callback, cancel.get());

  std::vector<const char*> argv;
  for (const std::string& o : norm.nvrtc) argv.push_back(o.c_str());
  if (with_pch) {
    for (const std::string& o : pch->options()) argv.push_back(o.c_str());
  }
  PchHeapShared heap(with_pch);
  const double t0 = monotonic_ms();
  r = nvrtc_call(
      [&] { return nvrtc().nvrtcCompileProgram(prog.get(), int(argv.size()), argv.data()); },
      &thrown);
  const double ms = monotonic_ms() - t0;
  heap.release();
  if (!thrown.empty()) {
    if (!with_pch) return nvrtc_threw("nvrtcCompileProgram", opts.name, thrown);
    pch->nvrtc_done(int(NVRTC_ERROR_INTERNAL_ERROR), 0, PchMessages());
    log_info("NVRTC failed with precompiled headers (it threw: " + thrown + "); compiling '" +
             opts.name + "' again without them");
    Outcome again = run_nvrtc(source, opts, norm, key, toolchain, cancel, nullptr);
    again.pch = PchOutcome::Failed;
    return again;
  }
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  entry->log = program_log(prog.get());
  PchOutcome pch_outcome = PchOutcome::None;
  if (with_pch) {
    PchMessages said;
    entry->log = strip_pch_messages(entry->log, &said);
    const nvrtcResult status = nvrtc().nvrtcGetPCHCreateStatus(prog.get());
    size_t required = 0;
    if (status == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) {
      nvrtc().nvrtcGetPCHHeapSizeRequired(prog.get(), &required);
    }
    pch_outcome = pch->nvrtc_done(int(status), required, said);
    // PCH trouble never fails a compile: anything but the program's own errors, or a
    // cancellation, is tried again without PCH. A catastrophic error other than a missing
    // file (e.g. "unable to obtain mapped memory" when the PCH heap cannot be mapped) may be
    // the PCH's too; ordinary errors in the program are not tried twice.
    const bool catastrophic = r == NVRTC_ERROR_COMPILATION &&
                              entry->log.find("catastrophic error") != std::string::npos &&
                              entry->log.find("open source file") == std::string::npos &&
                              entry->log.find("#error") == std::string::npos;
    if ((r != NVRTC_SUCCESS && r != NVRTC_ERROR_COMPILATION && r != NVRTC_ERROR_CANCELLED) ||
        catastrophic) {
      log_info("NVRTC failed with precompiled headers (" +
               std::string(nvrtc().nvrtcGetErrorString(r)) + "); compiling '" + opts.name +
               "' again without them");
      Outcome again = run_nvrtc(source, opts, norm, key, toolchain, cancel, nullptr);
      again.pch = PchOutcome::Failed;
      return again;
    }
  }

  if (r != NVRTC_SUCCESS) return failed_compile(r, opts, norm, key, entry, pch_outcome);

  if (norm.outputs & KJIT_OUTPUT_LTOIR) {
    entry->ltoir = fetch(prog.get(), nvrtc().nvrtcGetLTOIRSize, nvrtc().nvrtcGetLTOIR, "LTO-IR");
  } else {
    std::string ptx = fetch(prog.get(), nvrtc().nvrtcGetPTXSize, nvrtc().nvrtcGetPTX, "PTX");
    if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    entry->ptx = ptx;
    entry->kernels = ptx_entry_names(ptx);
    if (norm.outputs & KJIT_OUTPUT_CUBIN) {
      entry->cubin = fetch(prog.get(), nvrtc().nvrtcGetCUBINSize, nvrtc().nvrtcGetCUBIN, "CUBIN");
    }
    if (!(norm.outputs & KJIT_OUTPUT_PTX)) entry->ptx.clear();
  }
  for (const std::string& expr : opts.name_expressions) {
    const char* lowered = nullptr;
    r = nvrtc_call([&] { return nvrtc().nvrtcGetLoweredName(prog.get(), expr.c_str(), &lowered); },
                   &thrown);
    if (!thrown.empty()) return nvrtc_threw("nvrtcGetLoweredName", opts.name, thrown);
    if (r != NVRTC_SUCCESS || !lowered) {
      const std::string msg = "name expression '" + expr + "' has no lowered name in '" +
                              opts.name + "': " + nvrtc().nvrtcGetErrorString(r);
      return name_not_found(msg, key, entry->log, "kjit: error: " + msg + "\n");
    }
    entry->names.emplace_back(expr, lowered);
  }
  entry->target = norm.target;
  entry->options = norm.key;
  entry->toolchain = toolchain;
  entry->program_name = opts.name;
  entry->compile_ms = ms;
  entry->created = unix_time();
  entry->last_used = entry->created;
  Outcome ok{KJIT_OK, "", entry, KJIT_TIER_COMPILED};
  ok.pch = pch_outcome;
  return ok;
}

Outcome compile_audited(const std::string& source, const CompileOptions& opts,
                        const NormalisedOptions& norm, const std::string& key,
                        const std::string& toolchain, const CancelFlag& cancel, bool use_pch,
                        AuditRecord* audit) {
  audit->available = FileAudit::available();
  PchTicket pch = use_pch ? pch_begin(source, norm.nvrtc, opts.name, opts.headers) : PchTicket();
  auto audited = [&](PchTicket* ticket) {
    FileAudit files;
    Outcome out = run_nvrtc(source, opts, norm, key, toolchain, cancel, ticket);
    audit->whole = files.whole();
    audit->opened = files.opened();
    for (OpenedFile& f : audit->opened) {
      f.nvrtc_private = nvrtc_private(f.path) || nvrtc_private(resolve_path(f.path));
    }
    return out;
  };
  Outcome o = audited(&pch);
  if (!pch.settle(audit)) {
    // NVRTC used a PCH other than the one kjit made and checked (another compile made one
    // in its directory): its code may be old. Compiled again without.
    log_info("NVRTC used a precompiled header whose inputs are not known; compiling '" + opts.name +
             "' again without precompiled headers");
    o = audited(nullptr);
    o.pch = PchOutcome::Failed;
  }
  audit->doubt = user_pch_doubt(norm.key, o.entry ? o.entry->log : "");
  if (o.entry) std::const_pointer_cast<Entry>(o.entry)->pch = o.pch;
  return o;
}

}  // namespace kjit
