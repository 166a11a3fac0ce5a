// Grouped-GEMM plans: the key of a shape class, the candidate configurations autotuning
// tries, and the persisted form of a tuned choice (a named value in the cache's facts, as
// GEMM plans are, so that later processes and, through the fleet tier, other machines use
// it). Host-only; works without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grouped/render.h"

namespace kjit::grouped {

struct Problem;

// What a device contributes to a plan.
struct DeviceInfo {
  int cc = 0;  // e.g. 90
  int sm_count = 0;
  std::string name;
  int driver_version = 0;
  size_t max_shared = 0;  // opt-in dynamic shared memory per block, bytes
};

// A shape class: problems of one class run best with the same configuration. Rows enter
// as the bucket of their average per group (bucket_of()); every other field exactly.
struct PlanKey {
  int groups = 0, n = 0, k = 0;
  int rows_bucket = 0;
  int a_type = 0, b_type = 0, d_type = 0;  // kjit_gemm_dtype, resolved
  int b_order = 0;                         // BOrder
  int has_c = 0, has_bias = 0, act = 0;    // epilogue pieces
  int tma_eligible = 0;                    // alignments and strides allow TMA
  int scale = 0;                           // Scale
  int cc = 0, sm_count = 0;

  bool operator==(const PlanKey& o) const;
  size_t hash() const;
  // "G=8 K=4096 N=28672 rows/G~2^10 bf16/bf16/bf16 b=nk epi=alpha+bias+silu tma cc=90
  // sms=132": for logs and messages.
  std::string text() const;
};

// Bucket of `rows` over `groups`: the bit width of the average rows per group (0 for
// fewer than one row per group, 1 for one, 2 for 2-3, ..., 7 for 64-127 ...). The
// heuristic's decode/prefill threshold (64 rows per group) falls on a bucket boundary.
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const { return k.hash(); }
};

int bucket_of(long long rows, int groups);

PlanKey make_key(const Problem& p, const DeviceInfo& dev);

// The configurations autotuning tries for `p` on `dev` (the heuristic's `chosen` first,
// then the others in a fixed order), each valid and fitting the device's shared memory.
// Only the TMA path has more than one; empty when `chosen` is not a TMA configuration.
std::vector<Config> candidates(const Config& chosen, const DeviceInfo& dev);

// ---- persistence ---------------------------------------------------------------------

constexpr uint32_t kPlanFormat = 1;
constexpr const char* kPlanNamespace = "grouped-plan";

struct PersistedPlan {
  Config config;            // tunable fields only: path, tiles, stages, cluster, schedule, target
  double tuned_us = 0;      // the chosen configuration's median time when tuned
  double heuristic_us = 0;  // the heuristic's choice, same run
  int candidates = 0;       // how many were timed
};

// "kjit-grouped-plan/1;kjit=300;render=grouped-v1;driver=13000;device=NVIDIA H200;cc=90"
std::string validators(const DeviceInfo& dev);
// Key in the cache's named values: hex SHA-256 of the validators and the plan key.
std::string persist_key(const PlanKey& key, const std::string& validators);
// The value (util/wire fields, then a SHA-256 of them).
std::string encode_plan(const PlanKey& key, const std::string& validators,
                        const PersistedPlan& plan);
// nullopt when the value is truncated, fails its checksum, has another format, other
// validators or another key, or holds a configuration that does not validate; `why` says
// which.
std::optional<PersistedPlan> decode_plan(const std::string& value, const PlanKey& key,
                                         const std::string& validators, std::string* why);

// `p`'s configuration with the tunable fields of `tuned` (the epilogue, B order and pieces
// come from `base`, the heuristic's choice for the same problem).
Config apply(const Config& base, const Config& tuned);

}  // namespace kjit::grouped
