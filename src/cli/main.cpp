// kjit — command-line tool for the kjit kernel cache: compile, inspect and manage the
// cache, pre-warm it from a manifest, and report the toolchain and devices.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli.h"

namespace {

const char* const kHelp =
    "Usage: kjit [--cache-dir DIR] [--json] [-q] COMMAND [ARGS...]\n"
    "\n"
    "Compile CUDA C++ through the kjit cache and manage what the cache stores.\n"
    "\n"
    "Commands:\n"
    "  compile FILE.cu     compile with NVRTC through the cache (like nvcc -cubin)\n"
    "  cache SUBCOMMAND    path | stats | ls | show KEY | rm KEY | prune --max-size SIZE |\n"
    "                      clear | verify | export FILE | import FILE\n"
    "  warm MANIFEST.json  compile a list of kernels into the cache in parallel\n"
    "  link INPUT...       link LTO-IR, PTX, CUBIN, ... with nvJitLink through the cache\n"
    "  info                library, NVRTC, driver and cuBLASLt versions, devices,\n"
    "                      cache location and state\n"
    "  help [COMMAND]      this text, or a command's help (same as COMMAND --help)\n"
    "\n"
    "Options accepted by every command (before or after its name):\n"
    "  --cache-dir DIR     use the cache in DIR instead of the default location\n"
    "  --json              print data as one JSON document on stdout, whose \"schema\"\n"
    "                      field names it (fields: kjit(1), JSON OUTPUT)\n"
    "  -q, --quiet         print only errors\n"
    "  -h, --help          show help for the command\n"
    "\n"
    "  kjit --version      print the library version\n"
    "\n"
    "SIZE (cache prune --max-size): a whole number of bytes, optionally followed by K, M,\n"
    "G or T (binary multiples; k, m, g, t too), less than 2^63: 4096, 512M, 2G. Not 1.5G,\n"
    "1e3, 0x10 or 5MB.\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  a compile or link failed (the NVRTC or nvJitLink log is printed); for warm:\n"
    "     a kernel failed\n"
    "  2  usage error: unknown command or option, missing or malformed argument (an\n"
    "     empty file name, a SIZE not of the form above), option or target NVRTC rejects\n"
    "  3  other error: unreadable file, malformed manifest or export file, a disabled or\n"
    "     unusable disk cache, no cache at DIR for the cache commands that only read\n"
    "  4  cache show/rm: no entry with that key\n"
    "  5  cache show/verify/import: corrupt entries found (removed or rejected)\n"
    "\n"
    "Commands that only read (info, cache path/stats/ls/show/verify/export, warm\n"
    "--dry-run) never create the cache directory or database.\n"
    "\n"
    "Environment:\n"
    "  KJIT_CACHE_DIR      cache directory (default $XDG_CACHE_HOME/kjit, ~/.cache/kjit)\n"
    "  KJIT_CACHE_DISABLE  1 = no disk cache\n"
    "  KJIT_CACHE_MAX_SIZE size bound of the disk cache, e.g. 2G (default 1G)\n"
    "  KJIT_CACHE_READONLY 1 = use the disk cache read-only\n"
    "  KJIT_EXPORT_KEY     secret (16+ bytes) that signs cache exports; imports then\n"
    "                      require a valid signature on every entry\n"
    "  KJIT_REMOTE         redis://host:port[/db]: fleet tier shared by machines\n"
    "  KJIT_NVJITLINK_LIBRARY  the nvJitLink library 'link' opens\n"
    "  KJIT_LOG            debug|info|warn|error: library diagnostics on stderr\n"
    "\n"
    "See kjit(1) for details.\n";

// The commands, in the order of the help text. A new command is one line here, one
// declaration in cli.h and its section in the help text and kjit(1).
struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args, kjit_cli::Global& g);
};
const Command kCommands[] = {
    {"compile", kjit_cli::cmd_compile},
    {"cache", kjit_cli::cmd_cache},
    {"warm", kjit_cli::cmd_warm},
    {"info", kjit_cli::cmd_info},
    {"link", kjit_cli::cmd_link},
};

int dispatch(const std::string& cmd, const std::vector<std::string>& rest, kjit_cli::Global& g) {
  using namespace kjit_cli;
  for (const Command& c : kCommands) {
    if (cmd == c.name) return c.run(rest, g);
  }
  if (cmd == "help") {
    if (rest.empty() || rest.front() == "help") {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    std::vector<std::string> h(rest.begin() + 1, rest.end());
    h.push_back("--help");
    return dispatch(rest.front(), h, g);
  }
  fail(kExitUsage, "unknown command '" + cmd + "' (see 'kjit --help')");
}

// Reads the global options before the command; returns the index of the command, or
// args.size() when there is none. Sets *exit_now (and returns) for --help and --version.
size_t parse_globals(const std::vector<std::string>& args, kjit_cli::Global& g, int* exit_now) {
  using namespace kjit_cli;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      *exit_now = kExitOk;
      return i;
    }
    if (a == "--version") {
      std::printf("kjit %s\n", kjit_version_string());
      *exit_now = kExitOk;
      return i;
    }
    if (a == "--json") {
      g.json = true;
    } else if (a == "-q" || a == "--quiet") {
      g.quiet = true;
    } else if (a == "--cache-dir" || a.rfind("--cache-dir=", 0) == 0) {
      std::string v;
      if (a == "--cache-dir") {
        if (i + 1 >= args.size()) fail(kExitUsage, "option '--cache-dir' needs a value");
        v = args[++i];
      } else {
        v = a.substr(std::strlen("--cache-dir="));
      }
      require_path("", "--cache-dir", v);
      g.cache_dir = v;
    } else if (!a.empty() && a[0] == '-') {
      fail(kExitUsage, "unknown option '" + a + "' (see 'kjit --help')");
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kjit_cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  Global g;
  std::string cmd;
  try {
    int exit_now = -1;
    const size_t i = parse_globals(args, g, &exit_now);
    if (exit_now >= 0) return exit_now;
    if (i >= args.size()) {
      std::fputs(kHelp, stderr);
      return kExitUsage;
    }
    cmd = args[i];
    std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    const int rc = dispatch(cmd, rest, g);
    if (std::fflush(stdout) != 0) {
      std::fprintf(stderr, "kjit: cannot write to standard output: %s\n", std::strerror(errno));
      return kExitError;
    }
    return rc;
  } catch (const Failure& f) {
    std::fflush(stdout);
    const std::string& label = g.label.empty() ? cmd : g.label;
    if (label.empty()) {
      std::fprintf(stderr, "kjit: %s\n", f.message.c_str());
    } else {
      std::fprintf(stderr, "kjit %s: %s\n", label.c_str(), f.message.c_str());
    }
    return f.code;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kjit: internal error: %s\n", e.what());
    return kExitError;
  }
}
