// The kjit command-line tool: command lines taken apart (options, sizes) and usage errors.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli.h"

namespace kjit_cli {

void usage_error(const std::string& cmd, const std::string& msg) {
  fail(kExitUsage, msg + " (see 'kjit " + (cmd.empty() ? std::string() : cmd + " ") + "--help')");
}

void require_path(const std::string& cmd, const std::string& option, const std::string& value) {
  if (value.empty()) usage_error(cmd, "option '" + option + "' needs a non-empty path");
}

// ---- argument parsing -----------------------------------------------------------------

bool Parsed::has(const std::string& name) const {
  for (const auto& o : opts) {
    if (o.name == name) return true;
  }
  return false;
}

std::string Parsed::get(const std::string& name, const std::string& def) const {
  std::string v = def;
  for (const auto& o : opts) {
    if (o.name == name) v = o.value;
  }
  return v;
}

std::vector<std::string> Parsed::all(const std::string& name) const {
  std::vector<std::string> v;
  for (const auto& o : opts) {
    if (o.name == name) v.push_back(o.value);
  }
  return v;
}

Parsed parse_args(const std::string& cmd, const std::vector<std::string>& args,
                  const std::vector<OptSpec>& specs, Global& g) {
  std::vector<OptSpec> all = specs;
  all.push_back({"cache-dir", 0, true, Arg::kPath});
  all.push_back({"json", 0, false});
  all.push_back({"quiet", 'q', false});
  all.push_back({"help", 'h', false});

  Parsed p;
  // --help anywhere before "--" wins over everything else on the line.
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") {
      p.help = true;
      return p;
    }
  }
  auto store = [&](const OptSpec& s, const std::string& value) {
    const std::string name = s.long_name ? s.long_name : std::string(1, s.short_name);
    if (s.arg == Arg::kPath) require_path(cmd, s.long_name ? "--" + name : "-" + name, value);
    if (name == "cache-dir") {
      g.cache_dir = value;
    } else if (name == "json") {
      g.json = true;
    } else if (name == "quiet") {
      g.quiet = true;
    } else if (name == "help") {
      p.help = true;
    } else {
      p.opts.push_back({name, value});
    }
  };

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      p.after_dashdash.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const OptSpec* spec = nullptr;
      for (const auto& s : all) {
        if (s.long_name && name == s.long_name) spec = &s;
      }
      if (!spec) usage_error(cmd, "unknown option '--" + name + "'");
      if (spec->takes_value) {
        if (eq != std::string::npos) {
          store(*spec, a.substr(eq + 1));
        } else if (i + 1 < args.size()) {
          store(*spec, args[++i]);
        } else {
          usage_error(cmd, "option '--" + name + "' needs a value");
        }
      } else {
        if (eq != std::string::npos) usage_error(cmd, "option '--" + name + "' takes no value");
        store(*spec, "");
      }
      continue;
    }
    if (a.size() >= 2 && a[0] == '-') {
      const OptSpec* spec = nullptr;
      for (const auto& s : all) {
        if (s.short_name && s.short_name == a[1]) spec = &s;
      }
      if (!spec) usage_error(cmd, "unknown option '" + a + "'");
      if (spec->takes_value) {
        if (a.size() > 2) {
          store(*spec, a.substr(2));
        } else if (i + 1 < args.size()) {
          store(*spec, args[++i]);
        } else {
          usage_error(cmd, "option '-" + std::string(1, a[1]) + "' needs a value");
        }
      } else {
        if (a.size() > 2) usage_error(cmd, "unknown option '" + a + "'");
        store(*spec, "");
      }
      continue;
    }
    p.positional.push_back(a);
  }
  return p;
}

// ---- sizes ----------------------------------------------------------------------------

bool parse_size(const std::string& text, uint64_t* out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return false;
  unsigned shift = 0;
  if (digits + 1 == text.size()) {
    switch (text[digits]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        return false;
    }
  } else if (digits != text.size()) {
    return false;
  }
  const uint64_t max = (uint64_t{1} << 63) - 1;
  uint64_t v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v > (max >> shift)) return false;
  *out = v << shift;
  return true;
}

uint64_t size_option(const std::string& cmd, const std::string& option, const std::string& text) {
  uint64_t v = 0;
  if (!parse_size(text, &v)) {
    usage_error(cmd, "bad size '" + text + "' for " + option +
                         ": give a whole number of bytes, optionally followed by K, M, G or T "
                         "(binary multiples), e.g. 4096 or 512M, less than 8 EiB");
  }
  return v;
}

// ---- names ----------------------------------------------------------------------------

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  // A name this long is no typo of a known one (and the table below would be large).
  if (name.size() > 64) return std::string();
  // Optimal string alignment distance: insertions, deletions, substitutions and swaps of
  // two neighbouring letters each cost 1.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.size()][b.size()];
  };
  std::string best;
  size_t best_d = 0;
  for (const std::string& k : known) {
    const size_t d = distance(name, k);
    if (best.empty() || d < best_d) {
      best = k;
      best_d = d;
    }
  }
  // A third of the name's letters (at least one, at most three) may be wrong.
  const size_t limit = std::min<size_t>(3, std::max<size_t>(1, name.size() / 3));
  return !best.empty() && best_d <= limit ? best : std::string();
}

}  // namespace kjit_cli
