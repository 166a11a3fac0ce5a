#include "key/request.h"

#include <algorithm>

namespace kjit {

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
