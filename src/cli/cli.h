// The kjit command-line tool: shared declarations, grouped by the file that defines them. The
// tool is a user of the public C API only (<kjit/kjit.h>); it never reaches into the
// library's internals.
#pragma once

#include <kjit/kjit.h>

#include <cstdint>
#include <string>
#include <vector>

struct cJSON;

namespace kjit_cli {

// ---- failures and exit statuses (errors.cpp) ------------------------------------------

// Exit statuses (documented in `kjit --help`, each command's --help and kjit(1)).
enum Exit : int {
  kExitOk = 0,        // success
  kExitCompile = 1,   // a compile failed (log printed); `warm`: one or more kernels failed
  kExitUsage = 2,     // bad command line: unknown command/option, missing or bad argument
  kExitError = 3,     // any other error: file I/O, no or unusable cache, malformed input...
  kExitNotFound = 4,  // `cache show|rm KEY`: no such entry
  kExitCorrupt = 5,   // `cache show|verify|import`: corrupt entries found (and removed/rejected)
};

// Thrown to stop a command with a message and an exit status. main() prints
// "kjit <command>: <message>" to stderr and exits with `code`.
struct Failure {
  int code;
  std::string message;
};

[[noreturn]] void fail(int code, std::string message);
// fail() with the library's own words: "<what>: <kjit_last_error()> [<status name>]".
[[noreturn]] void fail_status(kjit_status st, const std::string& what);
// "KJIT_ERROR_COMPILE" for KJIT_ERROR_COMPILE (the part of kjit_status_string before ':').
std::string status_name(int status);
// kjit_last_error() when set, else kjit_status_string(status).
std::string error_text(int status);
// Map a compile-time status to an exit code (compile error family 1, option/target 2, ...).
int exit_code_for_compile_status(kjit_status st);
// A compile log with the library's advice to API users (kjit_options_clone()) said in the
// tool's terms.
std::string log_for_cli(std::string log);

// ---- command lines (args.cpp) ---------------------------------------------------------

// Options shared by every command.
struct Global {
  std::string cache_dir;  // --cache-dir, "" = the library's default location
  bool json = false;      // --json
  bool quiet = false;     // -q / --quiet
  std::string label;      // how errors name the command, e.g. "cache show"; "" = the command
};

// What an option's value is, for the checks parse_args() makes on it.
enum class Arg {
  kAny,   // anything
  kPath,  // a file or directory name: must not be empty
};

struct OptSpec {
  const char* long_name;  // without "--", or nullptr
  char short_name;        // 0 if none
  bool takes_value;
  Arg arg = Arg::kAny;
};

struct ParsedOpt {
  std::string name;  // long name (or the short letter when there is no long name)
  std::string value;
};

struct Parsed {
  std::vector<ParsedOpt> opts;
  std::vector<std::string> positional;
  std::vector<std::string> after_dashdash;  // everything after "--"
  bool help = false;

  bool has(const std::string& name) const;
  // Last value of an option, or `def`.
  std::string get(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> all(const std::string& name) const;
};

// Parses `args` for command `cmd` with its own `specs` plus the global options
// (--cache-dir, --json, -q/--quiet, -h/--help), which it stores into `g`. Throws
// Failure{kExitUsage} on an unknown option, a missing value or an empty Arg::kPath value.
Parsed parse_args(const std::string& cmd, const std::vector<std::string>& args,
                  const std::vector<OptSpec>& specs, Global& g);

// Usage error helper: "<msg> (see 'kjit <cmd> --help')"; cmd "" points at 'kjit --help'.
[[noreturn]] void usage_error(const std::string& cmd, const std::string& msg);
// The one check of a file or directory name given to an option (`option` as "--output"):
// a usage error when it is empty.
void require_path(const std::string& cmd, const std::string& option, const std::string& value);

// The sizes the tool accepts (documented in kjit(1)): a whole number of bytes in decimal
// digits, optionally followed by one of K, M, G, T (or k, m, g, t), binary multiples, and
// less than 2^63 bytes: "4096", "512K", "512M", "2G", "1T". Nothing else: no fractions,
// exponents, hex, signs, spaces or two-letter units. False for anything else.
bool parse_size(const std::string& text, uint64_t* out);
// parse_size() for the value of a size option (`option` as "--max-size"), or a usage
// error saying what is accepted. The one parser for every size option.
uint64_t size_option(const std::string& cmd, const std::string& option, const std::string& text);

// The known name closest to `name` (edit distance, letters swapped count once) when it is
// close enough to be a likely typo, else "".
std::string closest_name(const std::string& name, const std::vector<std::string>& known);

// ---- numbers, times and names as printed (format.cpp) ---------------------------------

// 5324 -> "5.2 KiB".
std::string human_bytes(uint64_t bytes);
const char* tier_name(int tier);  // "compiled", "memory", "disk", "remote"
const char* disk_state_name(int state);

double now_ms();  // monotonic
// Milliseconds with sensible precision: "0.42 ms", "45 ms", "1.3 s".
std::string human_ms(double ms);
std::string format_time(int64_t unix_seconds);  // local time "2025-01-31 12:00:00", or "-"
// How long a compile request that took `elapsed_ms` of wall time waited for another
// process's compile of its key: the wall time less its own compile (`compile_ms` when
// `tier` is KJIT_TIER_COMPILED; a hit compiles nothing). 0 when it did not wait.
double wait_ms_of(bool waited, int tier, double elapsed_ms, double compile_ms);
// " after waiting 1.2 s for another process", or "" for no wait.
std::string waited_text(double wait_ms);

// ---- files and paths (files.cpp) ------------------------------------------------------

// Limits on what the tool reads into memory (documented in --help and kjit(1)).
constexpr uint64_t kMaxSourceBytes = 64ull << 20;    // a source file or standard input
constexpr uint64_t kMaxManifestBytes = 64ull << 20;  // a warm manifest

// Reads a whole file into *out: a regular file of at most `max_bytes`, or standard input
// (read up to the same limit) when `allow_stdin` and `path` is "-". Directories, devices,
// FIFOs and sockets are refused without being read, and so is a file past the limit. On
// failure returns false with *error saying why: the system's words, "not a regular file
// (a character device)" or "larger than 64 MiB (the limit for <what>)".
bool read_bounded_file(const std::string& path, uint64_t max_bytes, const char* what,
                       bool allow_stdin, std::string* out, std::string* error);
// True when `path` (symbolic links followed) is a regular file; else false with *error as
// read_bounded_file() words it.
bool check_regular_file(const std::string& path, std::string* error);
bool write_file(const std::string& path, const void* data, size_t size, std::string* error);
// "" when `text` holds no NUL byte, else "contains a NUL byte at byte offset N". Sources go
// to NVRTC as C strings, which a NUL byte would cut short.
std::string nul_byte_problem(const std::string& text);
std::string nul_byte_at(size_t offset);  // "contains a NUL byte at byte offset N"

// The tool's own path helpers, named apart from the library's internal dirname_of() and
// join_path(), whose results differ (there a bare name's directory is "", and a "." joined
// to stays). Only strings: nothing is looked up on disk.
//
// The directory part of `path`: everything before its last '/' ("a/b/c" -> "a/b",
// "a/b/" -> "a/b"), "/" for a name in the root ("/a"), and "." for a bare name ("a"), so
// that the result can always be opened or shown as a directory.
std::string parent_dir_or_dot(const std::string& path);
// The part of `path` after its last '/' ("a/b.cu" -> "b.cu"), or all of it.
std::string basename_of(const std::string& path);
// `name` reached from directory `dir`: "dir/name" (one '/' between), but `name` itself
// when it is absolute or empty, or when `dir` is "" or "." (no "./" is put in front).
std::string path_in(const std::string& dir, const std::string& name);
// The working directory (getcwd()), or "." when it cannot be read (deleted, too long, no
// permission): a caller then goes on with names relative to wherever the process is.
std::string current_directory_or_dot();

// ---- the cache (cache_open.cpp) -------------------------------------------------------

// The cache directory --cache-dir (or the default) names, found as kjit_cache_open() finds
// it (--cache-dir, else $KJIT_CACHE_DIR, $XDG_CACHE_HOME/kjit, $HOME/.cache/kjit,
// <tmpdir>/kjit-<uid>), without opening or creating anything.
std::string cache_location(const Global& g);
// The database file of the cache in `dir`.
std::string cache_database(const std::string& dir);
// True when KJIT_CACHE_DISABLE turns the disk tier off (as the library reads it).
bool disk_disabled_by_environment();

// Opens the cache selected by --cache-dir (or the default), creating its directory and
// database when they do not exist: for commands that write (compile, warm, cache rm, prune,
// clear, import). Fails with kExitError when the library cannot open it at all.
kjit_cache* open_cache(const Global& g);
// For commands that only read: opens the cache when its database exists (or the disk tier
// is disabled, which touches no file), and returns nullptr without creating anything when
// it does not. *dir is set to the cache directory either way.
kjit_cache* open_cache_if_present(const Global& g, std::string* dir);
// True when a cache directory `dir` that has no database yet could be made by the first
// compile (it exists, or its nearest existing parent is a writable directory on a file
// system that holds files): `cache stats` and `ls` then show an empty cache.
bool cache_can_be_created(const std::string& dir);
// open_cache_if_present() that fails with kExitError "no cache at DIR" when there is none.
kjit_cache* open_existing_cache(const Global& g);

// The statistics of `cache`; fails with kExitError when they cannot be read.
kjit_cache_stats read_cache_stats(kjit_cache* cache);
// Times `cache` has waited for another compiler of a key (kjit_cache_stats.waits), or 0
// when the statistics cannot be read. A compile waited when this grew across it.
uint64_t cache_waits(kjit_cache* cache);
// Fails with kExitError when the disk tier of `cache` is unusable for a command that needs
// it (`cmd` names the command, `need_write` also rejects a read-only tier).
void require_disk(kjit_cache* cache, const std::string& cmd, bool need_write);
// "" when the disk tier of a cache in state `disk_state` can be used (ok or read-only), else
// why not ("the disk cache is disabled (KJIT_CACHE_DISABLE is set)", "cache DIR cannot be
// used: REASON").
std::string disk_problem(int disk_state, const std::string& dir, const char* message);

// ---- the compile worker (worker_info.cpp) ---------------------------------------------

// The compile worker that serves `cache`: one line of text ("not running" or its state),
// and the same as a JSON object added to `parent` under "worker". A null `cache` (none
// exists yet) has no worker.
std::string worker_text(kjit_cache* cache);
void add_worker_json(cJSON* parent, kjit_cache* cache);

// ---- handles --------------------------------------------------------------------------
// RAII holders for kjit handles (JsonHolder's destructor is in json_out.cpp).
struct CacheHolder {
  kjit_cache* p = nullptr;
  ~CacheHolder() { kjit_cache_close(p); }
};
struct OptionsHolder {
  kjit_options* p = nullptr;
  ~OptionsHolder() { kjit_options_destroy(p); }
};
struct CompilerHolder {
  kjit_compiler* p = nullptr;
  ~CompilerHolder() { kjit_compiler_destroy(p); }
};
struct BinaryHolder {
  kjit_binary* p = nullptr;
  ~BinaryHolder() { kjit_binary_destroy(p); }
};
struct JsonHolder {
  cJSON* p = nullptr;
  ~JsonHolder();
};

// ---- JSON output (json_out.cpp) -------------------------------------------------------
// Every JSON document the tool prints is an object whose first field is
// "schema": {"name": NAME, "version": kJsonSchemaVersion}; the fields of each NAME are
// documented in kjit(1) (JSON OUTPUT) and only ever added to within a version.
constexpr int kJsonSchemaVersion = 1;
// A new document (an object holding only its "schema") for schema `name`, e.g.
// "kjit.cache.stats".
cJSON* new_document(const char* name);
// Prints a JSON document (pretty) followed by a newline to stdout. Numbers that are not
// whole (times in ms or s) are rounded to 3 decimal places first.
void print_json(cJSON* document);
// Adds to `obj` what the library's metadata of `binary` (kjit_binary_metadata_json) says:
// "target", "compile_ms", "sizes" {ptx, cubin, ltoir}, "kernels" [...], "names"
// {expression: lowered}, "log"; and with `with_metadata`, the metadata object itself as
// "metadata" (null when it cannot be parsed).
void add_binary_json(cJSON* obj, const kjit_binary* binary, bool with_metadata);

// ---- commands -------------------------------------------------------------------------

// `kjit compile`'s arguments taken apart: NVRTC's options in either spelling (-std=c++17,
// --use_fast_math, -Xptxas -v as -Xptxas=-v, -rdc as -rdc=true) and nvcc's spellings of
// kjit's options (-arch sm_90, -ptx, -cubin, -dlto, --output-file) are taken in place;
// after "--", every argument goes to NVRTC as it is but an output file (-o OUT).
struct CompileArgs {
  std::vector<std::string> kjit;    // kjit's options (nvcc's spellings as kjit's), FILE
  std::vector<std::string> nvrtc;   // NVRTC's options found in place, one argument each
  std::vector<std::string> passed;  // after "--"
  // nvcc's options NVRTC lacks, each said once: "warning: ignoring '-O3': ..." (a host-only
  // option, dropped) or "note: '...' taken as '...': ..." (one mapped to NVRTC's spelling,
  // -arch native to --arch auto). Options kjit compiles another way (-gencode, -code,
  // -arch all) are usage errors that say which.
  std::vector<std::string> notes;
};
CompileArgs split_compile_args(const std::vector<std::string>& args);

int cmd_compile(const std::vector<std::string>& args, Global& g);
int cmd_cache(const std::vector<std::string>& args, Global& g);
int cmd_warm(const std::vector<std::string>& args, Global& g);
int cmd_info(const std::vector<std::string>& args, Global& g);
int cmd_link(const std::vector<std::string>& args, Global& g);

}  // namespace kjit_cli
