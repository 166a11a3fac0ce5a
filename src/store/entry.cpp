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
#include "store/entry_fields.h"
#include "store/entry_wire.h"
#include "util/error.h"
#include "util/pch_outcome.h"
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

namespace fk = field_kind;
using NamePairList = std::vector<std::pair<std::string, std::string>>;

// One field into the JSON metadata, by kind.
struct JsonFieldWriter {
  cJSON* r;
  int64_t created_at;
  cJSON* sizes = nullptr;  // made by the first blob

  void operator()(fk::Text, const char* name, const std::string& v) {
    cJSON_AddStringToObject(r, name, v.c_str());
  }
  void operator()(fk::Log, const char* name, const std::string& v) {
    cJSON_AddStringToObject(r, name, v.c_str());
    cJSON_AddItemToObject(r, "advisories", string_array(ptxas_advisories(v)));
  }
  void operator()(fk::Manifest, const char* name, const std::string& v) {
    if (!v.empty()) cJSON_AddStringToObject(r, name, v.c_str());
  }
  void operator()(fk::TextList, const char* name, const std::vector<std::string>& v) {
    cJSON_AddItemToObject(r, name, string_array(v));
  }
  void operator()(fk::NamePairs, const char* name, const NamePairList& v) {
    cJSON* list = cJSON_AddArrayToObject(r, name);
    for (const auto& [expr, lowered] : v) {
      cJSON* pair = cJSON_CreateObject();
      cJSON_AddStringToObject(pair, "expression", expr.c_str());
      cJSON_AddStringToObject(pair, "lowered", lowered.c_str());
      cJSON_AddItemToArray(list, pair);
    }
  }
  void operator()(fk::Millis, const char* name, double v) { cJSON_AddNumberToObject(r, name, v); }
  void operator()(fk::Pch, const char* name, PchOutcome v) {
    cJSON_AddStringToObject(r, name, pch_outcome_name(v));
  }
  void operator()(fk::Created, const char* name, int64_t v) {
    cJSON_AddNumberToObject(r, name, static_cast<double>(created_at ? created_at : v));
  }
  void operator()(fk::Time, const char* name, int64_t v) {
    cJSON_AddNumberToObject(r, name, static_cast<double>(v));
  }
  template <BlobKind K>
  void operator()(fk::Code<K>, const char* name, const Blob& b) {
    if (!sizes) sizes = cJSON_AddObjectToObject(r, "sizes");
    cJSON_AddNumberToObject(sizes, name, static_cast<double>(b.size()));
  }
};

// One field out of the JSON metadata, by kind; throws as Entry::load_metadata does.
struct JsonFieldReader {
  const cJSON* r;
  Entry& e;

  void operator()(fk::Text, const char* name, std::string& v) { v = get_string(r, name); }
  void operator()(fk::Log, const char* name, std::string& v) { v = get_string(r, name); }
  void operator()(fk::Manifest, const char* name, std::string& v) {
    const cJSON* m = cJSON_GetObjectItemCaseSensitive(r, name);
    if (m && !cJSON_IsString(m)) corrupt(std::string("bad ") + name);
    v = m ? m->valuestring : "";
  }
  void operator()(fk::TextList, const char* name, std::vector<std::string>& v) {
    v = get_strings(r, name);
  }
  void operator()(fk::NamePairs, const char* name, NamePairList& v) {
    const cJSON* list = cJSON_GetObjectItemCaseSensitive(r, name);
    if (!cJSON_IsArray(list)) corrupt(std::string("missing ") + name);
    v.clear();
    const cJSON* item;
    cJSON_ArrayForEach(item, list) {
      v.emplace_back(get_string(item, "expression"), get_string(item, "lowered"));
    }
  }
  // Infinity and NaN would be written back as null (cJSON), which no reader accepts.
  void operator()(fk::Millis, const char* name, double& v) {
    v = get_number(r, name);
    if (!std::isfinite(v)) corrupt(std::string("bad ") + name);
  }
  void operator()(fk::Pch, const char* name, PchOutcome& v) {
    if (!pch_outcome_from_name(get_string(r, name), &v)) corrupt(std::string("bad ") + name);
  }
  void operator()(fk::Created, const char* name, int64_t& v) {
    v = static_cast<int64_t>(get_count(r, name));
  }
  void operator()(fk::Time, const char* name, int64_t& v) {
    v = static_cast<int64_t>(get_count(r, name));
  }
  template <BlobKind K>
  void operator()(fk::Code<K>, const char* name, Blob&) {
    const cJSON* sizes = cJSON_GetObjectItemCaseSensitive(r, "sizes");
    if (!cJSON_IsObject(sizes)) corrupt("missing sizes");
    e.recorded_sizes.of(K) = get_count(sizes, name);
  }
};

[[noreturn]] void other_format(const std::string& version) {
  fail(KJIT_ERROR_CACHE_CORRUPT, "cache entry has format version " + version +
                                     ", this kjit reads version " +
                                     std::to_string(kCacheFormatVersion));
}

}  // namespace

std::string Entry::metadata_json(int64_t created_at) const {
  Json root(cJSON_CreateObject());
  cJSON_AddNumberToObject(root.get(), "format", kCacheFormatVersion);
  entry_fields::for_each_metadata_field(*this, JsonFieldWriter{root.get(), created_at});
  char* text = cJSON_PrintUnformatted(root.get());
  if (!text) fail(KJIT_ERROR_OUT_OF_MEMORY, "could not format entry metadata");
  std::string out(text);
  cJSON_free(text);
  return out;
}

void Entry::load_metadata(const std::string& json) {
  Json root(cJSON_ParseWithLength(json.data(), json.size()));
  if (!root || !cJSON_IsObject(root.get())) corrupt("not a JSON object");
  const double format = get_number(root.get(), "format");
  if (format != kCacheFormatVersion) other_format(number_text(format));
  entry_fields::for_each_metadata_field(*this, JsonFieldReader{root.get(), *this});
}

std::string Entry::metadata_binary(int64_t created_at) const {
  WireWriter w;
  w.u64(kCacheFormatVersion);
  put_entry_fields(w, *this, EntryWire::Metadata, created_at);
  return std::move(w.bytes());
}

void Entry::load_metadata_binary(std::string_view bytes) {
  WireReader r(bytes);
  uint64_t format = 0;
  try {
    format = r.u64();
    if (format == uint64_t(kCacheFormatVersion)) {
      get_entry_fields(r, this, EntryWire::Metadata);
      r.finish();
    }
  } catch (const WireError& e) {
    corrupt(std::string("binary metadata: ") + e.what());
  }
  if (format != uint64_t(kCacheFormatVersion)) other_format(std::to_string(format));
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
