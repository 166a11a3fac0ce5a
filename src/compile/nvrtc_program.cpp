#include "compile/nvrtc_program.h"

#include <nvrtc.h>

#include "util/error.h"
#include "util/fs.h"

namespace kjit {
namespace {

// Owns an nvrtcProgram.
class Program {
 public:
  ~Program() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram* out() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
};

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the terminating NUL
  return log;
}

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
                               " size: " + nvrtcGetErrorString(r));
  }
  std::string data(size, '\0');
  if (size) {
    r = get_fn(prog, data.data());
    if (r != NVRTC_SUCCESS) {
      fail(KJIT_ERROR_NVRTC,
           std::string("NVRTC could not return the ") + what + ": " + nvrtcGetErrorString(r));
    }
  }
  return data;
}

}  // namespace

Outcome run_nvrtc(const std::string& source, const CompileOptions& opts,
                  const NormalisedOptions& norm, const std::string& key,
                  const std::string& toolchain, const CancelFlag& cancel) {
  std::vector<const char*> header_sources, header_names;
  for (const auto& [name, contents] : opts.headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(contents.c_str());
  }
  Program prog;
  nvrtcResult r = nvrtcCreateProgram(prog.out(), source.c_str(), opts.name.c_str(),
                                     int(header_names.size()), header_sources.data(),
                                     header_names.data());
  if (r != NVRTC_SUCCESS) {
    return Outcome{r == NVRTC_ERROR_OUT_OF_MEMORY ? KJIT_ERROR_OUT_OF_MEMORY : KJIT_ERROR_NVRTC,
                   std::string("nvrtcCreateProgram failed for '") + opts.name +
                       "': " + nvrtcGetErrorString(r),
                   nullptr, KJIT_TIER_COMPILED};
  }
  for (const std::string& expr : opts.name_expressions) {
    r = nvrtcAddNameExpression(prog.get(), expr.c_str());
    if (r != NVRTC_SUCCESS) {
      return Outcome{KJIT_ERROR_NAME_NOT_FOUND,
                     "nvrtcAddNameExpression('" + expr + "') failed: " + nvrtcGetErrorString(r),
                     nullptr, KJIT_TIER_COMPILED};
    }
  }
  if (cancel) nvrtcSetFlowCallback(prog.get(), cancel_callback, cancel.get());

  std::vector<const char*> argv;
  for (const std::string& o : norm.nvrtc) argv.push_back(o.c_str());
  const double t0 = monotonic_ms();
  r = nvrtcCompileProgram(prog.get(), int(argv.size()), argv.data());
  const double ms = monotonic_ms() - t0;
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  entry->log = program_log(prog.get());

  if (r == NVRTC_ERROR_COMPILATION) {
    // A name expression that names nothing is reported by NVRTC as compile errors in a
    // synthesized file "__nv_name_map"; when those are the only errors, say so.
    if (!opts.name_expressions.empty() && only_name_map_errors(entry->log)) {
      return Outcome{KJIT_ERROR_NAME_NOT_FOUND,
                     "a name expression does not name a kernel in '" + opts.name +
                         "': " + head(entry->log, 2),
                     nullptr, KJIT_TIER_COMPILED};
    }
    return Outcome{KJIT_ERROR_COMPILE,
                   "compilation of '" + opts.name + "' for " + norm.target +
                       " failed: " + head(entry->log, 4),
                   entry, KJIT_TIER_COMPILED};
  }
  if (r == NVRTC_ERROR_INVALID_OPTION) {
    return Outcome{KJIT_ERROR_INVALID_OPTION,
                   "NVRTC rejected an option for '" + opts.name + "': " +
                       nvrtcGetErrorString(r) + (entry->log.empty() ? "" : ": " + head(entry->log, 4)),
                   nullptr, KJIT_TIER_COMPILED};
  }
  if (r == NVRTC_ERROR_CANCELLED) {
    return Outcome{KJIT_ERROR_CANCELLED, "compilation of '" + opts.name + "' was cancelled",
                   nullptr, KJIT_TIER_COMPILED};
  }
  if (r != NVRTC_SUCCESS) {
    return Outcome{KJIT_ERROR_NVRTC,
                   "nvrtcCompileProgram failed for '" + opts.name + "': " +
                       nvrtcGetErrorString(r) + (entry->log.empty() ? "" : ": " + head(entry->log, 4)),
                   nullptr, KJIT_TIER_COMPILED};
  }

  if (norm.outputs & KJIT_OUTPUT_LTOIR) {
    entry->ltoir = fetch(prog.get(), nvrtcGetLTOIRSize, nvrtcGetLTOIR, "LTO-IR");
  } else {
    entry->ptx = fetch(prog.get(), nvrtcGetPTXSize, nvrtcGetPTX, "PTX");
    if (!entry->ptx.empty() && entry->ptx.back() == '\0') entry->ptx.pop_back();
    entry->kernels = ptx_entry_names(entry->ptx);
    if (norm.outputs & KJIT_OUTPUT_CUBIN) {
      entry->cubin = fetch(prog.get(), nvrtcGetCUBINSize, nvrtcGetCUBIN, "CUBIN");
    }
    if (!(norm.outputs & KJIT_OUTPUT_PTX)) entry->ptx.clear();
  }
  for (const std::string& expr : opts.name_expressions) {
    const char* lowered = nullptr;
    r = nvrtcGetLoweredName(prog.get(), expr.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || !lowered) {
      return Outcome{KJIT_ERROR_NAME_NOT_FOUND,
                     "name expression '" + expr + "' has no lowered name in '" + opts.name +
                         "': " + nvrtcGetErrorString(r),
                     nullptr, KJIT_TIER_COMPILED};
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
  return Outcome{KJIT_OK, "", entry, KJIT_TIER_COMPILED};
}

}  // namespace kjit
