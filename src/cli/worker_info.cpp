// The kjit command-line tool: the state of the compile worker that serves a cache, as a
// line of text and as JSON.
#include <cjson/cJSON.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cli.h"

namespace kjit_cli {

namespace {

bool read_worker(kjit_cache* cache, kjit_worker_info* w, std::string* error) {
  std::memset(w, 0, sizeof *w);
  w->struct_size = sizeof *w;
  const kjit_status st = kjit_worker_info_get(cache, w);
  if (st == KJIT_OK) return true;
  const char* e = kjit_last_error();
  *error = e && *e ? e : kjit_status_string(st);
  return false;
}

}  // namespace

std::string worker_text(kjit_cache* cache) {
  if (!cache) return "not running (no cache yet)";
  kjit_worker_info w;
  std::string error;
  if (!read_worker(cache, &w, &error)) return "unknown: " + error;
  if (!w.running) return "not running (started by the next compile that misses)";
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "running: pid %lld, up %s, %llu compiles (%llu failed, %llu timed out), %llu in "
      "flight, PCH %s (%llu created, %llu used), %s resident, exits after %llu s idle; "
      "%llu earlier worker%s crashed",
      static_cast<long long>(w.pid), human_ms(w.uptime_s * 1000.0).c_str(),
      static_cast<unsigned long long>(w.compiles), static_cast<unsigned long long>(w.failures),
      static_cast<unsigned long long>(w.timeouts), static_cast<unsigned long long>(w.in_flight),
      w.pch_in_use ? "warm" : "none yet", static_cast<unsigned long long>(w.pch_created),
      static_cast<unsigned long long>(w.pch_used), human_bytes(w.rss_bytes).c_str(),
      static_cast<unsigned long long>(w.idle_limit_s), static_cast<unsigned long long>(w.crashes),
      w.crashes == 1 ? "" : "s");
  return buf;
}

void add_worker_json(cJSON* parent, kjit_cache* cache) {
  kjit_worker_info w;
  std::string error;
  cJSON* o = cJSON_AddObjectToObject(parent, "worker");
  if (!cache) {
    cJSON_AddBoolToObject(o, "running", false);
    return;
  }
  if (!read_worker(cache, &w, &error)) {
    cJSON_AddStringToObject(o, "error", error.c_str());
    return;
  }
  cJSON_AddBoolToObject(o, "running", w.running != 0);
  if (!w.running) return;
  cJSON_AddNumberToObject(o, "pid", static_cast<double>(w.pid));
  cJSON_AddNumberToObject(o, "uptime_s", w.uptime_s);
  cJSON_AddNumberToObject(o, "idle_s", w.idle_s);
  cJSON_AddNumberToObject(o, "compiles", static_cast<double>(w.compiles));
  cJSON_AddNumberToObject(o, "failures", static_cast<double>(w.failures));
  cJSON_AddNumberToObject(o, "timeouts", static_cast<double>(w.timeouts));
  cJSON_AddNumberToObject(o, "in_flight", static_cast<double>(w.in_flight));
  cJSON_AddNumberToObject(o, "crashes", static_cast<double>(w.crashes));
  cJSON_AddBoolToObject(o, "pch_in_use", w.pch_in_use != 0);
  cJSON_AddNumberToObject(o, "pch_created", static_cast<double>(w.pch_created));
  cJSON_AddNumberToObject(o, "pch_used", static_cast<double>(w.pch_used));
  cJSON_AddNumberToObject(o, "idle_limit_s", static_cast<double>(w.idle_limit_s));
  cJSON_AddNumberToObject(o, "rss_bytes", static_cast<double>(w.rss_bytes));
}

}  // namespace kjit_cli
