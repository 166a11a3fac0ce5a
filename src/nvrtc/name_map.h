// Name expressions that name nothing. NVRTC reports each as errors in a file it synthesises
// ("__nv_name_map"), every error followed by the pragma that quotes the expression:
//
//   __nv_name_map(4): error: identifier "scale" is undefined
//     #pragma nv_mangled_name scale<float>
//                             ^
//
// explain_name_map() takes those blocks out of the log and says instead, once per
// expression in the caller's spelling, which expression failed and NVRTC's first reason.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kjit {

struct NameMapReport {
  // Expressions that failed (the caller's spelling) with NVRTC's first complaint, in the
  // order NVRTC reported them. Empty when the log has no name-map error.
  std::vector<std::pair<std::string, std::string>> failed;
  // Errors in the program itself (outside the name map).
  size_t program_errors = 0;
  // The log without the name-map blocks, followed by one "kjit: error:" line per failed
  // expression and a note on where name expressions live.
  std::string log;
};

// `program` is the program's name as given to NVRTC, for the messages.
NameMapReport explain_name_map(const std::string& log, const std::vector<std::string>& expressions,
                               const std::string& program);

// One line for a status message: "name expression 'E' names nothing in 'P': WHY" and, when
// several failed, how many more (the log lists them all).
std::string name_map_summary(const NameMapReport& report, const std::string& program);

}  // namespace kjit
