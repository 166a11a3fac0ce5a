#include "grouped/plan.h"

#include <cstring>

#include "grouped/grouped.h"
#include "kjit/common.h"
#include "kjit/gemm.h"
#include "util/error.h"
#include "util/sha256.h"
#include "util/wire.h"

namespace kjit::grouped {
namespace {

constexpr const char* kMagic = "kjit-grouped-plan";

// The key's fields in a fixed order: what the persisted key hashes and the value repeats.
// The scale form is appended only when there is one, so that the keys of unscaled classes
// (and the plans persisted under them) stay as they were before scales existed.
std::vector<int64_t> fields(const PlanKey& k) {
  std::vector<int64_t> f = {k.groups, k.n,       k.k,     k.rows_bucket, k.a_type, k.b_type,
                            k.d_type, k.b_order, k.has_c, k.has_bias,    k.act,    k.tma_eligible,
                            k.cc,     k.sm_count};
  if (k.scale) f.push_back(k.scale);
  return f;
}

void put_config(WireWriter& w, const Config& c) {
  w.u32(uint32_t(c.path));
  w.u32(uint32_t(c.tile_m));
  w.u32(uint32_t(c.tile_n));
  w.u32(uint32_t(c.tile_k));
  w.u32(uint32_t(c.stages));
  w.u32(uint32_t(c.cluster_m));
  w.u32(uint32_t(c.cluster_n));
  w.u32(c.pingpong ? 1 : 0);
  w.str(c.target);
}

Config get_config(WireReader& r) {
  Config c;
  const uint32_t path = r.u32();
  if (path > uint32_t(Path::Simt)) throw WireError("unknown path " + std::to_string(path));
  c.path = Path(path);
  c.tile_m = int(r.u32());
  c.tile_n = int(r.u32());
  c.tile_k = int(r.u32());
  c.stages = int(r.u32());
  c.cluster_m = int(r.u32());
  c.cluster_n = int(r.u32());
  c.pingpong = r.boolean();
  c.target = r.str();
  return c;
}

}  // namespace

bool PlanKey::operator==(const PlanKey& o) const {
  return fields(*this) == fields(o);
}

size_t PlanKey::hash() const {
  // In-process only (the persisted key is SHA-256).
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int64_t v : fields(*this)) {
    h ^= uint64_t(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return size_t(h);
}

std::string PlanKey::text() const {
  std::string s = "G=" + std::to_string(groups) + " K=" + std::to_string(k) +
                  " N=" + std::to_string(n) + " rows/G~";
  s += rows_bucket == 0 ? std::string("0") : "2^" + std::to_string(rows_bucket - 1);
  const auto type = [](int t) {
    return t == KJIT_GEMM_BF16      ? std::string("bf16")
           : t == KJIT_GEMM_F8_E4M3 ? std::string("e4m3")
                                    : "type" + std::to_string(t);
  };
  s += " " + type(a_type) + "/" + type(b_type) + "/" + type(d_type);
  if (scale == int(Scale::Row)) s += " scale=row";
  if (scale == int(Scale::Block128)) s += " scale=block128";
  s += b_order == int(BOrder::KN) ? " b=kn" : " b=nk";
  s += " epi=alpha";
  if (has_c) s += "+beta";
  if (has_bias) s += "+bias";
  if (act) s += "+act" + std::to_string(act);
  s += tma_eligible ? " tma" : " no-tma";
  s += " cc=" + std::to_string(cc) + " sms=" + std::to_string(sm_count);
  return s;
}

int bucket_of(long long rows, int groups) {
  if (groups < 1 || rows < 1) return 0;
  unsigned long long avg = (unsigned long long)(rows / groups);
  int width = 0;
  while (avg) {
    ++width;
    avg >>= 1;
  }
  return width;
}

PlanKey make_key(const Problem& p, const DeviceInfo& dev) {
  PlanKey k;
  k.groups = p.groups;
  k.n = p.n;
  k.k = p.k;
  k.rows_bucket = bucket_of(p.rows, p.groups);
  k.a_type = k.b_type = p.in == DType::E4m3 ? KJIT_GEMM_F8_E4M3 : KJIT_GEMM_BF16;
  k.d_type = KJIT_GEMM_BF16;  // the only output type offered (check())
  k.scale = int(p.scale);
  k.b_order = int(p.b_order);
  k.has_c = p.c != nullptr;
  k.has_bias = p.bias != nullptr;
  k.act = int(p.act);
  k.tma_eligible = tma_eligible(p);
  k.cc = dev.cc;
  k.sm_count = dev.sm_count;
  return k;
}

std::vector<Config> candidates(const Config& chosen, const DeviceInfo& dev) {
  std::vector<Config> out;
  if (chosen.path != Path::Tma) return out;
  out.push_back(chosen);
  struct Shape {
    int tile_n, stages;
    bool pingpong;
  };
  // Cooperative 128x256 and 128x128 at a few depths, pingpong 128x128 at a few depths:
  // the configurations bench/RESULTS.md measured near the best on some shape.
  static const Shape kShapes[] = {{256, 3, false}, {256, 4, false}, {128, 4, false},
                                  {128, 6, false}, {128, 5, true},  {128, 6, true},
                                  {128, 7, true}};
  // Each cooperative one also in 2x1 clusters where the configuration takes them (bf16,
  // 128-row tiles). The store form is the caller's to choose for each (it follows the
  // schedule and D).
  Config plain = chosen;
  plain.vec_store = plain.tma_store = false;
  for (const Shape& s : kShapes) {
    for (int cluster_m : {1, 2}) {
      Config c = plain;
      c.tile_n = s.tile_n;
      c.stages = s.stages;
      c.pingpong = s.pingpong;
      c.cluster_m = cluster_m;
      if (cluster_m == 2) c.b_evict_first = false;
      if (c == plain) continue;
      if (dev.max_shared && shared_bytes(c) > dev.max_shared) continue;
      try {
        validate(c);
      } catch (const Error&) {
        continue;
      }
      out.push_back(c);
    }
  }
  return out;
}

std::string validators(const DeviceInfo& dev) {
  return "kjit-grouped-plan/" + std::to_string(kPlanFormat) +
         ";kjit=" + std::to_string(KJIT_VERSION) +
         ";render=grouped-v1;driver=" + std::to_string(dev.driver_version) + ";device=" + dev.name +
         ";cc=" + std::to_string(dev.cc);
}

std::string persist_key(const PlanKey& key, const std::string& vals) {
  Sha256 h;
  h.field(kMagic);
  h.u64(kPlanFormat);
  h.field(vals);
  const std::vector<int64_t> f = fields(key);
  h.u64(f.size());
  for (int64_t v : f) h.u64(uint64_t(v));
  return to_hex(h.finish());
}

std::string encode_plan(const PlanKey& key, const std::string& vals, const PersistedPlan& p) {
  WireWriter w;
  w.str(kMagic);
  w.u32(kPlanFormat);
  w.str(vals);
  const std::vector<int64_t> f = fields(key);
  w.u32(uint32_t(f.size()));
  for (int64_t v : f) w.u64(uint64_t(v));
  put_config(w, p.config);
  w.f64(p.tuned_us);
  w.f64(p.heuristic_us);
  w.u32(uint32_t(p.candidates));
  w.seal(WireWriter::Seal::Prefixed);
  return std::move(w.bytes());
}

std::optional<PersistedPlan> decode_plan(const std::string& value, const PlanKey& key,
                                         const std::string& vals, std::string* why) {
  const auto reject = [&](const std::string& reason) -> std::optional<PersistedPlan> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const std::optional<std::string_view> body = unseal(value, WireWriter::Seal::Prefixed);
  if (!body) return reject(value.size() < sizeof(Digest) + 8 ? "truncated" : "checksum mismatch");
  try {
    WireReader r(*body);
    if (r.str() != kMagic) return reject("bad magic");
    if (r.u32() != kPlanFormat) return reject("other format version");
    if (r.str() != vals) return reject("other validators");
    const std::vector<int64_t> f = fields(key);
    if (r.u32() != f.size()) return reject("other key");
    for (int64_t v : f)
      if (r.u64() != uint64_t(v)) return reject("other key");
    PersistedPlan p;
    p.config = get_config(r);
    p.tuned_us = r.f64();
    p.heuristic_us = r.f64();
    p.candidates = int(r.u32());
    r.finish();
    // The value holds the tunable fields; the input type, scale form and B order (which
    // decide what is valid: the fp8 tile) are the key's.
    p.config.in = key.a_type == KJIT_GEMM_F8_E4M3 ? DType::E4m3 : DType::Bf16;
    p.config.scale = key.scale == int(Scale::Row)        ? Scale::Row
                     : key.scale == int(Scale::Block128) ? Scale::Block128
                                                         : Scale::None;
    p.config.b_order = key.b_order == int(BOrder::NK) ? BOrder::NK : BOrder::KN;
    validate(p.config);
    return p;
  } catch (const WireError& e) {
    return reject(std::string("truncated (") + e.what() + ")");
  } catch (const Error& e) {
    return reject(e.message());
  }
}

Config apply(const Config& base, const Config& tuned) {
  Config c = base;
  c.path = tuned.path;
  c.tile_m = tuned.tile_m;
  c.tile_n = tuned.tile_n;
  c.tile_k = tuned.tile_k;
  c.stages = tuned.stages;
  c.cluster_m = tuned.cluster_m;
  c.cluster_n = tuned.cluster_n;
  c.pingpong = tuned.pingpong;
  c.target = tuned.target;
  if (c.cluster_m > 1) c.b_evict_first = false;  // the cluster takes no L2 hint (validate())
  return c;
}

}  // namespace kjit::grouped
