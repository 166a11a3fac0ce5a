// The kjit command-line tool: shared declarations. The tool is a user of the public C API
// only (<kjit/kjit.h>); it never reaches into the library's internals.
#pragma once

#include <kjit/kjit.h>

#include <cstdint>
#include <string>
#include <vector>

struct cJSON;

namespace kjit_cli {

// Exit statuses (documented in `kjit --help` and kjit(1)).
enum Exit : int {
  kExitOk = 0,        // success
  kExitCompile = 1,   // a compile failed (log printed); `warm`: one or more kernels failed
  kExitUsage = 2,     // bad command line: unknown command/option, missing or bad argument
  kExitError = 3,     // any other error: file I/O, cache unusable, malformed manifest...
  kExitNotFound = 4,  // `cache show|rm KEY`: no such entry
  kExitCorrupt = 5,   // `cache verify|import`: corrupt entries found (and removed/rejected)
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

// Options shared by every command.
struct Global {
  std::string cache_dir;  // --cache-dir, "" = the library's default location
  bool json = false;      // --json
  bool quiet = false;     // -q / --quiet
  std::string label;      // how errors name the command, e.g. "cache show"; "" = the command
};

// ---- command-line parsing -----------------------------------------------------------

struct OptSpec {
  const char* long_name;  // without "--", or nullptr
  char short_name;        // 0 if none
  bool takes_value;
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
// Failure{kExitUsage} on an unknown option or a missing value.
Parsed parse_args(const std::string& cmd, const std::vector<std::string>& args,
                  const std::vector<OptSpec>& specs, Global& g);

// Usage error helper: "<msg> (see 'kjit <cmd> --help')".
[[noreturn]] void usage_error(const std::string& cmd, const std::string& msg);

// ---- helpers ------------------------------------------------------------------------

// "10M", "512k", "1G", "1.5G", "4096" -> bytes (binary multiples). false if malformed.
bool parse_size(const std::string& text, uint64_t* out);
// 5324 -> "5.2 KiB".
std::string human_bytes(uint64_t bytes);
// Milliseconds with sensible precision: "0.42 ms", "45 ms", "1.3 s".
std::string human_ms(double ms);
std::string format_time(int64_t unix_seconds);  // local time "2025-01-31 12:00:00", or "-"

bool read_file(const std::string& path, std::string* out, std::string* error);
bool write_file(const std::string& path, const void* data, size_t size, std::string* error);
std::string dirname_of(const std::string& path);
std::string basename_of(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);
std::string current_directory();  // getcwd(), or "." when it cannot be read
double now_ms();  // monotonic

const char* tier_name(int tier);
// "KJIT_ERROR_COMPILE" for KJIT_ERROR_COMPILE (the part of kjit_status_string before ':').
std::string status_name(int status);
// kjit_last_error() when set, else kjit_status_string(status).
std::string error_text(int status);  // "compiled", "memory", "disk", "remote"
const char* disk_state_name(int state);

// Opens the cache selected by --cache-dir (or the default). Fails with kExitError when the
// library cannot open it at all. Commands that only read open it read-write all the same,
// so that a cache nobody has used yet reads as empty (the library falls back to read-only
// by itself when the directory is not writable).
kjit_cache* open_cache(const Global& g, bool read_only);
// Fails with kExitError when the disk tier of `cache` is unusable for a command that needs
// it (`cmd` names the command, `need_write` also rejects a read-only tier).
void require_disk(kjit_cache* cache, const std::string& cmd, bool need_write);

// RAII holders for kjit handles.
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

// Prints a JSON value (pretty) followed by a newline to stdout.
void print_json(const cJSON* value);

// Map a compile-time status to an exit code (compile error family 1, option/target 2, ...).
int exit_code_for_compile_status(kjit_status st);

// ---- commands -------------------------------------------------------------------------

int cmd_compile(const std::vector<std::string>& args, Global& g);
int cmd_cache(const std::vector<std::string>& args, Global& g);
int cmd_warm(const std::vector<std::string>& args, Global& g);
int cmd_info(const std::vector<std::string>& args, Global& g);

}  // namespace kjit_cli
