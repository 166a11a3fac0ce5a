// C shims: the options builder.
#include "api/handles.h"
#include "key/toolkit.h"

using namespace kjit;
using namespace kjit::api;

namespace {

kjit_status check(const kjit_options* o, const char* fn) {
  if (!ok(o)) return error(KJIT_ERROR_INVALID_HANDLE, std::string(fn) + ": invalid options handle");
  return KJIT_OK;
}

kjit_status need(const char* s, const char* fn, const char* what) {
  if (!s) return error(KJIT_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " is NULL");
  if (!*s) return error(KJIT_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " is empty");
  return KJIT_OK;
}

}  // namespace

extern "C" {

KJIT_EXPORT kjit_status kjit_options_create(kjit_options** out) {
  return guard([&] {
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_options_create: out is NULL");
    *out = new kjit_options();
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_clone(const kjit_options* src, kjit_options** out) {
  return guard([&] {
    if (kjit_status s = check(src, "kjit_options_clone")) return s;
    if (!out) return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_options_clone: out is NULL");
    auto* copy = new kjit_options();
    copy->opts = src->opts;
    *out = copy;
    return KJIT_OK;
  });
}

KJIT_EXPORT void kjit_options_destroy(kjit_options* opts) {
  if (ok(opts)) delete opts;
}

KJIT_EXPORT kjit_status kjit_options_set_target(kjit_options* opts, const char* target) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_set_target")) return s;
    if (kjit_status s = need(target, "kjit_options_set_target", "target")) return s;
    if (!is_valid_target_syntax(target)) {
      return error(KJIT_ERROR_INVALID_ARGUMENT,
                   std::string("kjit_options_set_target: '") + target +
                       "' is not a target (expected sm_XY, sm_XYa, compute_XY or auto)");
    }
    opts->opts.target = target;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_set_device(kjit_options* opts, int device) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_set_device")) return s;
    if (device < 0)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_options_set_device: device < 0");
    opts->opts.device = device;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_set_outputs(kjit_options* opts, unsigned outputs) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_set_outputs")) return s;
    if (outputs & ~unsigned(KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN | KJIT_OUTPUT_LTOIR)) {
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_options_set_outputs: unknown output bits");
    }
    opts->opts.outputs = outputs;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_set_name(kjit_options* opts, const char* name) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_set_name")) return s;
    if (kjit_status s = need(name, "kjit_options_set_name", "name")) return s;
    opts->opts.name = name;
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_add(kjit_options* opts, const char* option) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_add")) return s;
    if (kjit_status s = need(option, "kjit_options_add", "option")) return s;
    opts->opts.raw.emplace_back(option);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_add_define(kjit_options* opts, const char* name,
                                                const char* value) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_add_define")) return s;
    if (kjit_status s = need(name, "kjit_options_add_define", "name")) return s;
    opts->opts.raw.push_back(std::string("-D") + name + (value ? std::string("=") + value : ""));
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_add_include_path(kjit_options* opts, const char* path) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_add_include_path")) return s;
    if (kjit_status s = need(path, "kjit_options_add_include_path", "path")) return s;
    opts->opts.raw.push_back(std::string("-I") + path);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_set_toolkit(kjit_options* opts, const char* root) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_set_toolkit")) return s;
    opts->opts.toolkit_headers = !root || *root;
    opts->opts.toolkit_root = root ? root : "";
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_set_pch(kjit_options* opts, int enabled) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_set_pch")) return s;
    opts->opts.pch = enabled != 0;
    return KJIT_OK;
  });
}

KJIT_EXPORT const char* kjit_toolkit_include_path(void) {
  static const std::string path = [] {
    std::string out;
    try {
      for (const std::string& dir : kjit::find_toolkit("").include_dirs) {
        out += (out.empty() ? "" : ":") + dir;
      }
    } catch (...) {
    }
    return out;
  }();
  return path.c_str();
}

KJIT_EXPORT kjit_status kjit_options_add_header(kjit_options* opts, const char* name,
                                                const char* contents) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_add_header")) return s;
    if (kjit_status s = need(name, "kjit_options_add_header", "name")) return s;
    if (!contents)
      return error(KJIT_ERROR_INVALID_ARGUMENT, "kjit_options_add_header: contents is NULL");
    opts->opts.add_header(name, contents);
    return KJIT_OK;
  });
}

KJIT_EXPORT kjit_status kjit_options_add_name_expression(kjit_options* opts, const char* expr) {
  return guard([&] {
    if (kjit_status s = check(opts, "kjit_options_add_name_expression")) return s;
    if (kjit_status s = need(expr, "kjit_options_add_name_expression", "expression")) return s;
    opts->opts.add_name_expression(expr);
    return KJIT_OK;
  });
}

}  // extern "C"
