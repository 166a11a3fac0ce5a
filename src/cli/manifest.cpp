// kjit warm: reading and checking a manifest. Every problem names the file, the place in it
// (kernels[2].defines) and what is wrong; an unknown field's message suggests the closest
// known one.
#include "manifest.h"

#include <cjson/cJSON.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "cli.h"

namespace kjit_cli {

const char kNoValue[] = "\x01";

namespace {

// The fields a manifest knows, where it knows them.
const std::vector<std::string> kTopFields = {"version", "defaults", "kernels"};
const std::vector<std::string> kKernelOnlyFields = {"name", "file", "source"};
const std::vector<std::string> kSharedFields = {"program_name", "targets",          "target",
                                                "options",      "defines",          "include_paths",
                                                "headers",      "name_expressions", "outputs"};

[[noreturn]] void bad_manifest(const std::string& file, const std::string& where,
                               const std::string& what) {
  fail(kExitError, "manifest '" + file + "': " + where + ": " + what);
}

std::vector<std::string> string_list(const cJSON* v, const std::string& file,
                                     const std::string& where, const char* field) {
  std::vector<std::string> out;
  if (cJSON_IsString(v)) {
    out.emplace_back(v->valuestring);
    return out;
  }
  if (!cJSON_IsArray(v)) {
    bad_manifest(file, where,
                 std::string("'") + field + "' must be a string or an array of strings");
  }
  const cJSON* item = nullptr;
  cJSON_ArrayForEach(item, v) {
    if (!cJSON_IsString(item)) {
      bad_manifest(file, where, std::string("'") + field + "' must hold only strings");
    }
    out.emplace_back(item->valuestring);
  }
  return out;
}

// For each string of the JSON `text`, keys included, in document order: whether it holds
// the escape \u0000. cJSON decodes it into a NUL byte, and the C string it then gives us
// ends there: the rest of the value would be lost without a word.
std::vector<bool> strings_with_nul(const std::string& text) {
  std::vector<bool> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '"') {
      ++i;
      continue;
    }
    bool nul = false;
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] != '\\' || i + 1 >= text.size()) continue;
      ++i;  // the escaped character
      if (text[i] == 'u' && text.compare(i + 1, 4, "0000") == 0) nul = true;
    }
    ++i;  // the closing quote
    out.push_back(nul);
  }
  return out;
}

// Walks the parsed manifest in document order beside strings_with_nul(). A NUL in an inline
// source or in a header's contents is collected into `found` (the kernel then fails like a
// source that is not valid UTF-8); anywhere else it cannot be passed on and the manifest is
// rejected. `in_kernel`: `node` is a field of an object in an array, that is of a kernel.
void find_nul_strings(const cJSON* node, const cJSON* parent, bool in_kernel,
                      const std::string& where, const std::vector<bool>& with_nul, size_t* next,
                      std::set<const cJSON*>* found, const std::string& file) {
  auto has_nul = [&]() { return *next < with_nul.size() && with_nul[(*next)++]; };
  if (node->string && has_nul()) {
    bad_manifest(file, where, "a name holds a NUL character (\\u0000)");
  }
  if (cJSON_IsString(node)) {
    if (!has_nul()) return;
    const bool source = in_kernel && std::strcmp(node->string ? node->string : "", "source") == 0;
    const bool header = parent && parent->string && std::strcmp(parent->string, "headers") == 0;
    if (!source && !header) {
      bad_manifest(file, where, "holds a NUL character (\\u0000), which cannot be passed on");
    }
    found->insert(node);
    return;
  }
  const bool kernel = cJSON_IsObject(node) && parent && cJSON_IsArray(parent);
  size_t index = 0;
  const cJSON* child = nullptr;
  cJSON_ArrayForEach(child, node) {
    std::string at;
    if (cJSON_IsObject(node)) {
      const std::string name = child->string ? child->string : "";
      at = where.empty() ? name : where + "." + name;
    } else {
      at = where + "[" + std::to_string(index) + "]";
    }
    find_nul_strings(child, node, kernel, at, with_nul, next, found, file);
    ++index;
  }
}

// "unknown field 'optoins'; did you mean 'options'?", or the list of the known fields when
// none is close.
[[noreturn]] void unknown_field(const std::string& file, const std::string& where,
                                const std::string& field, const std::vector<std::string>& known) {
  const std::string near = closest_name(field, known);
  const std::string shown = field.size() > 80 ? field.substr(0, 77) + "..." : field;
  std::string what = "unknown field '" + shown + "'";
  if (!near.empty()) {
    what += "; did you mean '" + near + "'?";
  } else {
    what += " (known fields: ";
    for (size_t i = 0; i < known.size(); ++i) what += (i ? ", " : "") + known[i];
    what += ")";
  }
  bad_manifest(file, where, what);
}

// Where a field is read: the manifest, the place, the strings holding a NUL character.
struct FieldContext {
  const std::string& file;
  const std::string& where;
  const std::set<const cJSON*>& nul;
};

void apply_defines(const cJSON* f, KernelSpec& k, const FieldContext& at) {
  if (cJSON_IsArray(f)) {
    for (auto& d : string_list(f, at.file, at.where, "defines")) {
      const size_t eq = d.find('=');
      if (d.empty() || eq == 0) bad_manifest(at.file, at.where, "bad define '" + d + "'");
      k.defines.emplace_back(d.substr(0, eq),
                             eq == std::string::npos ? std::string(kNoValue) : d.substr(eq + 1));
    }
    return;
  }
  if (!cJSON_IsObject(f)) {
    bad_manifest(at.file, at.where, "'defines' must be an object or an array of \"NAME=VALUE\"");
  }
  const cJSON* d = nullptr;
  cJSON_ArrayForEach(d, f) {
    std::string value;
    if (cJSON_IsString(d)) {
      value = d->valuestring;
    } else if (cJSON_IsNumber(d)) {
      char buf[64];
      if (d->valuedouble == static_cast<double>(static_cast<long long>(d->valuedouble))) {
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(d->valuedouble));
      } else {
        std::snprintf(buf, sizeof buf, "%.17g", d->valuedouble);
      }
      value = buf;
    } else if (cJSON_IsNull(d) || cJSON_IsTrue(d)) {
      value = kNoValue;
    } else {
      bad_manifest(
          at.file, at.where,
          std::string("define '") + d->string + "' must be a string, a number, true or null");
    }
    k.defines.emplace_back(d->string, value);
  }
}

void apply_headers(const cJSON* f, KernelSpec& k, const FieldContext& at) {
  if (!cJSON_IsObject(f))
    bad_manifest(at.file, at.where, "'headers' must be an object name -> contents");
  const cJSON* h = nullptr;
  cJSON_ArrayForEach(h, f) {
    if (!cJSON_IsString(h)) {
      bad_manifest(at.file, at.where, std::string("header '") + h->string + "' must be a string");
    }
    k.headers.emplace_back(h->string, h->valuestring);
    // A later header of the same name replaces an earlier one, NUL or not.
    if (at.nul.count(h)) {
      k.header_nul[h->string] =
          "header '" + std::string(h->string) + "' " + nul_byte_at(std::strlen(h->valuestring));
    } else {
      k.header_nul.erase(h->string);
    }
  }
}

// A field that a kernel and "defaults" both accept. Returns false for any other name.
bool apply_shared_field(const cJSON* f, const std::string& field, KernelSpec& k,
                        const FieldContext& at) {
  auto append = [&](std::vector<std::string>& to) {
    for (auto& o : string_list(f, at.file, at.where, field.c_str())) to.push_back(o);
  };
  if (field == "targets" || field == "target") {
    k.targets = string_list(f, at.file, at.where, field.c_str());
    if (k.targets.empty()) bad_manifest(at.file, at.where, "'" + field + "' is empty");
  } else if (field == "options") {
    append(k.options);
  } else if (field == "include_paths") {
    append(k.include_paths);
  } else if (field == "name_expressions") {
    append(k.name_expressions);
  } else if (field == "outputs") {
    k.outputs = string_list(f, at.file, at.where, "outputs");
    for (const auto& o : k.outputs) {
      if (o != "ptx" && o != "cubin" && o != "ltoir") {
        bad_manifest(at.file, at.where, "unknown output '" + o + "' (ptx, cubin or ltoir)");
      }
    }
  } else if (field == "defines") {
    apply_defines(f, k, at);
  } else if (field == "headers") {
    apply_headers(f, k, at);
  } else if (field == "program_name") {
    if (!cJSON_IsString(f)) bad_manifest(at.file, at.where, "'program_name' must be a string");
    k.program_name = f->valuestring;
  } else {
    return false;
  }
  return true;
}

// A field only a kernel has (name, file, source). Returns false for any other name.
bool apply_kernel_field(const cJSON* f, const std::string& field, KernelSpec& k,
                        const FieldContext& at, bool* have_source) {
  if (field != "name" && field != "file" && field != "source") return false;
  if (!cJSON_IsString(f)) bad_manifest(at.file, at.where, "'" + field + "' must be a string");
  if (field == "name") {
    k.name = f->valuestring;
    return true;
  }
  if (*have_source) bad_manifest(at.file, at.where, "give either 'file' or 'source', not both");
  *have_source = true;
  if (field == "file") {
    k.file = f->valuestring;
    if (k.file.empty()) bad_manifest(at.file, at.where, "'file' is empty");
  } else {
    k.source = f->valuestring;
    if (at.nul.count(f)) k.source_nul = "inline source " + nul_byte_at(k.source.size());
  }
  return true;
}

// Merges the fields of `obj` into `k`. Lists append; maps replace by name; scalars replace.
// `at.nul` holds the strings that have a NUL character (see find_nul_strings()).
void apply_fields(const cJSON* obj, KernelSpec& k, bool is_default, const FieldContext& at) {
  if (!cJSON_IsObject(obj)) bad_manifest(at.file, at.where, "must be a JSON object");
  std::vector<std::string> known = kSharedFields;
  if (!is_default) known.insert(known.begin(), kKernelOnlyFields.begin(), kKernelOnlyFields.end());
  const cJSON* f = nullptr;
  bool have_source = false;
  cJSON_ArrayForEach(f, obj) {
    const std::string field = f->string ? f->string : "";
    if (apply_shared_field(f, field, k, at)) continue;
    if (is_default) {
      if (std::find(kKernelOnlyFields.begin(), kKernelOnlyFields.end(), field) !=
          kKernelOnlyFields.end()) {
        bad_manifest(at.file, at.where, "'" + field + "' belongs to a kernel, not to the defaults");
      }
      unknown_field(at.file, at.where, field, known);
    }
    if (!apply_kernel_field(f, field, k, at, &have_source)) {
      unknown_field(at.file, at.where, field, known);
    }
  }
  if (!is_default && !have_source) bad_manifest(at.file, at.where, "needs 'file' or 'source'");
}

// The manifest's text parsed, with the strings that hold a NUL character collected.
void parse_manifest(const std::string& path, const std::string& text, JsonHolder* root,
                    std::set<const cJSON*>* nul_strings) {
  const std::string nul = nul_byte_problem(text);
  if (!nul.empty()) fail(kExitError, "manifest '" + path + "' " + nul + " (JSON is text)");
  root->p = cJSON_ParseWithLength(text.data(), text.size());
  if (!root->p) {
    const char* at = cJSON_GetErrorPtr();
    size_t line = 1;
    if (at && at >= text.data() && at <= text.data() + text.size()) {
      line += static_cast<size_t>(std::count(static_cast<const char*>(text.data()), at, '\n'));
    }
    fail(kExitError, "manifest '" + path + "': invalid JSON near line " + std::to_string(line));
  }
  const std::vector<bool> with_nul = strings_with_nul(text);
  size_t next = 0;
  find_nul_strings(root->p, nullptr, false, "", with_nul, &next, nul_strings, path);
  if (next != with_nul.size() && std::count(with_nul.begin(), with_nul.end(), true) > 0) {
    // Cannot happen for JSON cJSON accepts; refuse rather than cut a string.
    bad_manifest(path, "top level", "a string holds a NUL character (\\u0000)");
  }
}

// The top level: an array of kernels, or an object with "version", "defaults", "kernels".
const cJSON* read_top_level(const cJSON* root, KernelSpec* defaults, const FieldContext& at) {
  if (cJSON_IsArray(root)) return root;
  if (!cJSON_IsObject(root)) {
    bad_manifest(at.file, "top level", "must be an object with \"kernels\" or an array of kernels");
  }
  const cJSON* kernels = nullptr;
  const cJSON* f = nullptr;
  cJSON_ArrayForEach(f, root) {
    const std::string field = f->string ? f->string : "";
    if (field == "version") {
      if (!cJSON_IsNumber(f) || f->valueint != 1) {
        bad_manifest(at.file, "version", "only version 1 is understood");
      }
    } else if (field == "defaults") {
      const std::string where = "defaults";
      apply_fields(f, *defaults, true, FieldContext{at.file, where, at.nul});
    } else if (field == "kernels") {
      kernels = f;
    } else {
      unknown_field(at.file, "top level", field, kTopFields);
    }
  }
  if (!cJSON_IsArray(kernels)) bad_manifest(at.file, "top level", "'kernels' must be an array");
  return kernels;
}

}  // namespace

std::vector<KernelSpec> load_manifest(const std::string& path, bool targets_given) {
  std::string text, err;
  if (!read_bounded_file(path, kMaxManifestBytes, "a manifest", false, &text, &err)) {
    fail(kExitError, "cannot read manifest '" + path + "': " + err);
  }
  JsonHolder root;
  std::set<const cJSON*> nul_strings;
  parse_manifest(path, text, &root, &nul_strings);
  const std::string top = "top level";
  KernelSpec defaults;
  const cJSON* kernels = read_top_level(root.p, &defaults, FieldContext{path, top, nul_strings});
  std::vector<KernelSpec> out;
  int index = 0;
  const cJSON* k = nullptr;
  cJSON_ArrayForEach(k, kernels) {
    const std::string where = "kernels[" + std::to_string(index++) + "]";
    KernelSpec spec = defaults;
    apply_fields(k, spec, false, FieldContext{path, where, nul_strings});
    if (spec.name.empty()) spec.name = spec.file.empty() ? where : basename_of(spec.file);
    if (spec.targets.empty() && !targets_given) {
      bad_manifest(path, where + " (" + spec.name + ")",
                   "no target: give 'targets' here or in 'defaults', or pass --arch");
    }
    if (!spec.file.empty() && spec.program_name.empty()) spec.program_name = spec.file;
    if (!spec.source_nul.empty() || !spec.header_nul.empty()) {
      spec.problem = spec.source_nul.empty() ? spec.header_nul.begin()->second : spec.source_nul;
      spec.problem_status = KJIT_ERROR_INVALID_SOURCE;
    }
    out.push_back(std::move(spec));
  }
  if (out.empty()) bad_manifest(path, "kernels", "the list is empty");
  return out;
}

}  // namespace kjit_cli
