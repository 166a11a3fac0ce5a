#include "key/request.h"

#include <algorithm>

namespace kjit {

#if defined(__GLIBCXX__) && defined(__x86_64__)
// CompileOptions::operator== must compare every field: this fails when one is added, as a
// reminder to compare it there too.
static_assert(sizeof(CompileOptions) == 192, "a field was added: compare it in operator==");
#endif

void CompileOptions::add_header(std::string header_name, std::string contents) {
  for (auto& [n, c] : headers) {
    if (n == header_name) {
      c = std::move(contents);
      return;
    }
  }
  headers.emplace_back(std::move(header_name), std::move(contents));
}

void CompileOptions::add_name_expression(const std::string& expr) {
  if (std::find(name_expressions.begin(), name_expressions.end(), expr) == name_expressions.end()) {
    name_expressions.push_back(expr);
  }
}

}  // namespace kjit
