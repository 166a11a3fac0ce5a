#include "store/entry_params.h"

#include "util/error.h"

namespace kjit {

std::vector<PtxParam> kernel_params(const Entry& e, const std::string& name) {
  std::string symbol = name;
  for (const auto& [expr, lowered] : e.names) {
    if (expr == name) symbol = lowered;
  }
  if (e.ptx.empty()) {
    fail(KJIT_ERROR_UNSUPPORTED, "the compiled result (target " + e.target +
                                     ") has no PTX, which the parameter layout is read from "
                                     "(compile with the PTX output)");
  }
  bool known = false;
  for (const std::string& k : e.kernels) known = known || k == symbol;
  if (!known) {
    std::string list;
    for (const std::string& k : e.kernels) list += (list.empty() ? "" : ", ") + k;
    fail(KJIT_ERROR_NAME_NOT_FOUND,
         "kernel '" + name + "' is not in the compiled result" +
             (list.empty() ? std::string(" (it has no kernels)") : " (its kernels: " + list + ")"));
  }
  std::vector<PtxParam> params;
  if (!ptx_entry_params(std::string_view(e.ptx.data(), e.ptx.size()), symbol, &params)) {
    fail(KJIT_ERROR_UNSUPPORTED,
         "the parameters of kernel '" + symbol + "' are declared in a form kjit does not read");
  }
  return params;
}

}  // namespace kjit
