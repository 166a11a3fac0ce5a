// The fleet tier's topology parts that need no server (remote_cluster.h): remote URLs,
// Redis Cluster hash slots and hash tags, the slot map from CLUSTER SLOTS, redirections.
#include <gtest/gtest.h>

#include <string>

#include "store/remote_cluster.h"
#include "util/error.h"

namespace {

using kjit::RemoteReply;

RemoteReply integer(long long v) {
  RemoteReply r;
  r.type = RemoteReply::Type::Integer;
  r.integer = v;
  return r;
}
RemoteReply str(const std::string& s) {
  RemoteReply r;
  r.type = RemoteReply::Type::String;
  r.str = s;
  return r;
}
RemoteReply array(std::vector<RemoteReply> e) {
  RemoteReply r;
  r.type = RemoteReply::Type::Array;
  r.elements = std::move(e);
  return r;
}
// One CLUSTER SLOTS element as Redis 7 sends it: start, end, master, replica.
RemoteReply range(int lo, int hi, const std::string& host, int port, int replica_port = 0) {
  std::vector<RemoteReply> e{integer(lo), integer(hi),
                             array({str(host), integer(port), str("id"), array({})})};
  if (replica_port) e.push_back(array({str(host), integer(replica_port), str("id2"), array({})}));
  return array(e);
}

TEST(ClusterSlot, MatchesRedisReferenceValues) {
  // CRC16/XMODEM check value, and slots that Redis's CLUSTER KEYSLOT gives.
  EXPECT_EQ(kjit::crc16_xmodem("123456789", 9), 0x31C3);
  EXPECT_EQ(kjit::cluster_slot("foo"), 12182);
  EXPECT_EQ(kjit::cluster_slot("bar"), 5061);
  EXPECT_EQ(kjit::cluster_slot("hello"), 866);
  EXPECT_EQ(kjit::cluster_slot(""), 0);
}

TEST(ClusterSlot, HashTagsPlaceAnEntryAndItsClaimTogether) {
  const std::string key(64, 'a');
  EXPECT_EQ(kjit::cluster_slot("kjit:{" + key + "}"),
            kjit::cluster_slot("kjit:claim:{" + key + "}"));
  EXPECT_EQ(kjit::cluster_slot("kjit:{" + key + "}"), kjit::cluster_slot(key));
  EXPECT_EQ(kjit::cluster_slot("{user1000}.following"), kjit::cluster_slot("{user1000}.followers"));
  // An empty tag is no tag: the whole key is hashed; only the first tag counts.
  EXPECT_EQ(kjit::cluster_slot("foo{}{bar}"), kjit::crc16_xmodem("foo{}{bar}", 10) % 16384);
  EXPECT_EQ(kjit::cluster_slot("foo{{bar}}zap"), kjit::cluster_slot("{bar"));
  EXPECT_EQ(kjit::cluster_slot("foo{bar}{zap}"), kjit::cluster_slot("bar"));
  EXPECT_EQ(kjit::cluster_slot("no}close{"), kjit::crc16_xmodem("no}close{", 9) % 16384);
}

TEST(ClusterSlot, KeysSpreadOverAllSlotsRanges) {
  int per_third[3] = {0, 0, 0};
  for (int i = 0; i < 300; ++i)
    per_third[kjit::cluster_slot("kjit:{k" + std::to_string(i) + "}") * 3 / 16384]++;
  for (int n : per_third) EXPECT_GT(n, 60);
}

TEST(Redirect, MovedAndAskAreParsed) {
  kjit::Redirect r = kjit::parse_redirect("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(r.kind, kjit::Redirect::Kind::Moved);
  EXPECT_EQ(r.slot, 3999);
  EXPECT_EQ(r.to.host, "127.0.0.1");
  EXPECT_EQ(r.to.port, 6381);
  r = kjit::parse_redirect("ASK 16383 [::1]:7000");
  EXPECT_EQ(r.kind, kjit::Redirect::Kind::Ask);
  EXPECT_EQ(r.slot, 16383);
  EXPECT_EQ(r.to.host, "::1");
  EXPECT_EQ(r.to.port, 7000);
  for (const char* bad : {"MOVED", "MOVED 16384 h:1", "MOVED x h:1", "ASK 1 h", "ASK 1 h:0",
                          "ASK 1 :5", "ERR MOVED 1 h:2", "TRYAGAIN", "MOVED 1 h:99999"}) {
    EXPECT_EQ(kjit::parse_redirect(bad).kind, kjit::Redirect::Kind::None) << bad;
  }
}

TEST(SlotMap, LoadsClusterSlotsAndFollowsMoved) {
  kjit::SlotMap map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.node_for(0), nullptr);
  const RemoteReply reply =
      array({range(0, 5460, "127.0.0.1", 7000, 7003), range(5461, 10922, "", 7001),
             range(10923, 16383, "127.0.0.1", 7002)});
  ASSERT_TRUE(map.load(reply, "10.0.0.9"));
  EXPECT_EQ(map.nodes().size(), 3u);
  EXPECT_EQ(map.covered(), 16384u);
  EXPECT_EQ(map.node_for(0)->str(), "127.0.0.1:7000");
  EXPECT_EQ(map.node_for(5460)->str(), "127.0.0.1:7000");
  EXPECT_EQ(map.node_for(5461)->str(), "10.0.0.9:7001") << "an empty host is the one asked";
  EXPECT_EQ(map.node_for(16383)->str(), "127.0.0.1:7002");
  EXPECT_EQ(map.node_for(16384), nullptr);
  EXPECT_EQ(map.node_for(-1), nullptr);
  kjit::RemoteAddress moved;
  moved.host = "127.0.0.1";
  moved.port = 7002;
  map.set(100, moved);
  EXPECT_EQ(map.node_for(100)->str(), "127.0.0.1:7002");
  EXPECT_EQ(map.node_for(101)->str(), "127.0.0.1:7000");
}

// Which masters have a replica decides whether a fleet claim waits for a failover.
TEST(SlotMap, KnowsWhichMastersHaveAReplica) {
  kjit::SlotMap map;
  EXPECT_FALSE(map.replicated(0));
  const RemoteReply reply = array(
      {range(0, 5460, "127.0.0.1", 7000, 7003), range(5461, 10922, "127.0.0.1", 7001),
       range(10923, 12000, "127.0.0.1", 7002, 7005), range(12001, 16383, "127.0.0.1", 7002, 7005)});
  ASSERT_TRUE(map.load(reply, "h"));
  EXPECT_TRUE(map.replicated(0));
  EXPECT_TRUE(map.replicated(5460));
  EXPECT_FALSE(map.replicated(5461)) << "7001 has no replica";
  EXPECT_TRUE(map.replicated(16383));
  EXPECT_FALSE(map.replicated(16384));
  EXPECT_FALSE(map.replicated(-1));
  EXPECT_EQ(map.replicas(), 2u) << "7005, listed with both of its master's ranges, counts once";
  // A replica listed with an empty host is on the host asked; two replicas of one master.
  std::vector<RemoteReply> e{integer(0), integer(16383),
                             array({str("10.0.0.1"), integer(7000), str("id")}),
                             array({str(""), integer(7001), str("id2")}),
                             array({str("10.0.0.3"), integer(7001), str("id3")})};
  ASSERT_TRUE(map.load(array({array(e)}), "10.0.0.2"));
  EXPECT_EQ(map.replicas(), 2u);
  EXPECT_TRUE(map.replicated(100));
  // A slot moved (MOVED) to a node not yet seen: its replicas are unknown until a reload.
  kjit::RemoteAddress other;
  other.host = "10.0.0.9";
  other.port = 7009;
  map.set(100, other);
  EXPECT_FALSE(map.replicated(100));
  EXPECT_TRUE(map.replicated(101));
  // A malformed replica entry refuses the whole reply, and the map is kept.
  for (const RemoteReply& bad : {array({str("h"), integer(0)}), array({str("h")}), str("h:1"),
                                 array({integer(1), integer(2)})}) {
    std::vector<RemoteReply> r{integer(0), integer(16383), array({str("h"), integer(1)}), bad};
    EXPECT_FALSE(map.load(array({array(r)}), "x"));
  }
  EXPECT_TRUE(map.replicated(101));
  EXPECT_EQ(map.node_for(101)->str(), "10.0.0.1:7000");
}

TEST(SlotMap, PartialCoverageLeavesOtherSlotsUnserved) {
  kjit::SlotMap map;
  ASSERT_TRUE(map.load(array({range(0, 99, "h", 1)}), "x"));
  EXPECT_EQ(map.covered(), 100u);
  EXPECT_EQ(map.node_for(100), nullptr);
}

TEST(SlotMap, MalformedRepliesAreRefusedAndTheMapKept) {
  kjit::SlotMap map;
  ASSERT_TRUE(map.load(array({range(0, 16383, "h", 1)}), "x"));
  const std::vector<RemoteReply> bad = {
      str("ERR This instance has cluster support disabled"),
      array({array({integer(0), integer(16384), array({str("h"), integer(2)})})}),
      array({array({integer(5), integer(4), array({str("h"), integer(2)})})}),
      array({array({integer(0), integer(1)})}),
      array({array({integer(0), integer(1), array({str("h")})})}),
      array({array({integer(0), integer(1), array({str("h"), integer(0)})})}),
      array({array({str("0"), integer(1), array({str("h"), integer(2)})})}),
      array({str("x")})};
  for (const RemoteReply& r : bad) EXPECT_FALSE(map.load(r, "x"));
  EXPECT_EQ(map.covered(), 16384u);
  EXPECT_EQ(map.node_for(7)->str(), "h:1");
}

TEST(RemoteUrl, EveryFormIsParsed) {
  kjit::RemoteEndpoints e = kjit::parse_remote_url("redis://127.0.0.1:6390/2");
  EXPECT_EQ(e.topology, kjit::RemoteTopology::Single);
  ASSERT_EQ(e.nodes.size(), 1u);
  EXPECT_EQ(e.nodes[0].str(), "127.0.0.1:6390");
  EXPECT_EQ(e.db, 2);
  e = kjit::parse_remote_url("redis://cache");
  EXPECT_EQ(e.nodes[0].str(), "cache:6379");
  e = kjit::parse_remote_url("unix:///run/redis.sock");
  EXPECT_EQ(e.nodes[0].socket, "/run/redis.sock");

  e = kjit::parse_remote_url("redis+sentinel://s1:26380,s2,[::1]:5000/mymaster/3");
  EXPECT_EQ(e.topology, kjit::RemoteTopology::Sentinel);
  ASSERT_EQ(e.nodes.size(), 3u);
  EXPECT_EQ(e.nodes[0].str(), "s1:26380");
  EXPECT_EQ(e.nodes[1].str(), "s2:26379");
  EXPECT_EQ(e.nodes[2].host, "::1");
  EXPECT_EQ(e.nodes[2].port, 5000);
  EXPECT_EQ(e.master_name, "mymaster");
  EXPECT_EQ(e.db, 3);
  e = kjit::parse_remote_url("redis+sentinel://127.0.0.1:26379/kjit");
  EXPECT_EQ(e.master_name, "kjit");
  EXPECT_EQ(e.db, 0);

  e = kjit::parse_remote_url("redis+cluster://a:7000,b:7001");
  EXPECT_EQ(e.topology, kjit::RemoteTopology::Cluster);
  ASSERT_EQ(e.nodes.size(), 2u);
  EXPECT_EQ(e.nodes[1].str(), "b:7001");
  EXPECT_STREQ(kjit::topology_name(e.topology), "cluster");
}

TEST(RemoteUrl, BadUrlsSayWhy) {
  const std::pair<const char*, const char*> bad[] = {{"http://x", "not redis://"},
                                                     {"redis://", "no host"},
                                                     {"redis://user:pw@h:1", "credentials"},
                                                     {"redis://h:0", "bad port"},
                                                     {"redis://h:99999", "bad port"},
                                                     {"redis://h:1/x", "database"},
                                                     {"redis://a:1,b:2", "redis+sentinel://"},
                                                     {"unix://", "socket"},
                                                     {"redis+sentinel://s1:26379", "master name"},
                                                     {"redis+sentinel://s1:26379/", "master name"},
                                                     {"redis+sentinel://s1,,s2/m", "no host"},
                                                     {"redis+sentinel://s1/m/x", "database"},
                                                     {"redis+cluster://a:1/0", "no databases"},
                                                     {"redis+cluster://a:b", "bad port"},
                                                     {"redis+cluster://[::1", "unclosed"}};
  for (const auto& [url, why] : bad) {
    try {
      kjit::parse_remote_url(url);
      ADD_FAILURE() << url << " accepted";
    } catch (const kjit::Error& e) {
      EXPECT_EQ(e.status(), KJIT_ERROR_INVALID_ARGUMENT) << url;
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << url << ": " << e.what();
    }
  }
}

}  // namespace
