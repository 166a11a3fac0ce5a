// The kjit command-line tool: the JSON documents it prints (schema field, rounding) and
// the one conversion of a compiled binary to JSON, from the library's own metadata.
#include <cjson/cJSON.h>

#include <cmath>
#include <cstdio>

#include "cli.h"

namespace kjit_cli {

JsonHolder::~JsonHolder() {
  cJSON_Delete(p);
}

cJSON* new_document(const char* name) {
  cJSON* doc = cJSON_CreateObject();
  cJSON* schema = cJSON_AddObjectToObject(doc, "schema");
  cJSON_AddStringToObject(schema, "name", name);
  cJSON_AddNumberToObject(schema, "version", kJsonSchemaVersion);
  return doc;
}

namespace {

// Rounds every number of `node` that is not whole to 3 decimal places: times are measured
// in ms (or s) and a microsecond is the most they mean.
void round_numbers(cJSON* node) {
  if (cJSON_IsNumber(node)) {
    const double v = node->valuedouble;
    if (std::isfinite(v) && v != std::floor(v) && std::fabs(v) < 1e12) {
      cJSON_SetNumberValue(node, std::round(v * 1000.0) / 1000.0);
    }
    return;
  }
  cJSON* child = nullptr;
  cJSON_ArrayForEach(child, node) round_numbers(child);
}

cJSON* copy_or_null(const cJSON* from, const char* name) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(from, name);
  return v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull();
}

}  // namespace

void print_json(cJSON* document) {
  round_numbers(document);
  char* text = cJSON_Print(document);
  if (!text) fail(kExitError, "out of memory while printing JSON");
  std::fputs(text, stdout);
  std::fputc('\n', stdout);
  cJSON_free(text);
}

void add_binary_json(cJSON* obj, const kjit_binary* binary, bool with_metadata) {
  const char* meta_text = kjit_binary_metadata_json(binary);
  JsonHolder meta;
  meta.p = meta_text ? cJSON_Parse(meta_text) : nullptr;
  if (!meta.p) meta.p = cJSON_CreateObject();  // every field below then reads null
  cJSON_AddItemToObject(obj, "target", copy_or_null(meta.p, "target"));
  cJSON_AddItemToObject(obj, "compile_ms", copy_or_null(meta.p, "compile_ms"));
  cJSON_AddItemToObject(obj, "sizes", copy_or_null(meta.p, "sizes"));
  cJSON_AddItemToObject(obj, "kernels", copy_or_null(meta.p, "kernels"));
  // The metadata lists {expression, lowered} pairs; the tool's documents map one to the
  // other, as a program looks them up.
  cJSON* names = cJSON_AddObjectToObject(obj, "names");
  const cJSON* pair = nullptr;
  cJSON_ArrayForEach(pair, cJSON_GetObjectItemCaseSensitive(meta.p, "names")) {
    const cJSON* expr = cJSON_GetObjectItemCaseSensitive(pair, "expression");
    const cJSON* lowered = cJSON_GetObjectItemCaseSensitive(pair, "lowered");
    if (!cJSON_IsString(expr)) continue;
    cJSON_AddStringToObject(names, expr->valuestring,
                            cJSON_IsString(lowered) ? lowered->valuestring : "");
  }
  const cJSON* log = cJSON_GetObjectItemCaseSensitive(meta.p, "log");
  cJSON_AddStringToObject(obj, "log", cJSON_IsString(log) ? log->valuestring : "");
  cJSON* advisories = cJSON_AddArrayToObject(obj, "advisories");
  for (size_t i = 0; i < kjit_binary_advisory_count(binary); ++i) {
    cJSON_AddItemToArray(advisories, cJSON_CreateString(kjit_binary_advisory(binary, i)));
  }
  if (!with_metadata) return;
  if (meta_text && cJSON_GetArraySize(meta.p) > 0) {
    cJSON_AddItemToObject(obj, "metadata", meta.p);
    meta.p = nullptr;
  } else {
    cJSON_AddNullToObject(obj, "metadata");
  }
}

}  // namespace kjit_cli
