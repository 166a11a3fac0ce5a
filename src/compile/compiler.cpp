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

#include "compile/thread_pool.h"
#include "key/builtin_std.h"
#include "key/dep_manifest.h"
#include "key/file_audit.h"
#include "key/include_scan.h"
#include "key/key.h"
#include "key/toolchain.h"
#include "key/toolkit.h"
#include "nvrtc/nvrtc_program.h"
#include "nvrtc/pch.h"
#include "store/code_facts.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/utf8.h"

namespace kjit {

namespace {

// Past this many bytes of a program's own headers (not the toolkit's), no automatic PCH.
constexpr uint64_t kPchOwnHeaderBytes = 2 << 20;

// Says once per distinct reason why results are not cached.
// The outcome of a compile by a compiler without a cache: nothing is stored.
Outcome without_cache(Outcome o) {
  if (o.status == KJIT_OK && o.not_stored.empty()) o.not_stored = "the compiler has no cache";
  return o;
}

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

// The built-in standard header NVRTC could not open in a failed compile (its log's
// "cannot open source file" line), or "" when it names no built-in, or one in `tried`.
std::string unopened_builtin(const std::string& log, const std::vector<std::string>& tried) {
  const std::string marker = "cannot open source file \"";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = log.find('"', start);
  if (end == std::string::npos) return "";
  const std::string name = log.substr(start, end - start);
  if (!builtin_std_header(name)) return "";
  if (std::find(tried.begin(), tried.end(), name) != tried.end()) return "";
  return name;
}
}  // namespace

void validate_source(const std::string& source) {
  if (source.empty()) fail(KJIT_ERROR_INVALID_SOURCE, "source is empty");
  validate_text(source, KJIT_ERROR_INVALID_SOURCE, "source");
}

SourceObject::SourceObject(std::string text) : text_(std::move(text)) {
  validate_source(text_);
  static std::atomic<uint64_t> next{1};
  id_ = next.fetch_add(1, std::memory_order_relaxed);
}

Compiler::Compiler(Cache* cache, unsigned threads)
    : cache_(cache),
      threads_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())),
      mode_(int(compile_mode_from_env())),
      limits_(worker_limits_from_env()) {}

std::optional<Outcome> Compiler::compile_in_worker_process(
    const std::string& source, const CompileOptions& opts, const NormalisedOptions& norm,
    const std::string& key, bool use_pch, const CancelFlag& cancel, CompileMode m,
    AuditRecord* audit, const std::function<void()>& before_nvrtc) {
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
  const std::string cwd = addr.directory.empty() ? std::string() : current_directory();
  if (!addr.directory.empty() && cwd.empty()) {
    why = "the working directory cannot be read";
    addr.directory.clear();
  }
  WorkerAnswer a;
  if (!addr.directory.empty()) {
    worker::CompileRequest q;
    q.cwd = cwd;
    q.key = key;
    q.source = source;
    q.options = opts;
    q.norm = norm;
    q.use_pch = use_pch;
    q.time_limit_ms = limits_.time_limit_ms;
    q.memory_limit_bytes = limits_.memory_limit_bytes;
    WorkerSlot slot;  // one of the address's workers, held for this compile
    a = compile_in_worker(take_worker(addr, cancel, &slot), tool, q, cancel, before_nvrtc);
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

Compiler::Prepared Compiler::prepare(const std::string& source, const CompileOptions& opts) {
  validate_request(source, opts);
  // A program that can read no file does not need the toolkit found (options.h).
  const bool reads_files = may_read_files(source, opts);
  return Prepared{reads_files, normalise(opts, machine_facts(opts, reads_files, cache_))};
}

std::string Compiler::key(const std::string& source, const CompileOptions& opts) {
  const Prepared request = prepare(source, opts);
  const bool reads_files = request.reads_files;
  const NormalisedOptions& norm = request.norm;
  const std::string& tool = toolchain();
  if (!reads_files) return compute_key(source, opts, norm, tool, scan_for(source, opts, norm));
  // The key of a program that reads files comes from what NVRTC read for it: a stored
  // record that still holds gives it, else the program is compiled (and stored) to learn it.
  if (cache_) {
    const std::string base = compute_base(source, opts, norm, tool);
    if (auto o = manifest_hit(base, writes_source_paths(norm) ? current_directory() : "", source,
                              opts, /*fresh=*/false)) {
      return o->entry->key;
    }
  }
  Outcome o = compile_request(source, opts, nullptr);
  if (o.entry && !o.entry->key.empty()) return o.entry->key;
  fail(o.status, o.message);
}

std::optional<std::string> Compiler::known_key(const std::string& source,
                                               const CompileOptions& opts) {
  const Prepared request = prepare(source, opts);
  const NormalisedOptions& norm = request.norm;
  const std::string& tool = toolchain();
  if (!request.reads_files)
    return compute_key(source, opts, norm, tool, scan_for(source, opts, norm));
  if (!cache_) return std::nullopt;
  const std::string base = compute_base(source, opts, norm, tool);
  if (auto o = manifest_hit(base, writes_source_paths(norm) ? current_directory() : "", source,
                            opts, /*fresh=*/false)) {
    return o->entry->key;
  }
  return std::nullopt;
}

std::string Compiler::request_hash(const std::string& source, const CompileOptions& opts) {
  const Prepared request = prepare(source, opts);
  const bool reads_files = request.reads_files;
  const NormalisedOptions& norm = request.norm;
  const std::string& tool = toolchain();
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

Outcome Compiler::compile(const SourceObject& source, const CompileOptions& opts,
                          const CancelFlag& cancel) {
  std::string remembered;
  if (cache_ && memo_.find_object(source.id(), opts, &remembered)) {
    if (auto o = remembered_hit(remembered)) return std::move(*o);
  }
  Outcome o = compile(std::string_view(source.text()), opts, cancel);
  if (cache_ && o.status == KJIT_OK) memo_.remember_object(source.id(), source.text(), opts);
  return o;
}

std::optional<Outcome> Compiler::manifest_hit(const std::string& base, const std::string& cwd_tag,
                                              const std::string& source, const CompileOptions& opts,
                                              bool fresh) {
  const std::string mkey = manifest_key(base);
  EntryPtr m;
  if (fresh) {
    m = cache_->stored(mkey);
  } else {
    m = cache_->lookup_manifest(mkey);
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
    if (std::any_of(r.inputs.begin(), r.inputs.end(),
                    [](const FileInput& in) { return in.relative; })) {
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
  const Prepared request = prepare(source, opts);
  const bool reads_files = request.reads_files;
  const NormalisedOptions& norm = request.norm;
  if (reads_files) return compile_reading_files(source, opts, norm, cancel);
  const std::string& tool = toolchain();
  const IncludeScan scan = scan_for(source, opts, norm);
  const std::string key = compute_key(source, opts, norm, tool, scan);
  auto run = [&]() -> Outcome {
    AuditRecord audit;
    Outcome o = run_compile(source, opts, norm, key, false, cancel, &audit);
    const std::string why = uncovered(scan, audit.available ? &audit : nullptr, opts.name, norm);
    if (!why.empty()) {
      o.keep_out(why);
      report_uncovered(opts.name, why);
    }
    return o;
  };
  if (!cache_) return without_cache(run());
  std::function<bool()> cancelled;  // also ends a wait for another process's compile
  if (cancel) cancelled = [&cancel] { return cancel->load(std::memory_order_relaxed); };
  Outcome o = cache_->get_or_compile(key, run, cancelled);
  if (o.status == KJIT_OK && o.entry && o.cacheable) memo_.remember(source, opts, key, scan);
  return o;
}

Outcome Compiler::compile_reading_files(const std::string& source, const CompileOptions& opts,
                                        const NormalisedOptions& norm, const CancelFlag& cancel) {
  // When the request arrived: a file written before it (a code generator's header) is
  // stamped no later than this.
  const int64_t arrived = realtime_ns();
  const std::string& tool = toolchain();
  const std::string base = compute_base(source, opts, norm, tool);
  const std::string cwd_tag = writes_source_paths(norm) ? current_directory() : "";
  if (cache_) {
    if (auto o = manifest_hit(base, cwd_tag, source, opts, /*fresh=*/false)) return *o;
  }
  // A header the scan did not see included (a toolkit header's own #include <stdlib.h>,
  // say: the scan does not read the toolkit, which its fingerprint covers) that kjit has
  // built in: NVRTC stops at once when it cannot open it, and the compile is run again with
  // the built-in, scanned as if pre-included (its places must stay empty, as for any
  // built-in).
  NormalisedOptions scan_norm = norm;
  for (int attempt = 0;; ++attempt) {
    Outcome o = compile_scanned(source, opts, norm, scan_norm, base, cwd_tag, arrived, cancel);
    const std::string missing =
        o.status == KJIT_ERROR_COMPILE && o.entry && norm.builtin_std && attempt < 8
            ? unopened_builtin(o.entry->log, scan_norm.pre_includes)
            : std::string();
    if (missing.empty()) return o;
    log_info("'" + opts.name + "': NVRTC could not open <" + missing +
             ">, which a header the include scan does not read includes; compiling again with "
             "kjit's built-in <" +
             missing + ">");
    scan_norm.pre_includes.push_back(missing);
  }
}

Outcome Compiler::compile_scanned(const std::string& source, const CompileOptions& opts,
                                  const NormalisedOptions& norm, const NormalisedOptions& scan_norm,
                                  const std::string& base, const std::string& cwd_tag,
                                  int64_t arrived, const CancelFlag& cancel) {
  // A preview of what NVRTC will read: the built-in standard headers it needs and whether
  // its includes reach the toolkit (precompiled headers pay there). No directory is read
  // whole for a computed include the scan cannot follow.
  const IncludeScan scan = scan_for(source, opts, scan_norm, /*read_directories=*/false);
  // Where a file would shadow a built-in header: those places must stay empty.
  const std::vector<std::string> extra_absent = builtin_shadow_places(scan);
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
    // A file whose stamp is not kStampLagNs before `started` is not vouched for (a change
    // during the compile may be stamped that far back; key/inputs.h). Started at least that
    // long after the request arrived, so that the files written before it are vouched for:
    // a compile that got there sooner (a small program) waits the rest. `started` is read
    // when NVRTC can next start: once a worker answers (the wait overlaps a worker's
    // start) or before NVRTC runs in this process; the first reading stands (an earlier
    // start only vouches for fewer files).
    int64_t started = 0;
    const std::function<void()> at_start = [&] {
      if (!started) started = realtime_ns_from(arrived + kStampLagNs);
    };
    const std::string cwd = current_directory();
    AuditRecord audit;
    // The request's base stands for the key until NVRTC's reads give it (the worker
    // remembers crashes under it).
    Outcome o = run_compile(source, given, given_norm, base, use_pch, cancel, &audit, at_start);
    if (!o.entry) return o;           // no compile happened (cancelled, the worker failed...)
    if (!started) started = arrived;  // never read: the earliest NVRTC could have started
    DepRecord record;
    std::string why;
    if (!audit.available) {
      why = "the files NVRTC reads cannot be audited on this system";
    } else if (!audit.doubt.empty()) {
      why = audit.doubt;
    } else {
      make_dep_record(audit, opts.name, started, norm.skip_roots, extra_absent, cwd, &record, &why);
    }
    record.builtins = scan.builtins;
    auto entry = std::const_pointer_cast<Entry>(o.entry);
    if (!why.empty()) {
      Sha256 h;  // a key of its own, never stored
      h.field("kjit-not-stored");
      h.field(base);
      entry->key = to_hex(h.finish());
      o.keep_out(why);
      report_uncovered(opts.name, why);
      return o;
    }
    entry->key = dep_entry_key(base, record, cwd_tag);
    if (cache_ && o.status == KJIT_OK) {
      // The entry first, then the record that leads to it.
      record.entry_key = entry->key;
      stored = cache_->store(o.entry, &o.not_stored);
      add_to_manifest(base, std::move(record), *entry);
    }
    return o;
  };
  if (!cache_) return without_cache(run());
  std::function<bool()> cancelled;  // also ends a wait for another process's compile
  if (cancel) cancelled = [&cancel] { return cancel->load(std::memory_order_relaxed); };
  // One compile per request at a time across threads and processes; a waiter takes the
  // record another compile stored if it holds here (the same files read the same way).
  Sha256 flight;
  flight.field("kjit-flight");
  flight.field(base);
  const FlightProbe probe = [&]() -> std::optional<Outcome> {
    try {
      if (auto o = manifest_hit(base, cwd_tag, source, opts, /*fresh=*/true)) {
        return std::move(*o);
      }
    } catch (const std::exception& e) {
      log_debug(std::string("checking a dependency manifest: ") + e.what());
    }
    return std::nullopt;
  };
  return cache_->get_or_compile(
      to_hex(flight.finish()),
      [&] {
        Outcome r = run();
        r.stored = stored;
        return r;
      },
      cancelled, probe);
}

Outcome Compiler::run_compile(const std::string& source, const CompileOptions& opts,
                              const NormalisedOptions& norm, const std::string& key, bool use_pch,
                              const CancelFlag& cancel, AuditRecord* audit,
                              const std::function<void()>& before_nvrtc) {
  const CompileMode m = mode();
  Outcome o;
  bool done = false;
  if (m != CompileMode::InProcess) {
    if (auto w = compile_in_worker_process(source, opts, norm, key, use_pch, cancel, m, audit,
                                           before_nvrtc)) {
      o = std::move(*w);
      done = true;
    }
  }
  if (!done) {
    if (before_nvrtc) before_nvrtc();
    o = compile_audited(source, opts, norm, key, toolchain(), cancel, use_pch, audit);
  }
  add_failure_note(norm, &o);
  // What ptxas says costs performance (wgmma serialised by a call, such as a device
  // assert's) is worth a line in the log of the compile that produced it.
  if (o.status == KJIT_OK && o.entry && log_enabled(KJIT_LOG_WARN)) {
    const std::string summary = advisory_summary(ptxas_advisories(o.entry->log));
    if (!summary.empty()) {
      log_warn("'" + opts.name + "' (" + o.entry->target + "): " + summary +
               " (kjit_binary_advisory() lists them)");
    }
  }
  return o;
}

const std::string& Compiler::toolchain() {
  std::call_once(toolchain_once_, [this] { toolchain_ = toolchain_id(facts_of(cache_)); });
  return toolchain_;
}

void Compiler::submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (!pool_) pool_ = std::make_unique<ThreadPool>(threads_);
  pool_->submit(std::move(job));
}

}  // namespace kjit
