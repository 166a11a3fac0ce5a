// The parameters of a compiled entry's kernel, read from its PTX (code_facts.h reads the
// text; this knows the entry: its kernels and lowered names).
#pragma once

#include <string>
#include <vector>

#include "store/code_facts.h"
#include "store/entry.h"

namespace kjit {

// The parameters of kernel `name` of a compiled entry (a ".entry" name, or a name expression
// whose lowered name is one), from its PTX (ptx_entry_params, code_facts.h). Throws
// kjit::Error: KJIT_ERROR_NAME_NOT_FOUND for a kernel that is not there,
// KJIT_ERROR_UNSUPPORTED when the entry has no PTX or declares the kernel's parameters in a
// form this reader does not understand.
std::vector<PtxParam> kernel_params(const Entry& e, const std::string& name);

}  // namespace kjit
