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
    "  info                library, NVRTC, driver and cuBLASLt versions, devices,\n"
    "                      cache location and state\n"
    "  help [COMMAND]      this text, or a command's help (same as COMMAND --help)\n"
    "\n"
    "Options accepted by every command (before or after its name):\n"
    "  --cache-dir DIR     use the cache in DIR instead of the default location\n"
    "  --json              print data as JSON on stdout (commands that print data)\n"
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
    "  1  a compile failed (the NVRTC log is printed); for warm: a kernel failed\n"
    "  2  usage error: unknown command or option, missing or malformed argument (an\n"
    "     empty file name, a SIZE not of the form above), option or target NVRTC rejects\n"
    "  3  other error: unreadable file, unusable cache, malformed manifest, ...\n"
    "  4  cache show/rm: no entry with that key\n"
    "  5  cache verify/import: corrupt entries found (removed or rejected)\n"
    "\n"
    "Environment:\n"
    "  KJIT_CACHE_DIR      cache directory (default $XDG_CACHE_HOME/kjit, ~/.cache/kjit)\n"
    "  KJIT_CACHE_DISABLE  1 = no disk cache\n"
    "  KJIT_CACHE_MAX_SIZE size bound of the disk cache, e.g. 2G (default 1G)\n"
    "  KJIT_CACHE_READONLY 1 = use the disk cache read-only\n"
    "  KJIT_EXPORT_KEY     secret (16+ bytes) that signs cache exports; imports then\n"
    "                      require a valid signature on every entry\n"
    "  KJIT_REMOTE         redis://host:port[/db]: fleet tier shared by machines\n"
    "  KJIT_LOG            debug|info|warn|error: library diagnostics on stderr\n"
    "\n"
    "See kjit(1) for details.\n";

int dispatch(const std::string& cmd, const std::vector<std::string>& rest,
             kjit_cli::Global& g) {
  using namespace kjit_cli;
  if (cmd == "compile") return cmd_compile(rest, g);
  if (cmd == "cache") return cmd_cache(rest, g);
  if (cmd == "warm") return cmd_warm(rest, g);
  if (cmd == "info") return cmd_info(rest, g);
  if (cmd == "help") {
    if (rest.empty()) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    std::vector<std::string> h(rest.begin(), rest.end());
    const std::string sub = h.front();
    h.erase(h.begin());
    h.push_back("--help");
    if (sub == "help") {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    return dispatch(sub, h, g);
  }
  fail(kExitUsage, "unknown command '" + cmd + "' (see 'kjit --help')");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kjit_cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  Global g;
  std::string cmd;
  try {
    size_t i = 0;
    for (; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "-h" || a == "--help") {
        std::fputs(kHelp, stdout);
        return kExitOk;
      }
      if (a == "--version") {
        std::printf("kjit %s\n", kjit_version_string());
        return kExitOk;
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
