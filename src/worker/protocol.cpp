#include "worker/protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "store/entry_wire.h"
#include "util/fs.h"
#include "util/pch_outcome.h"

namespace kjit::worker {
namespace {

constexpr size_t kHeaderBytes = 16;

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return false;
    }
    data += n;
    size -= size_t(n);
  }
  return true;
}

// Reads exactly `size` bytes. Eof only when nothing of them was read.
ReadResult read_exact(int fd, char* out, size_t size, double deadline_ms,
                      bool (*interrupted)(void*), void* user) {
  size_t got = 0;
  while (got < size) {
    int wait_ms = 50;
    if (deadline_ms >= 0) {
      const double left = deadline_ms - monotonic_ms();
      if (left <= 0) return ReadResult::Timeout;
      if (left < wait_ms) wait_ms = int(std::ceil(left));
    }
    if (interrupted && interrupted(user)) return ReadResult::Timeout;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ReadResult::Error;
    }
    if (r == 0) continue;
    const ssize_t n = ::recv(fd, out + got, size - got, MSG_DONTWAIT);
    if (n == 0) return got == 0 ? ReadResult::Eof : ReadResult::Error;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return got == 0 && (errno == ECONNRESET) ? ReadResult::Eof : ReadResult::Error;
    }
    got += size_t(n);
  }
  return ReadResult::Ok;
}

void write_opened(Writer& w, const std::vector<OpenedFile>& files) {
  w.u64(files.size());
  for (const OpenedFile& f : files) {
    w.str(f.path);
    w.u32((f.ok ? 1u : 0u) | (f.write ? 2u : 0u) | (f.directory ? 4u : 0u) |
          (f.nvrtc_private ? 8u : 0u) | (f.from_pch ? 16u : 0u) | (f.relative ? 32u : 0u) |
          (f.digest.empty() ? 0u : 64u));
    if (!f.digest.empty()) w.str(f.digest);
  }
}

}  // namespace

std::string encode(const Hello& h) {
  Writer w;
  w.str(h.library_version);
  w.u32(h.protocol);
  w.str(h.toolchain);
  w.u64(uint64_t(h.pid));
  return std::move(w.bytes());
}

Hello decode_hello(const std::string& payload) {
  Reader r(payload);
  Hello h;
  h.library_version = r.str();
  h.protocol = r.u32();
  h.toolchain = r.str();
  h.pid = int64_t(r.u64());
  r.finish();
  return h;
}

namespace {

// One request field on the wire, by type.
void put(Writer& w, const std::string& v) {
  w.str(v);
}
void put(Writer& w, const StringList& v) {
  w.strs(v);
}
void put(Writer& w, uint32_t v) {
  w.u32(v);
}
void put(Writer& w, uint64_t v) {
  w.u64(v);
}
void put(Writer& w, int v) {
  w.u32(uint32_t(v));
}
void put(Writer& w, bool v) {
  w.u32(v ? 1 : 0);
}
void put(Writer& w, const HeaderList& v) {
  w.u64(v.size());
  for (const auto& [name, contents] : v) {
    w.str(name);
    w.str(contents);
  }
}

void get(Reader& r, std::string* v) {
  *v = r.str();
}
void get(Reader& r, StringList* v) {
  *v = r.strs();
}
void get(Reader& r, uint32_t* v) {
  *v = r.u32();
}
void get(Reader& r, uint64_t* v) {
  *v = r.u64();
}
void get(Reader& r, int* v) {
  *v = int(r.u32());
}
void get(Reader& r, bool* v) {
  *v = r.boolean();
}
void get(Reader& r, HeaderList* v) {
  const uint64_t n = r.u64();
  if (n > r.size() / 16) throw ProtocolError("too many headers for the message size");
  for (uint64_t i = 0; i < n; ++i) {
    std::string name = r.str();
    v->emplace_back(std::move(name), r.str());
  }
}

// The options, field by field in their lists' order (key/request.h).
#define KJIT_PUT_OPTION(type, field, init) put(w, v.field);
#define KJIT_GET_OPTION(type, field, init) get(r, &v->field);
void put(Writer& w, const CompileOptions& v) {
  KJIT_COMPILE_OPTIONS_FIELDS(KJIT_PUT_OPTION)
}
void get(Reader& r, CompileOptions* v) {
  KJIT_COMPILE_OPTIONS_FIELDS(KJIT_GET_OPTION)
}
void put(Writer& w, const NormalisedOptions& v) {
  KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_PUT_OPTION)
}
void get(Reader& r, NormalisedOptions* v) {
  KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_GET_OPTION)
}
#undef KJIT_PUT_OPTION
#undef KJIT_GET_OPTION

}  // namespace

std::string encode(const CompileRequest& q) {
  Writer w;
#define KJIT_PUT_FIELD(type, name) put(w, q.name);
  KJIT_COMPILE_REQUEST_FIELDS(KJIT_PUT_FIELD)
#undef KJIT_PUT_FIELD
  return std::move(w.bytes());
}

CompileRequest decode_request(const std::string& payload) {
  Reader r(payload);
  CompileRequest q;
#define KJIT_GET_FIELD(type, name) get(r, &q.name);
  KJIT_COMPILE_REQUEST_FIELDS(KJIT_GET_FIELD)
#undef KJIT_GET_FIELD
  r.finish();
  return q;
}

std::string encode(const CompileReply& rep) {
  const Outcome& o = rep.outcome;
  Writer w;
  w.u32(uint32_t(o.status));
  w.str(o.message);
  w.u32(uint32_t(o.pch));
  w.u32(o.entry ? 1 : 0);
  if (o.entry) put_entry_fields(w, *o.entry, EntryWire::Reply);
  w.u32(rep.audit.available ? 1 : 0);
  w.u32(rep.audit.whole ? 1 : 0);
  write_opened(w, rep.audit.opened);
  w.str(rep.audit.doubt);
  return std::move(w.bytes());
}

CompileReply decode_reply(const std::string& payload) {
  Reader r(payload);
  CompileReply rep;
  Outcome& o = rep.outcome;
  const uint32_t status = r.u32();
  if (status > 1000) throw ProtocolError("status out of range");
  o.status = static_cast<kjit_status>(status);
  o.message = r.str();
  o.pch = pch_outcome_from_wire(r.u32());
  o.tier = KJIT_TIER_COMPILED;
  if (r.boolean()) {
    auto e = std::make_shared<Entry>();
    get_entry_fields(r, e.get(), EntryWire::Reply);
    e->last_used = e->created;
    o.entry = e;
  }
  rep.audit.available = r.boolean();
  rep.audit.whole = r.boolean();
  const uint64_t files = r.u64();
  if (files > payload.size() / 12) throw ProtocolError("too many files for the message size");
  for (uint64_t i = 0; i < files; ++i) {
    OpenedFile f;
    f.path = r.str();
    const uint32_t flags = r.u32();
    f.ok = flags & 1;
    f.write = flags & 2;
    f.directory = flags & 4;
    f.nvrtc_private = flags & 8;
    f.from_pch = flags & 16;
    f.relative = flags & 32;
    if (flags & 64) f.digest = r.str();
    rep.audit.opened.push_back(std::move(f));
  }
  rep.audit.doubt = r.str();
  r.finish();
  return rep;
}

std::string encode(const WorkerStatus& s) {
  Writer w;
  w.u64(uint64_t(s.pid));
  w.f64(s.uptime_s);
  w.f64(s.idle_s);
  w.u64(s.compiles);
  w.u64(s.failures);
  w.u64(s.crashes);
  w.u64(s.in_flight);
  w.u64(s.pch_created);
  w.u64(s.pch_used);
  w.u32(s.pch_in_use ? 1 : 0);
  w.u64(s.idle_limit_s);
  w.u64(s.rss_bytes);
  w.u64(s.timeouts);
  w.str(s.library_version);
  w.str(s.toolchain);
  return std::move(w.bytes());
}

WorkerStatus decode_status(const std::string& payload) {
  Reader r(payload);
  WorkerStatus s;
  s.pid = int64_t(r.u64());
  s.uptime_s = r.f64();
  s.idle_s = r.f64();
  s.compiles = r.u64();
  s.failures = r.u64();
  s.crashes = r.u64();
  s.in_flight = r.u64();
  s.pch_created = r.u64();
  s.pch_used = r.u64();
  s.pch_in_use = r.boolean();
  s.idle_limit_s = r.u64();
  s.rss_bytes = r.u64();
  s.timeouts = r.u64();
  s.library_version = r.str();
  s.toolchain = r.str();
  r.finish();
  return s;
}

bool write_frame(int fd, FrameType type, const std::string& payload) {
  if (payload.size() > kMaxFrameBytes) return false;
  unsigned char h[kHeaderBytes];
  put_le(h, uint32_t(type), 4);
  put_le(h + 4, 0, 4);
  put_le(h + 8, payload.size(), 8);
  return write_all(fd, reinterpret_cast<const char*>(h), sizeof h) &&
         write_all(fd, payload.data(), payload.size());
}

ReadResult read_frame(int fd, FrameType* type, std::string* payload, double deadline_ms,
                      bool (*interrupted)(void*), void* user) {
  unsigned char h[kHeaderBytes];
  ReadResult r =
      read_exact(fd, reinterpret_cast<char*>(h), sizeof h, deadline_ms, interrupted, user);
  if (r != ReadResult::Ok) return r;
  const uint64_t size = get_le(h + 8, 8);
  if (size > kMaxFrameBytes || get_le(h + 4, 4) != 0) return ReadResult::TooLarge;
  *type = static_cast<FrameType>(get_le(h, 4));
  // The buffer grows with what arrives, so a lying header cannot make it allocate.
  payload->clear();
  constexpr size_t kChunk = size_t(1) << 20;
  while (payload->size() < size) {
    const size_t at = payload->size();
    const size_t n = std::min<uint64_t>(kChunk, size - at);
    payload->resize(at + n);
    r = read_exact(fd, payload->data() + at, n, deadline_ms, interrupted, user);
    if (r != ReadResult::Ok) return r == ReadResult::Eof ? ReadResult::Error : r;
  }
  return ReadResult::Ok;
}

size_t crash_frame(int signal, unsigned char out[20]) {
  put_le(out, uint32_t(FrameType::Crash), 4);
  put_le(out + 4, 0, 4);
  put_le(out + 8, 4, 8);
  put_le(out + 16, uint32_t(signal), 4);
  return 20;
}

}  // namespace kjit::worker
