// Shared by the grouped GEMM CPU tests: a rendered kernel's parameter layout read from its
// PTX and compared with the configuration's params().
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "grouped/render.h"

namespace kjit::test::grouped {

struct PtxParam {
  size_t size = 0, align = 0;
};

// The entry's parameters as the PTX declares them: ".param .align 64 .b8 name[128]" or
// ".param .u64 ..." / ".param .f32 ...".
inline std::vector<PtxParam> ptx_params(const std::string& ptx, const std::string& entry) {
  std::vector<PtxParam> out;
  size_t at = ptx.find(".entry " + entry + "(");
  if (at == std::string::npos) return out;
  const size_t end = ptx.find(')', at);
  std::istringstream in(ptx.substr(at, end - at));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(".param") == std::string::npos) continue;
    PtxParam q;
    const size_t al = line.find(".align ");
    const size_t br = line.find('[');
    if (br != std::string::npos) {
      q.size = std::stoul(line.substr(br + 1));
      q.align = al == std::string::npos ? 1 : std::stoul(line.substr(al + 7));
    } else if (line.find(".u64") != std::string::npos || line.find(".b64") != std::string::npos ||
               line.find(".s64") != std::string::npos || line.find(".f64") != std::string::npos) {
      q.size = q.align = 8;
    } else {
      q.size = q.align = 4;
    }
    out.push_back(q);
  }
  return out;
}

// The kernel in `ptx` takes exactly the parameters params(c) lists, of the same sizes and
// alignments.
inline void expect_param_layout(const kjit::grouped::Config& c, const std::string& ptx) {
  const std::vector<PtxParam> got = ptx_params(ptx, kjit::grouped::kKernelName);
  const std::vector<kjit::grouped::Param> want = kjit::grouped::params(c);
  ASSERT_EQ(got.size(), want.size()) << c.key();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].size, want[i].size) << c.key() << " parameter " << want[i].name;
    EXPECT_EQ(got[i].align, want[i].align) << c.key() << " parameter " << want[i].name;
  }
}

}  // namespace kjit::test::grouped
