// What compiled code says about itself, read from its outputs and log (text, no entry): the
// parameters of a kernel as its PTX declares them (so a host struct can be checked against
// the kernel without a GPU driver), and the performance advisories ptxas wrote into the
// compile log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kjit {

// One kernel parameter as the PTX declares it: bytes, and the alignment of its place in the
// parameter space (".param .align 64 .b8 p[1280]": 1280 and 64; ".param .u64 p": 8 and 8).
struct PtxParam {
  size_t size = 0;
  size_t align = 0;
};

// The parameters of the kernel whose ".entry" is `name` in `ptx`, in order. False when the
// PTX has no such entry, or declares a parameter this reader does not understand (*out is
// then empty).
bool ptx_entry_params(std::string_view ptx, std::string_view name, std::vector<PtxParam>* out);

// The performance advisories in a compile log: ptxas's "Potential Performance Loss" lines
// (C7509/C7510: wgmma serialised, and the like), each as "(C7510) Potential Performance
// Loss: ..." without ptxas's "ptxas info    : " prefix, in order, without repeats.
std::vector<std::string> ptxas_advisories(std::string_view log);

// One line that sums the advisories up for a log or a command's output, "" when there are
// none: "ptxas reports 1 performance advisory: (C7510) ...". Two or more are counted and the
// first is quoted.
std::string advisory_summary(const std::vector<std::string>& advisories);

}  // namespace kjit
