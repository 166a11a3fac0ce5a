#include "store/code_facts.h"

#include <cctype>
#include <cstdlib>

namespace kjit {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) words.push_back(s.substr(start, i - start));
  }
  return words;
}

// A decimal number of at most 12 digits, else 0.
size_t number(std::string_view s) {
  if (s.empty() || s.size() > 12) return 0;
  size_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  return v;
}

// Bytes of a PTX fundamental type (".b8", ".u32", ".f64" ...), 0 when `t` is none.
size_t type_bytes(std::string_view t) {
  if (t.size() < 3 || t[0] != '.') return 0;
  const char k = t[1];
  if (k != 'b' && k != 'u' && k != 's' && k != 'f') return 0;
  const size_t bits = number(t.substr(2));
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64 && bits != 128) return 0;
  return bits / 8;
}

// One ".param ..." declaration of an entry's list; false when it is not understood.
bool parse_param(std::string_view decl, PtxParam* out) {
  const std::vector<std::string_view> w = split_words(decl);
  if (w.size() < 3 || w[0] != ".param") return false;
  size_t align = 0, elem = 0, count = 1;
  for (size_t i = 1; i < w.size(); ++i) {
    if (w[i] == ".align" && i + 1 < w.size()) {
      // Before the type: the parameter's alignment. After it (".ptr .global .align 4"):
      // what the pointer points at, no property of the parameter.
      if (elem == 0) align = number(w[i + 1]);
      ++i;
    } else if (i + 1 == w.size()) {
      const size_t open = w[i].find('[');
      if (open != std::string_view::npos) {
        const size_t close = w[i].find(']', open);
        if (close == std::string_view::npos) return false;
        count = number(w[i].substr(open + 1, close - open - 1));
        if (count == 0) return false;
      }
    } else if (elem == 0) {
      elem = type_bytes(w[i]);
      if (elem == 0) return false;
    }
  }
  if (elem == 0) return false;
  out->size = elem * count;
  out->align = align ? align : elem;
  return true;
}

}  // namespace

bool ptx_entry_params(std::string_view ptx, std::string_view name, std::vector<PtxParam>* out) {
  out->clear();
  constexpr std::string_view directive = ".entry";
  for (size_t pos = 0; (pos = ptx.find(directive, pos)) != std::string_view::npos;) {
    pos += directive.size();
    size_t p = pos;
    if (p >= ptx.size() || !is_space(ptx[p])) continue;
    while (p < ptx.size() && is_space(ptx[p])) ++p;
    if (ptx.compare(p, name.size(), name) != 0) continue;
    p += name.size();
    while (p < ptx.size() && is_space(ptx[p])) ++p;
    if (p >= ptx.size() || ptx[p] == '{' || ptx[p] == '.') return true;  // no parameters
    if (ptx[p] != '(') continue;  // a longer name that starts with `name`
    const size_t close = ptx.find(')', p);
    if (close == std::string_view::npos) return false;
    std::string_view list = ptx.substr(p + 1, close - p - 1);
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view decl = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      if (split_words(decl).empty() && list.empty()) break;
      PtxParam param;
      if (!parse_param(decl, &param)) {
        out->clear();
        return false;
      }
      out->push_back(param);
    }
    return true;
  }
  return false;
}

std::vector<std::string> ptxas_advisories(std::string_view log) {
  std::vector<std::string> found;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    std::string_view line = log.substr(start, end - start);
    start = end + 1;
    if (line.find("Potential Performance Loss") == std::string_view::npos) continue;
    if (line.rfind("ptxas", 0) != 0) continue;  // ptxas's own lines only
    const size_t colon = line.find(" : ");
    if (colon != std::string_view::npos) line = line.substr(colon + 3);
    while (!line.empty() && (is_space(line.back()))) line.remove_suffix(1);
    std::string text(line);
    bool seen = false;
    for (const std::string& f : found) seen = seen || f == text;
    if (!seen) found.push_back(std::move(text));
  }
  return found;
}

std::string advisory_summary(const std::vector<std::string>& advisories) {
  if (advisories.empty()) return "";
  if (advisories.size() == 1) return "ptxas reports 1 performance advisory: " + advisories[0];
  return "ptxas reports " + std::to_string(advisories.size()) +
         " performance advisories, the first: " + advisories[0];
}

}  // namespace kjit
