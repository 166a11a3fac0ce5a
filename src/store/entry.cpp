#include "store/entry.h"

#include <cjson/cJSON.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>

#include "store/code_facts.h"
#include "util/error.h"
#include "util/wire.h"

namespace kjit {
namespace {

struct JsonDeleter {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using Json = std::unique_ptr<cJSON, JsonDeleter>;

cJSON* string_array(const std::vector<std::string>& v) {
  cJSON* a = cJSON_CreateArray();
  for (const auto& s : v) cJSON_AddItemToArray(a, cJSON_CreateString(s.c_str()));
  return a;
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

[[noreturn]] void corrupt(const std::string& why) {
  fail(KJIT_ERROR_CACHE_CORRUPT, "cache entry metadata is invalid: " + why);
}

std::string get_string(const cJSON* obj, const char* name) {
  const cJSON* item = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsString(item) || !item->valuestring) corrupt(std::string("missing ") + name);
  return item->valuestring;
}

double get_number(const cJSON* obj, const char* name) {
  const cJSON* item = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsNumber(item)) corrupt(std::string("missing ") + name);
  return item->valuedouble;
}

// A whole number in [0, 2^53]: checked before it is converted (converting an out-of-range
// double to an integer is undefined behaviour).
uint64_t get_count(const cJSON* obj, const char* name) {
  const double v = get_number(obj, name);
  if (!(v >= 0 && v <= 9007199254740992.0) || v != static_cast<double>(static_cast<uint64_t>(v))) {
    corrupt(std::string("bad ") + name);
  }
  return static_cast<uint64_t>(v);
}

std::vector<std::string> get_strings(const cJSON* obj, const char* name) {
  const cJSON* arr = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsArray(arr)) corrupt(std::string("missing ") + name);
  std::vector<std::string> out;
  const cJSON* item;
  cJSON_ArrayForEach(item, arr) {
    if (!cJSON_IsString(item) || !item->valuestring) corrupt(std::string("bad ") + name);
    out.emplace_back(item->valuestring);
  }
  return out;
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Blob& b) {
  return out << b.view();
}

const Blob* Entry::blob(BlobKind kind) const {
  switch (kind) {
    case BlobKind::Ptx:
      return &ptx;
    case BlobKind::Cubin:
      return &cubin;
    case BlobKind::LtoIr:
      return &ltoir;
  }
  return nullptr;
}

Blob* Entry::blob(BlobKind kind) {
  return const_cast<Blob*>(static_cast<const Entry*>(this)->blob(kind));
}

uint64_t Entry::bytes() const {
  uint64_t n = ptx.size() + cubin.size() + ltoir.size() + log.size() + manifest.size();
  for (const auto& [e, l] : names) n += e.size() + l.size();
  return n;
}

namespace {
// Entry::pch as the metadata spells it.
const char* const kPchNames[] = {"none", "created", "used", "failed"};
}  // namespace

std::string Entry::metadata_json(int64_t created_at) const {
  Json root(cJSON_CreateObject());
  cJSON* r = root.get();
  cJSON_AddNumberToObject(r, "format", kCacheFormatVersion);
  cJSON_AddStringToObject(r, "target", target.c_str());
  cJSON_AddStringToObject(r, "toolchain", toolchain.c_str());
  cJSON_AddStringToObject(r, "program", program_name.c_str());
  cJSON_AddItemToObject(r, "options", string_array(options));
  cJSON* names_obj = cJSON_CreateArray();
  for (const auto& [expr, lowered] : names) {
    cJSON* pair = cJSON_CreateObject();
    cJSON_AddStringToObject(pair, "expression", expr.c_str());
    cJSON_AddStringToObject(pair, "lowered", lowered.c_str());
    cJSON_AddItemToArray(names_obj, pair);
  }
  cJSON_AddItemToObject(r, "names", names_obj);
  cJSON_AddItemToObject(r, "kernels", string_array(kernels));
  cJSON_AddStringToObject(r, "log", log.c_str());
  cJSON_AddItemToObject(r, "advisories", string_array(ptxas_advisories(log)));
  cJSON_AddNumberToObject(r, "compile_ms", compile_ms);
  cJSON_AddStringToObject(r, "pch", pch >= 0 && pch <= 3 ? kPchNames[pch] : "none");
  cJSON_AddNumberToObject(r, "created", static_cast<double>(created_at ? created_at : created));
  if (!manifest.empty()) cJSON_AddStringToObject(r, "manifest", manifest.c_str());
  cJSON* sizes = cJSON_CreateObject();
  cJSON_AddNumberToObject(sizes, "ptx", static_cast<double>(ptx.size()));
  cJSON_AddNumberToObject(sizes, "cubin", static_cast<double>(cubin.size()));
  cJSON_AddNumberToObject(sizes, "ltoir", static_cast<double>(ltoir.size()));
  cJSON_AddItemToObject(r, "sizes", sizes);
  char* text = cJSON_PrintUnformatted(r);
  if (!text) fail(KJIT_ERROR_OUT_OF_MEMORY, "could not format entry metadata");
  std::string out(text);
  cJSON_free(text);
  return out;
}

void Entry::load_metadata(const std::string& json) {
  Json root(cJSON_ParseWithLength(json.data(), json.size()));
  if (!root || !cJSON_IsObject(root.get())) corrupt("not a JSON object");
  const cJSON* r = root.get();
  const double format = get_number(r, "format");
  if (format != kCacheFormatVersion) {
    fail(KJIT_ERROR_CACHE_CORRUPT, "cache entry has format version " + number_text(format) +
                                       ", this kjit reads version " +
                                       std::to_string(kCacheFormatVersion));
  }
  target = get_string(r, "target");
  toolchain = get_string(r, "toolchain");
  program_name = get_string(r, "program");
  options = get_strings(r, "options");
  kernels = get_strings(r, "kernels");
  log = get_string(r, "log");
  compile_ms = get_number(r, "compile_ms");
  // Infinity and NaN would be written back as null (cJSON), which no reader accepts.
  if (!std::isfinite(compile_ms)) corrupt("bad compile_ms");
  created = static_cast<int64_t>(get_count(r, "created"));
  const std::string pch_text = get_string(r, "pch");
  pch = -1;
  for (int i = 0; i < 4; ++i) {
    if (pch_text == kPchNames[i]) pch = i;
  }
  if (pch < 0) corrupt("bad pch");
  const cJSON* m = cJSON_GetObjectItemCaseSensitive(r, "manifest");
  if (m && !cJSON_IsString(m)) corrupt("bad manifest");
  manifest = m ? m->valuestring : "";
  const cJSON* sizes = cJSON_GetObjectItemCaseSensitive(r, "sizes");
  if (!cJSON_IsObject(sizes)) corrupt("missing sizes");
  recorded_sizes.ptx = get_count(sizes, "ptx");
  recorded_sizes.cubin = get_count(sizes, "cubin");
  recorded_sizes.ltoir = get_count(sizes, "ltoir");
  names.clear();
  const cJSON* arr = cJSON_GetObjectItemCaseSensitive(r, "names");
  if (!cJSON_IsArray(arr)) corrupt("missing names");
  const cJSON* item;
  cJSON_ArrayForEach(item, arr) {
    names.emplace_back(get_string(item, "expression"), get_string(item, "lowered"));
  }
}

std::string Entry::metadata_binary(int64_t created_at) const {
  WireWriter w;
  w.u64(kCacheFormatVersion);
  w.str(target);
  w.str(toolchain);
  w.str(program_name);
  w.strs(options);
  w.u64(names.size());
  for (const auto& [expr, lowered] : names) {
    w.str(expr);
    w.str(lowered);
  }
  w.strs(kernels);
  w.str(log);
  w.f64(compile_ms);
  w.u64(uint64_t(pch >= 0 && pch <= 3 ? pch : 0));
  w.u64(static_cast<uint64_t>(created_at ? created_at : created));
  w.str(manifest);
  w.u64(ptx.size());
  w.u64(cubin.size());
  w.u64(ltoir.size());
  return std::move(w.bytes());
}

void Entry::load_metadata_binary(std::string_view bytes) {
  WireReader r(bytes);
  uint64_t format = 0, pch_value = 0, created_value = 0;
  try {
    format = r.u64();
    if (format == uint64_t(kCacheFormatVersion)) {
      target = r.str();
      toolchain = r.str();
      program_name = r.str();
      options = r.strs();
      names.resize(r.count());
      for (auto& [expr, lowered] : names) {
        expr = r.str();
        lowered = r.str();
      }
      kernels = r.strs();
      log = r.str();
      compile_ms = r.f64();
      pch_value = r.u64();
      created_value = r.u64();
      manifest = r.str();
      recorded_sizes.ptx = r.u64();
      recorded_sizes.cubin = r.u64();
      recorded_sizes.ltoir = r.u64();
      r.finish();
    }
  } catch (const WireError& e) {
    corrupt(std::string("binary metadata: ") + e.what());
  }
  if (format != uint64_t(kCacheFormatVersion)) {
    fail(KJIT_ERROR_CACHE_CORRUPT, "cache entry has format version " + std::to_string(format) +
                                       ", this kjit reads version " +
                                       std::to_string(kCacheFormatVersion));
  }
  if (!std::isfinite(compile_ms)) corrupt("bad compile_ms");
  if (pch_value > 3) corrupt("bad pch");
  if (created_value > uint64_t(INT64_MAX)) corrupt("bad created");
  pch = int(pch_value);
  created = int64_t(created_value);
}

const char* Entry::parts_problem() const {
  if (ptx.size() != recorded_sizes.ptx || cubin.size() != recorded_sizes.cubin ||
      ltoir.size() != recorded_sizes.ltoir) {
    return "parts of the wrong size for the metadata";
  }
  if (ptx.empty() && cubin.empty() && ltoir.empty() && !is_manifest()) return "entry has no code";
  return "";
}

Checksum entry_checksum(std::string_view key, EntryPart part, const void* data, size_t size) {
  static constexpr std::string_view kDomain = "kjit entry checksum";
  ChecksumStream h;
  h.field(kDomain);
  h.u64(kCacheFormatVersion);
  h.field(key);
  h.u64(static_cast<uint64_t>(part));
  h.field(data, size);
  return h.finish();
}

bool checksum_equals(std::string_view stored, const Checksum& expected) {
  return stored.size() == expected.size() &&
         std::memcmp(stored.data(), expected.data(), expected.size()) == 0;
}

std::vector<std::string> ptx_entry_names(std::string_view ptx) {
  std::vector<std::string> out;
  constexpr std::string_view directive = ".entry";
  size_t pos = 0;
  while ((pos = ptx.find(directive, pos)) != std::string_view::npos) {
    pos += directive.size();
    if (pos >= ptx.size() || (ptx[pos] != ' ' && ptx[pos] != '\t')) continue;
    while (pos < ptx.size() && (ptx[pos] == ' ' || ptx[pos] == '\t')) ++pos;
    size_t end = pos;
    while (end < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[end])) ||
                                ptx[end] == '_' || ptx[end] == '$' || ptx[end] == '.')) {
      ++end;
    }
    if (end > pos) out.emplace_back(ptx.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

}  // namespace kjit
