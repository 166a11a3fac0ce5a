// The fleet tier against a real redis-server (started here on a unix socket or loopback
// port): sharing between two nodes, read-only nodes, outages, garbage, slowness, TTL.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "compile/compiler.h"
#include "store/cache.h"
#include "store/remote.h"
#include "support/redis_server.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::test::free_port;
using kjit::test::have;
using kjit::test::start_redis_socket;
using kjit::test::TempDir;

class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kjit::remote_tier_built()) GTEST_SKIP() << "remote tier not built (no hiredis)";
    if (!have("redis-server") || !have("redis-cli")) {
      GTEST_SKIP() << "redis-server/redis-cli not installed";
    }
  }

  kjit::CacheConfig node(const std::string& dir, const std::string& url, bool ro = false) {
    kjit::CacheConfig c;
    c.directory = dir;
    c.remote.url = url;
    c.remote.read_only = ro;
    c.remote.cooldown_ms = 300;
    c.remote.op_timeout_ms = 300;
    c.remote.ttl_seconds = 3600;
    return c;
  }

  static kjit::Outcome compile(kjit::Cache& cache, const std::string& src) {
    kjit::Compiler c(&cache, 1);
    kjit::CompileOptions o;
    o.target = "sm_90";
    return c.compile(src, o);
  }
};

TEST_F(RemoteTest, SecondNodeHitsFromRedisWithIdenticalBytes) {
  TempDir tmp, a_dir, b_dir;
  auto redis = start_redis_socket(tmp.path());
  kjit::Outcome a_result;
  {
    kjit::Cache a(node(a_dir.path(), redis->url()));
    a_result = compile(a, kjit::test::kSaxpySource);
    ASSERT_EQ(a_result.status, KJIT_OK);
    a.remote()->flush();
    EXPECT_EQ(a.remote()->stats().writes, 1u);
  }
  EXPECT_EQ(redis->cli("EXISTS kjit:" + a_result.entry->key), "1");
  const std::string ttl = redis->cli("TTL kjit:" + a_result.entry->key);
  EXPECT_GT(std::stol(ttl), 3000) << "TTL applied";
  EXPECT_LE(std::stol(ttl), 3600);

  {
    kjit::Cache b(node(b_dir.path(), redis->url()));
    kjit::Outcome r = compile(b, kjit::test::kSaxpySource);
    ASSERT_EQ(r.status, KJIT_OK);
    EXPECT_EQ(r.tier, KJIT_TIER_REMOTE);
    EXPECT_EQ(r.entry->cubin, a_result.entry->cubin);
    EXPECT_EQ(r.entry->ptx, a_result.entry->ptx);
    const kjit::CacheStats s = b.stats();
    EXPECT_EQ(s.compiles, 0u) << "no NVRTC work on node B";
    EXPECT_EQ(s.remote_hits, 1u);
  }  // closing node B finishes its background write to disk
  // The remote hit was written to node B's disk.
  kjit::Cache b2(node(b_dir.path(), ""));
  EXPECT_EQ(compile(b2, kjit::test::kSaxpySource).tier, KJIT_TIER_DISK);
}

TEST_F(RemoteTest, LoopbackTcpUrl) {
  TempDir tmp, dir;
  const int port = free_port();
  auto redis = start_redis_socket(tmp.path(), port);
  kjit::Cache a(node(dir.path(), "redis://127.0.0.1:" + std::to_string(port) + "/2"));
  ASSERT_EQ(compile(a, kjit::test::kSaxpySource).status, KJIT_OK);
  a.remote()->flush();
  EXPECT_EQ(a.remote()->stats().writes, 1u);
  EXPECT_EQ(redis->cli("-n 2 DBSIZE"), "1");
}

TEST_F(RemoteTest, ReadOnlyNodeNeverWrites) {
  TempDir tmp, dir;
  auto redis = start_redis_socket(tmp.path());
  kjit::Cache ro(node(dir.path(), redis->url(), true));
  ASSERT_EQ(compile(ro, kjit::test::kSaxpySource).status, KJIT_OK);
  ro.remote()->flush();
  EXPECT_EQ(redis->cli("DBSIZE"), "0");
  EXPECT_EQ(ro.remote()->stats().writes, 0u);
}

TEST_F(RemoteTest, GarbageValueIsRejectedAndNeverLoaded) {
  TempDir tmp, a_dir, b_dir;
  auto redis = start_redis_socket(tmp.path());
  std::string key, good_cubin;
  {
    kjit::Cache a(node(a_dir.path(), redis->url()));
    kjit::Outcome o = compile(a, kjit::test::kSaxpySource);
    key = o.entry->key;
    good_cubin = o.entry->cubin;
    a.remote()->flush();
  }
  // Garbage, then a well-formed envelope of a different entry under this key.
  for (const std::string& value : {std::string("not an envelope"), std::string()}) {
    if (value.empty()) {
      kjit::Entry other;
      other.key = std::string(64, 'a');
      other.ptx = "// other";
      other.target = "sm_90";
      kjit::test::write_file(tmp.file("v"), kjit::encode_envelope(other));
      kjit::test::shell("redis-cli -s '" + redis->socket() + "' -x SET kjit:" + key + " < '" +
                        tmp.file("v") + "'");
    } else {
      redis->cli("SET kjit:" + key + " '" + value + "'");
    }
    TempDir fresh;
    kjit::Cache b(node(fresh.path(), redis->url()));
    kjit::Outcome r = compile(b, kjit::test::kSaxpySource);
    ASSERT_EQ(r.status, KJIT_OK);
    EXPECT_EQ(r.tier, KJIT_TIER_COMPILED);
    EXPECT_EQ(r.entry->cubin, good_cubin);
    EXPECT_EQ(b.remote()->stats().rejected, 1u);
  }
}

TEST_F(RemoteTest, OutageOpensTheBreakerAndRecoveryClosesIt) {
  TempDir tmp, dir;
  auto redis = start_redis_socket(tmp.path());
  kjit::Cache cache(node(dir.path(), redis->url()));
  ASSERT_EQ(compile(cache, kjit::test::kSaxpySource).status, KJIT_OK);
  cache.remote()->flush();
  redis->kill_now();  // killed mid-run
  for (int i = 0; i < 6; ++i) {
    kjit::Outcome o =
        compile(cache, std::string(kjit::test::kSaxpySource) + "// " + std::to_string(i));
    EXPECT_EQ(o.status, KJIT_OK) << "every call still succeeds locally";
  }
  kjit::RemoteStats s = cache.remote()->stats();
  EXPECT_TRUE(s.breaker_open);
  EXPECT_GE(s.errors, 3u);
  EXPECT_GT(s.skipped_open + s.write_failures, 0u);
  redis = start_redis_socket(tmp.path());                       // restarted
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past the cooldown
  ASSERT_EQ(compile(cache, std::string(kjit::test::kSaxpySource) + "// after").status, KJIT_OK);
  cache.remote()->flush();
  EXPECT_FALSE(cache.remote()->stats().breaker_open);
  EXPECT_NE(redis->cli("DBSIZE"), "0");
}

TEST_F(RemoteTest, SlowRedisCostsAtMostTheTimeout) {
  TempDir tmp, a_dir, b_dir;
  auto redis = start_redis_socket(tmp.path());
  {
    kjit::Cache warm(node(a_dir.path(), redis->url()));
    compile(warm, kjit::test::kSaxpySource);  // opens a connection, stores the entry
    warm.remote()->flush();
  }
  kjit::Cache b(node(b_dir.path(), redis->url()));
  redis->pause();
  kjit_tier tier;
  const double t0 = kjit::monotonic_ms();
  EXPECT_EQ(b.lookup(std::string(64, 'b'), &tier), nullptr);
  const double waited = kjit::monotonic_ms() - t0;
  redis->resume();
  EXPECT_LT(waited, 3000) << "bounded by connect + operation timeouts";
  EXPECT_GE(b.remote()->stats().timeouts + b.remote()->stats().errors, 1u);
}

TEST_F(RemoteTest, DownAtStartupIsHarmless) {
  TempDir dir;
  kjit::Cache cache(node(dir.path(), "unix:///nonexistent/redis.sock"));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(compile(cache, kjit::test::kSaxpySource).status, KJIT_OK);
  }
  EXPECT_GE(cache.remote()->stats().errors, 1u);
}

TEST(RemoteConfig, BadUrlIsReportedNotFatal) {
  if (!kjit::remote_tier_built()) GTEST_SKIP() << "remote tier not built (no hiredis)";
  TempDir dir;
  for (const char* url : {"http://x", "redis://", "redis://h:99999", "redis://h:1/x", "unix://"}) {
    kjit::CacheConfig c;
    c.directory = dir.path();
    c.remote.url = url;
    kjit::Cache cache(c);
    EXPECT_EQ(cache.remote(), nullptr) << url;
    const kjit::CacheStats s = cache.stats();
    EXPECT_NE(s.message.find("remote tier not used"), std::string::npos) << url;
  }
}

TEST(RemoteEnvelope, RoundTripAndTamperDetection) {
  kjit::Entry e;
  e.key = std::string(64, 'c');
  e.target = "sm_90";
  e.ptx = ".version 9.0";
  e.cubin = std::string(
                "\x7f"
                "ELF",
                4) +
            std::string(100, '\1');
  const std::string env = kjit::encode_envelope(e);
  kjit::Entry out;
  ASSERT_TRUE(kjit::decode_envelope(env, e.key, &out));
  EXPECT_EQ(out.cubin, e.cubin);
  EXPECT_FALSE(kjit::decode_envelope(env, std::string(64, 'd'), &out)) << "key must match";
  for (size_t i = 0; i < env.size(); i += 7) {
    std::string bad = env;
    bad[i] ^= 0x40;
    EXPECT_FALSE(kjit::decode_envelope(bad, e.key, &out)) << "flip at " << i;
  }
  EXPECT_FALSE(kjit::decode_envelope(env.substr(0, env.size() - 1), e.key, &out));
}

// An envelope written for one key, relabelled to another: the key inside its record
// changed and its digest recomputed, first over the bytes alone (as the envelope of
// format 1 had it), then bound to the new key as well. Neither must deliver the first
// entry's code under the second key.
TEST(RemoteEnvelope, RelabelledForAnotherKeyIsRejected) {
  kjit::Entry e;
  e.key = std::string(64, 'c');
  e.target = "sm_90";
  e.ptx = ".version 9.0";
  e.cubin = std::string(
                "\x7f"
                "ELF",
                4) +
            std::string(100, '\1');
  const std::string other(64, 'd');
  std::string body = kjit::encode_envelope(e);
  body.resize(body.size() - 32);
  const size_t key_at = 16 + 8;  // magic, version, then the record's key field
  ASSERT_EQ(body.substr(key_at, 64), e.key);
  body.replace(key_at, 64, other);
  kjit::Entry out;
  const kjit::Digest plain = kjit::sha256(body);
  EXPECT_FALSE(kjit::decode_envelope(body + std::string(plain.begin(), plain.end()), other, &out))
      << "digest over the bytes alone";
  kjit::Sha256 h;
  h.field("kjit remote envelope");
  h.field(other);
  h.update(body);
  const kjit::Digest bound = h.finish();
  EXPECT_FALSE(kjit::decode_envelope(body + std::string(bound.begin(), bound.end()), other, &out))
      << "digest bound to the new key: the record's checksums still name the old one";
}

}  // namespace
