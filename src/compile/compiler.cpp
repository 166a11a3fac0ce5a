#include "compile/compiler.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "compile/builtin_std.h"
#include "compile/dep_manifest.h"
#include "compile/file_audit.h"
#include "compile/include_scan.h"
#include "compile/nvrtc_program.h"
#include "compile/pch.h"
#include "compile/thread_pool.h"
#include "compile/toolchain.h"
#include "compile/toolkit.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/utf8.h"

namespace kjit {

// The compile's outcome as the cache's single flight carries it, and back.
FlightResult to_flight(Outcome o) {
  return FlightResult{o.status, std::move(o.message), std::move(o.entry),
                      o.tier,   o.cacheable,          o.remember_failure,
                      o.pch};
}

Outcome from_flight(FlightResult r) {
  return Outcome{r.status, std::move(r.message), std::move(r.entry),
                 r.tier,   r.cacheable,          r.remember_failure,
                 r.pch};
}

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

std::string compute_base(const std::string& source, const CompileOptions& opts,
                         const NormalisedOptions& norm, const std::string& toolchain) {
  Sha256 h;
  hash_request(h, "kjit-base", source, opts, norm, toolchain);
  // Whether built-in standard headers may be given: the records say which were.
  h.u64(norm.builtin_std ? 1 : 0);
  return to_hex(h.finish());
}

// Past this many bytes of a program's own headers (not the toolkit's), no automatic PCH.
constexpr uint64_t kPchOwnHeaderBytes = 2 << 20;

// Options that write the names of source files into the code (debug and line
// information): a key from names NVRTC used relative to the working directory then also
// covers that directory.
bool writes_source_paths(const NormalisedOptions& norm) {
  for (const std::string& o : norm.key) {
    for (const char* p : {"-G", "--device-debug", "-lineinfo", "--generate-line-info"}) {
      if (o == p || o.rfind(std::string(p) + "=", 0) == 0) return true;
    }
  }
  return false;
}

std::string current_directory() {
  char buf[4096];
  return getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

// Length-prefixed, versioned encoding of everything that affects the output.
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

}  // namespace

namespace {

// Why a compile's result must not be stored, or "" when every file NVRTC opened for it is
// covered by the key: a file the scan read (with the same bytes now), a candidate the scan
// found absent, or a path below a directory the scan read whole. Not counted: NVRTC's first
// look at the program's own name (it compiles the source it was given), files opened only
// for writing (outputs such as --time=FILE), NVRTC's own PCH and temporary files, and the
// CUDA toolkit's files (covered by the toolchain id and the toolkit fingerprint in the key).
// `audit` is null when opens cannot be audited; its files marked nvrtc_private are the
// compile worker's own PCH and temporary files (it recognises them as this process would).
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
    if (f.nvrtc_private || path_under_any(path, roots) || nvrtc_private(path)) continue;
    bool covered;
    if (f.directory) {
      covered = path_under_any(path, std::vector<std::string>(scan.listed.begin(), scan.listed.end()));
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

// Says once per distinct reason why results are not cached.
void report_uncovered(const std::string& program, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.size() < 256 && said.insert(why).second) {
    log_warn("not caching '" + program + "': " + why);
  } else {
    log_debug("not caching '" + program + "': " + why);
  }
}

void validate_text(const std::string& text, kjit_status status, const std::string& what) {
  const size_t bad = utf8_error(text);
  if (bad == std::string::npos) return;
  fail(status,
       what + (text[bad] == '\0' ? " contains a NUL byte (byte " : " is not valid UTF-8 (byte ") +
           std::to_string(bad) + ")");
}

// Everything of a request that reaches NVRTC as text is valid UTF-8.
void validate_request(const std::string& source, const CompileOptions& opts) {
  validate_source(source);
  validate_text(opts.name, KJIT_ERROR_INVALID_ARGUMENT, "the program name");
  for (const auto& [name, contents] : opts.headers) {
    validate_text(name, KJIT_ERROR_INVALID_ARGUMENT, "header name");
    validate_text(contents, KJIT_ERROR_INVALID_SOURCE, "header '" + name + "'");
  }
  for (const auto& e : opts.name_expressions) {
    validate_text(e, KJIT_ERROR_INVALID_ARGUMENT, "name expression");
  }
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
  in.builtin_std = norm.builtin_std;
  in.read_directories = read_directories;
  return scan_includes(in);
}

void validate_source(const std::string& source) {
  if (source.empty()) fail(KJIT_ERROR_INVALID_SOURCE, "source is empty");
  validate_text(source, KJIT_ERROR_INVALID_SOURCE, "source");
}

Compiler::Compiler(Cache* cache, unsigned threads)
    : cache_(cache),
      threads_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())),
      mode_(int(compile_mode_from_env())),
      limits_(worker_limits_from_env()) {}

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
    return out;
  };
  Outcome o = audited(&pch);
  if (!pch.settle(audit)) {
    // NVRTC used a PCH other than the one kjit made and checked (another compile made one
    // in its directory): its code may be old. Compiled again without.
    log_info("NVRTC used a precompiled header whose inputs are not known; compiling '" + opts.name +
             "' again without precompiled headers");
    o = audited(nullptr);
    o.pch = int(PchOutcome::Failed);
  }
  audit->doubt = user_pch_doubt(norm.key, o.entry ? o.entry->log : "");
  if (o.entry) std::const_pointer_cast<Entry>(o.entry)->pch = o.pch;
  return o;
}

std::optional<Outcome> Compiler::compile_in_worker_process(
    const std::string& source, const CompileOptions& opts, const NormalisedOptions& norm,
    const std::string& key, bool use_pch, const CancelFlag& cancel, CompileMode m,
    AuditRecord* audit) {
  const std::string& tool = toolchain();
  std::string why;
  WorkerAddress addr = worker_address(cache_, tool, &why);
  const std::string where = addr.directory + "/" + addr.name;
  // After the worker could not be used, this process compiles here for a while before
  // trying again (starting a worker that cannot start costs time on every miss).
  static std::mutex backoff_mu;
  static std::map<std::string, double> backoff;  // address -> when to try again
  if (m == CompileMode::Auto) {
    std::lock_guard<std::mutex> lock(backoff_mu);
    auto it = backoff.find(where);
    if (it != backoff.end() && monotonic_ms() < it->second) return std::nullopt;
  }
  std::string cwd(4096, '\0');
  if (!addr.directory.empty() && !getcwd(cwd.data(), cwd.size())) {
    why = "the working directory cannot be read";
    addr.directory.clear();
  }
  WorkerAnswer a;
  if (!addr.directory.empty()) {
    cwd.resize(std::strlen(cwd.c_str()));
    worker::CompileRequest q;
    q.cwd = cwd;
    q.key = key;
    q.source = source;
    q.program_name = opts.name;
    q.headers = opts.headers;
    q.name_expressions = opts.name_expressions;
    q.target = norm.target;
    q.outputs = norm.outputs;
    q.nvrtc = norm.nvrtc;
    q.key_options = norm.key;
    q.use_pch = use_pch;
    q.time_limit_ms = limits_.time_limit_ms;
    q.memory_limit_bytes = limits_.memory_limit_bytes;
    WorkerSlot slot;  // one of the address's workers, held for this compile
    a = compile_in_worker(take_worker(addr, cancel, &slot), tool, q, cancel);
    why = a.message;
  }
  if (a.kind == WorkerAnswer::Kind::Failed) {
    Outcome o = a.failure;
    o.remember_failure = a.crashed;
    return o;
  }
  if (a.kind == WorkerAnswer::Kind::Reply) {
    Outcome o = std::move(a.reply.outcome);
    if (o.entry) std::const_pointer_cast<Entry>(o.entry)->key = key;
    *audit = std::move(a.reply.audit);
    return o;
  }
  if (m == CompileMode::Worker) {
    return Outcome{KJIT_ERROR_UNSUPPORTED,
                   "compile mode 'worker': the compile worker cannot be used: " + why, nullptr,
                   KJIT_TIER_COMPILED};
  }
  {
    std::lock_guard<std::mutex> lock(backoff_mu);
    if (backoff.size() > 64) backoff.clear();
    backoff[where] = monotonic_ms() + 30000;
  }
  static std::once_flag once;
  std::call_once(once, [&] {
    // Auto mode is meant to fall back: said at info level, once per process.
    log_info("compiling in this process: the compile worker cannot be used (" + why + ")");
  });
  return std::nullopt;
}

Compiler::~Compiler() = default;  // the pool joins after finishing queued jobs

void Compiler::find_toolkits(const CompileOptions& opts, bool reads_files) {
  if (reads_files) find_toolkit("", cache_);
  if (opts.toolkit_headers && !opts.toolkit_root.empty()) find_toolkit(opts.toolkit_root, cache_);
}

std::string Compiler::key(const std::string& source, const CompileOptions& opts) {
  validate_request(source, opts);
  const bool reads_files = may_read_files(source, opts);
  find_toolkits(opts, reads_files);
  const std::string& tool = toolchain();  // first: normalising asks for its facts
  const NormalisedOptions norm = normalise(opts, reads_files);
  if (!reads_files) return compute_key(source, opts, norm, tool, scan_for(source, opts, norm));
  // The key of a program that reads files comes from what NVRTC read for it: a stored
  // record that still holds gives it, else the program is compiled (and stored) to learn it.
  if (cache_) {
    const std::string base = compute_base(source, opts, norm, tool);
    if (auto o = manifest_hit(base, writes_source_paths(norm) ? current_directory() : "",
                              source, opts, /*fresh=*/false)) {
      return o->entry->key;
    }
  }
  Outcome o = compile_request(source, opts, nullptr);
  if (o.entry && !o.entry->key.empty()) return o.entry->key;
  fail(o.status, o.message);
}

std::string Compiler::request_hash(const std::string& source, const CompileOptions& opts) {
  validate_request(source, opts);
  const bool reads_files = may_read_files(source, opts);
  find_toolkits(opts, reads_files);
  const std::string& tool = toolchain();
  const NormalisedOptions norm = normalise(opts, reads_files);
  if (!reads_files) return compute_key(source, opts, norm, tool, IncludeScan());
  return compute_base(source, opts, norm, tool);
}

std::optional<Outcome> Compiler::remembered_hit(const std::string& key) {
  kjit_tier tier;
  if (EntryPtr e = cache_->lookup(key, &tier)) return Outcome{KJIT_OK, "", e, tier};
  return std::nullopt;
}

Outcome Compiler::compile(const char* source, const CompileOptions& opts,
                          const CancelFlag& cancel) {
  std::string remembered;
  if (cache_ && memo_.find(source, opts, &remembered)) {
    if (auto o = remembered_hit(remembered)) return std::move(*o);
  }
  return compile_request(source, opts, cancel);
}

Outcome Compiler::compile(std::string_view source, const CompileOptions& opts,
                          const CancelFlag& cancel) {
  std::string remembered;
  if (cache_ && memo_.find(source, opts, &remembered)) {
    if (auto o = remembered_hit(remembered)) return std::move(*o);
  }
  return compile_request(source, opts, cancel);
}

namespace {

// The stamps the memo checks for a record: its files' own, and for places found empty,
// their directory's stamp (one stat() for all the names it lacks; any entry made, removed
// or renamed there changes its times) where the directory had been settled for the racy
// window and is on a local file system; else the place's own.
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

}  // namespace

std::optional<Outcome> Compiler::manifest_hit(const std::string& base, const std::string& cwd_tag,
                                              const std::string& source,
                                              const CompileOptions& opts, bool fresh) {
  const std::string mkey = manifest_key(base);
  EntryPtr m;
  if (fresh) {
    m = cache_->stored(mkey);
  } else {
    kjit_tier tier;
    m = cache_->lookup(mkey, &tier, nullptr, /*counted=*/false);
  }
  if (!m || !m->is_manifest()) return std::nullopt;
  const auto records = parse_manifest(m->manifest);
  if (!records) {
    log_debug("the dependency manifest " + mkey + " cannot be read; compiling");
    return std::nullopt;
  }
  for (const DepRecord& r : *records) {
    std::vector<PathStamp> now;
    bool settled = false;
    if (!inputs_hold(r.inputs, &now, &settled)) continue;
    // The entry's key is recomputed from the record, never taken from it.
    if (dep_entry_key(base, r, cwd_tag) != r.entry_key) continue;
    kjit_tier tier;
    EntryPtr e = cache_->lookup(r.entry_key, &tier);
    if (!e) continue;
    IncludeScan coverage;  // for the memo: the stamps just checked
    coverage.looked = memo_stamps(std::move(now));
    coverage.settled = settled;
    if (std::any_of(r.inputs.begin(), r.inputs.end(), [](const FileInput& in) { return in.relative; })) {
      coverage.cwd = current_directory();
      PathStamp here;
      if (coverage.cwd.empty() || !stamp_path(".", &here)) {
        coverage.settled = false;
      } else {
        coverage.cwd_dev = here.dev;
        coverage.cwd_ino = here.ino;
      }
    }
    memo_.remember(source, opts, r.entry_key, coverage);
    return Outcome{KJIT_OK, "", e, tier};
  }
  return std::nullopt;
}

bool Compiler::add_to_manifest(const std::string& base, DepRecord record, const Entry& like) {
  const std::string mkey = manifest_key(base);
  std::vector<DepRecord> records;
  if (EntryPtr old = cache_->stored(mkey)) {
    if (auto parsed = parse_manifest(old->manifest)) records = std::move(*parsed);
  }
  records.erase(std::remove_if(records.begin(), records.end(),
                               [&](const DepRecord& r) { return r.entry_key == record.entry_key; }),
                records.end());
  records.insert(records.begin(), std::move(record));
  if (records.size() > kMaxDepRecords) records.resize(kMaxDepRecords);
  auto m = std::make_shared<Entry>();
  m->key = mkey;
  m->target = "manifest";  // what `kjit cache stats` and `list` show for it
  m->toolchain = like.toolchain;
  m->program_name = like.program_name;
  m->options = like.options;
  m->created = like.created;
  m->manifest = manifest_text(records);
  return cache_->store(m);
}

Outcome Compiler::compile_request(std::string_view source_bytes, const CompileOptions& opts,
                                  const CancelFlag& cancel) {
  const std::string source(source_bytes);
  validate_request(source, opts);
  // A program that can read no file does not need the toolkit found (options.h).
  const bool reads_files = may_read_files(source, opts);
  find_toolkits(opts, reads_files);
  const std::string& tool = toolchain();  // first: normalising asks for its facts
  const NormalisedOptions norm = normalise(opts, reads_files);
  if (reads_files) return compile_reading_files(source, opts, norm, cancel);
  const IncludeScan scan = scan_for(source, opts, norm);
  const std::string key = compute_key(source, opts, norm, tool, scan);
  auto run = [&]() -> Outcome {
    AuditRecord audit;
    Outcome o = run_compile(source, opts, norm, key, false, cancel, &audit);
    const std::string why = uncovered(scan, audit.available ? &audit : nullptr, opts.name, norm);
    if (!why.empty()) {
      o.cacheable = false;
      report_uncovered(opts.name, why);
    }
    return o;
  };
  if (!cache_) return run();
  std::function<bool()> cancelled;  // also ends a wait for another process's compile
  if (cancel) cancelled = [&cancel] { return cancel->load(std::memory_order_relaxed); };
  Outcome o = from_flight(cache_->get_or_compile(
      key, [&] { return to_flight(run()); }, cancelled));
  if (o.status == KJIT_OK && o.entry && o.cacheable) memo_.remember(source, opts, key, scan);
  return o;
}

Outcome Compiler::compile_reading_files(const std::string& source, const CompileOptions& opts,
                                        const NormalisedOptions& norm, const CancelFlag& cancel) {
  const std::string& tool = toolchain();
  const std::string base = compute_base(source, opts, norm, tool);
  const std::string cwd_tag = writes_source_paths(norm) ? current_directory() : "";
  if (cache_) {
    if (auto o = manifest_hit(base, cwd_tag, source, opts, /*fresh=*/false)) return *o;
  }
  // A preview of what NVRTC will read: the built-in standard headers it needs, whether
  // its includes reach the toolkit (precompiled headers pay there), and the bytes of the
  // files before the compile (a file modified just before it is vouched for by them).
  // No directory is read whole for a computed include the scan cannot follow.
  const IncludeScan scan = scan_for(source, opts, norm, /*read_directories=*/false);
  std::map<std::string, std::shared_ptr<const std::string>> before;
  for (const IncludedFile& f : scan.files) before.emplace(f.path, f.content);
  // Where a file would shadow a built-in header: those places must stay empty.
  std::vector<std::string> extra_absent;
  for (const std::string& place : scan.absent) {
    for (const std::string& name : scan.builtins) {
      for (const std::string& tail : {"/" + name, "/" + name + ".stdh"}) {
        if (place.size() > tail.size() &&
            place.compare(place.size() - tail.size(), tail.size(), tail) == 0) {
          extra_absent.push_back(place);
        }
      }
    }
  }
  // NVRTC is given the built-in standard headers the program uses as in-memory headers,
  // and a macro naming them: NVRTC checks in-memory headers against no precompiled header,
  // but takes a PCH only for the options it was made with, so one made with other headers
  // (or none: --no-builtin-std) is not used.
  CompileOptions with_builtins;
  NormalisedOptions norm_builtins;
  if (!scan.builtins.empty()) {
    with_builtins = with_builtin_std(opts, scan.builtins);
    norm_builtins = norm;
    norm_builtins.nvrtc.push_back(builtin_std_marker(scan.builtins));
  }
  const CompileOptions& given = scan.builtins.empty() ? opts : with_builtins;
  const NormalisedOptions& given_norm = scan.builtins.empty() ? norm : norm_builtins;
  // Programs whose includes reach the toolkit (CUB...) use precompiled headers, unless
  // their own headers are large (CUTLASS/CuTe): a PCH of those costs seconds to make and
  // NVRTC often fails to make it, and each such program is compiled once.
  uint64_t own_bytes = 0;
  for (const IncludedFile& f : scan.files) own_bytes += f.content ? f.content->size() : 0;
  const bool use_pch = given_norm.pch && scan.outside && own_bytes < kPchOwnHeaderBytes;
  bool stored = false;
  auto run = [&]() -> Outcome {
    const int64_t started = realtime_ns();
    const std::string cwd = current_directory();
    AuditRecord audit;
    // The request's base stands for the key until NVRTC's reads give it (the worker
    // remembers crashes under it).
    Outcome o = run_compile(source, given, given_norm, base, use_pch, cancel, &audit);
    if (!o.entry) return o;  // no compile happened (cancelled, the worker failed...)
    DepRecord record;
    std::string why;
    if (!audit.available) {
      why = "the files NVRTC reads cannot be audited on this system";
    } else if (!audit.doubt.empty()) {
      why = audit.doubt;
    } else {
      make_dep_record(audit, opts.name, started, before, norm.skip_roots, extra_absent, cwd,
                      &record, &why);
    }
    record.builtins = scan.builtins;
    auto entry = std::const_pointer_cast<Entry>(o.entry);
    if (!why.empty()) {
      Sha256 h;  // a key of its own, never stored
      h.field("kjit-not-stored");
      h.field(base);
      entry->key = to_hex(h.finish());
      o.cacheable = false;
      report_uncovered(opts.name, why);
      return o;
    }
    entry->key = dep_entry_key(base, record, cwd_tag);
    if (cache_ && o.status == KJIT_OK) {
      // The entry first, then the record that leads to it.
      record.entry_key = entry->key;
      stored = cache_->store(o.entry);
      add_to_manifest(base, std::move(record), *entry);
    }
    return o;
  };
  if (!cache_) return run();
  std::function<bool()> cancelled;  // also ends a wait for another process's compile
  if (cancel) cancelled = [&cancel] { return cancel->load(std::memory_order_relaxed); };
  // One compile per request at a time across threads and processes; a waiter takes the
  // record another compile stored if it holds here (the same files read the same way).
  Sha256 flight;
  flight.field("kjit-flight");
  flight.field(base);
  const FlightProbe probe = [&]() -> std::optional<FlightResult> {
    try {
      if (auto o = manifest_hit(base, cwd_tag, source, opts, /*fresh=*/true)) {
        return to_flight(std::move(*o));
      }
    } catch (const std::exception& e) {
      log_debug(std::string("checking a dependency manifest: ") + e.what());
    }
    return std::nullopt;
  };
  return from_flight(cache_->get_or_compile(
      to_hex(flight.finish()),
      [&] {
        FlightResult r = to_flight(run());
        r.stored = stored;
        return r;
      },
      cancelled, probe));
}

Outcome Compiler::run_compile(const std::string& source, const CompileOptions& opts,
                              const NormalisedOptions& norm, const std::string& key, bool use_pch,
                              const CancelFlag& cancel, AuditRecord* audit) {
  const CompileMode m = mode();
  if (m != CompileMode::InProcess) {
    if (auto o = compile_in_worker_process(source, opts, norm, key, use_pch, cancel, m, audit)) {
      return std::move(*o);
    }
  }
  return compile_audited(source, opts, norm, key, toolchain(), cancel, use_pch, audit);
}

const std::string& Compiler::toolchain() {
  std::call_once(toolchain_once_, [this] { toolchain_ = toolchain_id(cache_); });
  return toolchain_;
}

void Compiler::submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (!pool_) pool_ = std::make_unique<ThreadPool>(threads_);
  pool_->submit(std::move(job));
}

}  // namespace kjit
