#include "store/remote_cluster.h"

#include <algorithm>
#include <cstdlib>

#include "util/error.h"

namespace kjit {

const char* topology_name(RemoteTopology t) {
  switch (t) {
    case RemoteTopology::Single:
      return "single";
    case RemoteTopology::Sentinel:
      return "sentinel";
    case RemoteTopology::Cluster:
      return "cluster";
  }
  return "single";
}

namespace {

[[noreturn]] void bad_url(const std::string& url, const std::string& why) {
  fail(KJIT_ERROR_INVALID_ARGUMENT, "remote URL '" + url + "': " + why);
}

bool parse_number(const std::string& s, long lo, long hi, long* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::strtol(s.c_str(), nullptr, 10);
  return *out >= lo && *out <= hi;
}

RemoteAddress parse_host_port(const std::string& url, const std::string& s, int default_port) {
  RemoteAddress a;
  a.port = default_port;
  std::string host = s;
  if (!s.empty() && s[0] == '[') {  // [::1]:port
    const size_t close = s.find(']');
    if (close == std::string::npos) bad_url(url, "unclosed '[' in '" + s + "'");
    host = s.substr(1, close - 1);
    const std::string rest = s.substr(close + 1);
    if (!rest.empty()) {
      long port = 0;
      if (rest[0] != ':' || !parse_number(rest.substr(1), 1, 65535, &port))
        bad_url(url, "bad port in '" + s + "'");
      a.port = int(port);
    }
  } else {
    const size_t colon = s.rfind(':');
    if (colon != std::string::npos) {
      host = s.substr(0, colon);
      long port = 0;
      if (!parse_number(s.substr(colon + 1), 1, 65535, &port)) bad_url(url, "bad port");
      a.port = int(port);
    }
  }
  if (host.empty()) bad_url(url, "no host");
  a.host = host;
  return a;
}

std::vector<RemoteAddress> parse_host_list(const std::string& url, const std::string& list,
                                           int default_port) {
  std::vector<RemoteAddress> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    out.push_back(parse_host_port(url, list.substr(start, comma - start), default_port));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int parse_db(const std::string& url, const std::string& s) {
  if (s.empty()) return 0;
  long db = 0;
  if (!parse_number(s, 0, 1 << 20, &db)) bad_url(url, "bad database number");
  return int(db);
}

}  // namespace

RemoteEndpoints parse_remote_url(const std::string& url) {
  RemoteEndpoints ep;
  auto authority_and_path = [&](size_t scheme_len, std::string* path) {
    std::string rest = url.substr(scheme_len);
    const size_t slash = rest.find('/');
    *path = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (rest.find('@') != std::string::npos) bad_url(url, "credentials are not supported");
    if (rest.empty()) bad_url(url, "no host");
    return rest;
  };
  std::string path;
  if (url.rfind("unix://", 0) == 0) {
    RemoteAddress a;
    a.socket = url.substr(7);
    if (a.socket.empty()) bad_url(url, "no socket path");
    ep.nodes.push_back(a);
  } else if (url.rfind("redis://", 0) == 0) {
    const std::string hosts = authority_and_path(8, &path);
    if (hosts.find(',') != std::string::npos)
      bad_url(url, "several hosts: use redis+sentinel:// or redis+cluster://");
    ep.nodes.push_back(parse_host_port(url, hosts, 6379));
    ep.db = parse_db(url, path);
  } else if (url.rfind("redis+sentinel://", 0) == 0) {
    ep.topology = RemoteTopology::Sentinel;
    ep.nodes = parse_host_list(url, authority_and_path(17, &path), 26379);
    const size_t slash = path.find('/');
    ep.master_name = path.substr(0, slash);
    if (ep.master_name.empty()) bad_url(url, "no master name (redis+sentinel://hosts/master)");
    if (slash != std::string::npos) ep.db = parse_db(url, path.substr(slash + 1));
  } else if (url.rfind("redis+cluster://", 0) == 0) {
    ep.topology = RemoteTopology::Cluster;
    ep.nodes = parse_host_list(url, authority_and_path(16, &path), 6379);
    if (!path.empty()) bad_url(url, "a cluster has no databases (nothing after the hosts)");
  } else {
    bad_url(url,
            "not redis://host:port[/db], unix:///path, redis+sentinel://hosts/master[/db] or "
            "redis+cluster://hosts");
  }
  return ep;
}

uint16_t crc16_xmodem(const char* data, size_t size) {
  uint16_t crc = 0;
  for (size_t i = 0; i < size; ++i) {
    crc ^= uint16_t(static_cast<unsigned char>(data[i])) << 8;
    for (int b = 0; b < 8; ++b)
      crc = (crc & 0x8000) ? uint16_t((crc << 1) ^ 0x1021) : uint16_t(crc << 1);
  }
  return crc;
}

int cluster_slot(const std::string& key) {
  const size_t open = key.find('{');
  if (open != std::string::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string::npos && close > open + 1)
      return crc16_xmodem(key.data() + open + 1, close - open - 1) % kClusterSlots;
  }
  return crc16_xmodem(key.data(), key.size()) % kClusterSlots;
}

Redirect parse_redirect(const std::string& error) {
  Redirect r;
  Redirect::Kind kind;
  size_t skip;
  if (error.rfind("MOVED ", 0) == 0) {
    kind = Redirect::Kind::Moved;
    skip = 6;
  } else if (error.rfind("ASK ", 0) == 0) {
    kind = Redirect::Kind::Ask;
    skip = 4;
  } else {
    return r;
  }
  const size_t space = error.find(' ', skip);
  if (space == std::string::npos) return r;
  long slot = 0;
  if (!parse_number(error.substr(skip, space - skip), 0, kClusterSlots - 1, &slot)) return r;
  const std::string addr = error.substr(space + 1);
  const size_t colon = addr.rfind(':');
  long port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !parse_number(addr.substr(colon + 1), 1, 65535, &port))
    return r;
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  r.kind = kind;
  r.slot = int(slot);
  r.to.host = host;
  r.to.port = int(port);
  return r;
}

SlotMap::SlotMap() : owner_(kClusterSlots, -1) {}

bool SlotMap::load(const RemoteReply& slots, const std::string& asked_host) {
  if (slots.type != RemoteReply::Type::Array) return false;
  std::vector<RemoteAddress> nodes;
  std::vector<uint8_t> replicated;
  std::vector<int16_t> owner(kClusterSlots, -1);
  std::vector<RemoteAddress> replicas;
  for (const RemoteReply& range : slots.elements) {
    if (range.type != RemoteReply::Type::Array || range.elements.size() < 3) return false;
    const RemoteReply& lo = range.elements[0];
    const RemoteReply& hi = range.elements[1];
    const RemoteReply& master = range.elements[2];
    if (lo.type != RemoteReply::Type::Integer || hi.type != RemoteReply::Type::Integer ||
        lo.integer < 0 || hi.integer >= kClusterSlots || lo.integer > hi.integer)
      return false;
    if (master.type != RemoteReply::Type::Array || master.elements.size() < 2 ||
        master.elements[0].type != RemoteReply::Type::String ||
        master.elements[1].type != RemoteReply::Type::Integer || master.elements[1].integer <= 0 ||
        master.elements[1].integer > 65535)
      return false;
    RemoteAddress a;
    a.host = master.elements[0].str.empty() || master.elements[0].str == "?"
                 ? asked_host
                 : master.elements[0].str;
    a.port = int(master.elements[1].integer);
    size_t index = 0;
    while (index < nodes.size() && !(nodes[index] == a)) ++index;
    if (index == nodes.size()) {
      if (nodes.size() >= 1024) return false;
      nodes.push_back(a);
      replicated.push_back(0);
    }
    // Replicas follow the master (Redis lists a master's replicas with each of its ranges).
    for (size_t i = 3; i < range.elements.size(); ++i) {
      const RemoteReply& r = range.elements[i];
      if (r.type != RemoteReply::Type::Array || r.elements.size() < 2 ||
          r.elements[0].type != RemoteReply::Type::String ||
          r.elements[1].type != RemoteReply::Type::Integer || r.elements[1].integer <= 0 ||
          r.elements[1].integer > 65535)
        return false;
      RemoteAddress ra;
      ra.host =
          r.elements[0].str.empty() || r.elements[0].str == "?" ? asked_host : r.elements[0].str;
      ra.port = int(r.elements[1].integer);
      replicated[index] = 1;
      if (std::find(replicas.begin(), replicas.end(), ra) == replicas.end()) {
        if (replicas.size() >= 1024) return false;
        replicas.push_back(ra);
      }
    }
    for (long long s = lo.integer; s <= hi.integer; ++s) owner[size_t(s)] = int16_t(index);
  }
  nodes_ = std::move(nodes);
  replicated_ = std::move(replicated);
  owner_ = std::move(owner);
  replicas_ = replicas.size();
  return true;
}

const RemoteAddress* SlotMap::node_for(int slot) const {
  if (slot < 0 || slot >= kClusterSlots || owner_[size_t(slot)] < 0) return nullptr;
  return &nodes_[size_t(owner_[size_t(slot)])];
}

bool SlotMap::replicated(int slot) const {
  if (slot < 0 || slot >= kClusterSlots || owner_[size_t(slot)] < 0) return false;
  return replicated_[size_t(owner_[size_t(slot)])] != 0;
}

size_t SlotMap::replicas() const {
  return replicas_;
}

void SlotMap::set(int slot, const RemoteAddress& node) {
  if (slot < 0 || slot >= kClusterSlots) return;
  size_t index = 0;
  while (index < nodes_.size() && !(nodes_[index] == node)) ++index;
  if (index == nodes_.size()) {
    if (nodes_.size() >= 1024) return;
    nodes_.push_back(node);
    replicated_.push_back(0);  // not known until the next reload
  }
  owner_[size_t(slot)] = int16_t(index);
}

size_t SlotMap::covered() const {
  size_t n = 0;
  for (int16_t o : owner_) n += o >= 0 ? 1 : 0;
  return n;
}

}  // namespace kjit
