// The parts of the fleet tier's client that know about topologies and need no server:
// remote URLs (one server, Sentinel, Cluster), Redis Cluster's hash slots (CRC16 with
// hash tags), its slot map (from CLUSTER SLOTS) and its redirections (MOVED, ASK).
// hiredis speaks to one server; remote.cpp routes each command with these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kjit {

// A server's reply, flattened: nil, a string (bulk or status), an integer or an array.
struct RemoteReply {
  enum class Type { Nil, String, Integer, Array };
  Type type = Type::Nil;
  std::string str;
  long long integer = 0;
  std::vector<RemoteReply> elements;
};

// One server: host and TCP port, or a unix socket path.
struct RemoteAddress {
  std::string host;
  int port = 0;
  std::string socket;
  std::string str() const { return socket.empty() ? host + ":" + std::to_string(port) : socket; }
  bool operator==(const RemoteAddress& o) const {
    return host == o.host && port == o.port && socket == o.socket;
  }
};

enum class RemoteTopology { Single, Sentinel, Cluster };
const char* topology_name(RemoteTopology t);  // "single", "sentinel", "cluster"

struct RemoteEndpoints {
  RemoteTopology topology = RemoteTopology::Single;
  std::vector<RemoteAddress> nodes;  // the server; the Sentinels; the cluster's seed nodes
  std::string master_name;           // Sentinel: the monitored master's name
  int db = 0;
};

// Parses a remote URL (docs/api.md):
//   redis://host[:port][/db]                     one server (port 6379)
//   unix:///path/to/socket                       one server on a unix socket
//   redis+sentinel://h1[:p1][,h2[:p2]...]/master[/db]
//                                                Sentinels (port 26379) and the master's name
//   redis+cluster://h1[:p1][,h2[:p2]...]         seed nodes of a Redis Cluster (port 6379)
// Throws kjit::Error(KJIT_ERROR_INVALID_ARGUMENT) with the reason for anything else
// (credentials included: they are not supported).
RemoteEndpoints parse_remote_url(const std::string& url);

constexpr int kClusterSlots = 16384;

// CRC16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster uses it.
uint16_t crc16_xmodem(const char* data, size_t size);

// The hash slot of a key: CRC16 of the key, or of the part between its first '{' and the
// next '}' when that part is not empty (a hash tag: keys with equal tags share a slot).
int cluster_slot(const std::string& key);

// A -MOVED or -ASK error reply, parsed ("MOVED 3999 127.0.0.1:6381").
struct Redirect {
  enum class Kind { None, Moved, Ask };
  Kind kind = Kind::None;
  int slot = -1;
  RemoteAddress to;
};
Redirect parse_redirect(const std::string& error);

// Which node serves each slot, and whether a replica stands behind it.
//
// Read from CLUSTER SLOTS, not CLUSTER SHARDS: SLOTS answers on every Redis since 3.0 and
// on Valkey, and gives all this map needs (each range's master, then its replicas; Redis
// leaves out replicas that are marked failed or have replicated nothing yet, which hold
// nothing to fail over to). SHARDS (Redis 7) adds node health, ids and replication
// offsets, which routing does not use: a master that is down is found by its connection
// failing and its own breaker, and a replica's promotion by the next reload. Taking
// SHARDS would mean a second parser and a fallback to SLOTS for older servers, for no
// routing decision made differently.
class SlotMap {
 public:
  SlotMap();
  // Loads a CLUSTER SLOTS reply (each element: start, end, master [host, port, ...],
  // replicas [host, port, ...]...). A node announced with an empty host takes `asked_host`
  // (the host the reply came from). False, and the map unchanged, when the reply is
  // malformed.
  bool load(const RemoteReply& slots, const std::string& asked_host);
  // The master serving `slot`, or null when no node is known to serve it.
  const RemoteAddress* node_for(int slot) const;
  // True when the last reply loaded listed a replica for the master of `slot`: if that
  // master fails, the cluster can promote the replica and the slot is served again.
  bool replicated(int slot) const;
  void set(int slot, const RemoteAddress& node);  // after a MOVED
  const std::vector<RemoteAddress>& nodes() const { return nodes_; }
  bool empty() const { return nodes_.empty(); }
  size_t covered() const;   // slots with a node
  size_t replicas() const;  // replicas listed in the last reply loaded

 private:
  std::vector<RemoteAddress> nodes_;
  std::vector<uint8_t> replicated_;  // per node: 1 when a replica of it was listed
  std::vector<int16_t> owner_;       // kClusterSlots indices into nodes_, -1 for none
  size_t replicas_ = 0;
};

}  // namespace kjit
