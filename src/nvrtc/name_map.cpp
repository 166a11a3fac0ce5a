#include "nvrtc/name_map.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "util/text.h"

namespace kjit {
namespace {

constexpr const char* kNameMapFile = "__nv_name_map(";
constexpr const char* kPragma = "#pragma nv_mangled_name";

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    lines.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string without_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

bool is_caret_line(const std::string& line) {
  return line.find('^') != std::string::npos &&
         line.find_first_not_of(" \t^\r") == std::string::npos;
}

bool is_error_line(const std::string& line) {
  return line.find(": error") != std::string::npos ||
         line.find(": catastrophic error") != std::string::npos;
}

// The caller's spelling of the expression NVRTC quotes (it may space it differently).
std::string callers_spelling(const std::string& quoted, const std::vector<std::string>& exprs) {
  const std::string bare = without_spaces(quoted);
  for (const std::string& e : exprs) {
    if (without_spaces(e) == bare) return e;
  }
  return quoted;
}

// `identifier "X" is undefined` -> X, else "".
std::string undefined_identifier(const std::string& why) {
  const std::string head = "identifier \"", tail = "\" is undefined";
  if (why.rfind(head, 0) != 0 || why.size() <= head.size() + tail.size() ||
      why.compare(why.size() - tail.size(), tail.size(), tail) != 0) {
    return "";
  }
  return why.substr(head.size(), why.size() - head.size() - tail.size());
}

bool has_word(const std::string& text, const std::string& word) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !ident(text[at - 1]);
    const bool ends = at + word.size() == text.size() || !ident(text[at + word.size()]);
    if (starts && ends) return true;
  }
  return false;
}

// NVRTC says that an identifier is undefined only the first time it meets it; a later
// expression that uses it gets a follow-on error ("type name is not allowed"). Give that
// expression the root cause too.
void share_undefined_identifiers(std::vector<std::pair<std::string, std::string>>* failed) {
  std::vector<std::string> undefined;
  for (const auto& f : *failed) {
    const std::string id = undefined_identifier(f.second);
    if (!id.empty()) undefined.push_back(id);
  }
  for (auto& f : *failed) {
    if (!undefined_identifier(f.second).empty()) continue;
    for (const std::string& id : undefined) {
      if (has_word(f.first, id)) {
        f.second = "identifier \"" + id + "\" is undefined";
        break;
      }
    }
  }
}

}  // namespace

NameMapReport explain_name_map(const std::string& log, const std::vector<std::string>& expressions,
                               const std::string& program) {
  NameMapReport r;
  const std::vector<std::string> lines = split_lines(log);
  std::vector<std::string> kept;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind(kNameMapFile, 0) != 0) {
      if (is_error_line(line)) ++r.program_errors;
      kept.push_back(line);
      continue;
    }
    // A name-map block: the error, the quoted pragma, the caret, a blank line.
    const size_t colon = line.find(": error: ");
    const std::string why = colon == std::string::npos ? trim(line.substr(line.find(':') + 1))
                                                       : trim(line.substr(colon + 9));
    std::string expr;
    if (i + 1 < lines.size()) {
      const size_t at = lines[i + 1].find(kPragma);
      if (at != std::string::npos) {
        expr = callers_spelling(trim(lines[i + 1].substr(at + std::strlen(kPragma))), expressions);
        ++i;
      }
    }
    while (i + 1 < lines.size() && is_caret_line(lines[i + 1])) ++i;
    if (i + 1 < lines.size() && trim(lines[i + 1]).empty()) ++i;
    const bool seen = std::any_of(r.failed.begin(), r.failed.end(),
                                  [&](const auto& f) { return f.first == expr; });
    if (!seen && colon != std::string::npos) r.failed.emplace_back(expr, why);
  }
  if (r.failed.empty()) {
    r.log = log;
    return r;
  }
  share_undefined_identifiers(&r.failed);
  // NVRTC's "N errors detected" counts the name map's errors too: keep it only beside the
  // program's own errors.
  std::string rest;
  for (const std::string& line : kept) {
    if (r.program_errors == 0 &&
        line.find(" detected in the compilation of ") != std::string::npos) {
      continue;
    }
    rest += line + "\n";
  }
  rest = trim(rest);
  r.log = rest.empty() ? "" : rest + "\n\n";
  for (const auto& [expr, why] : r.failed) {
    r.log += "kjit: error: name expression '" + expr + "' names nothing in '" + program +
             "': " + why + "\n";
  }
  r.log +=
      "kjit: note: a name expression is looked up in every program compiled with the options "
      "it was added to; give each program its own options (kjit_options_clone() of a shared "
      "base, then add its name expressions)\n";
  return r;
}

std::string name_map_summary(const NameMapReport& report, const std::string& program) {
  if (report.failed.empty()) return "";
  const auto& [expr, why] = report.failed.front();
  std::string s = "name expression '" + expr + "' names nothing in '" + program + "': " + why;
  if (report.failed.size() > 1) {
    s += " (and " + std::to_string(report.failed.size() - 1) + " more name expression" +
         (report.failed.size() > 2 ? "s" : "") + "; see the log)";
  }
  return s;
}

}  // namespace kjit
