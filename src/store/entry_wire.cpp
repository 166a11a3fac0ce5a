#include "store/entry_wire.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "store/entry_fields.h"
#include "util/pch_outcome.h"

namespace kjit {
namespace {

namespace fk = field_kind;
using NamePairList = std::vector<std::pair<std::string, std::string>>;

// One field onto the wire, by kind.
struct WireFieldWriter {
  WireWriter& w;
  EntryWire form;
  int64_t created_at;

  void operator()(fk::Text, const char*, const std::string& v) { w.str(v); }
  void operator()(fk::Log, const char*, const std::string& v) { w.str(v); }
  void operator()(fk::Manifest, const char*, const std::string& v) { w.str(v); }
  void operator()(fk::TextList, const char*, const std::vector<std::string>& v) { w.strs(v); }
  void operator()(fk::NamePairs, const char*, const NamePairList& v) {
    w.u64(v.size());
    for (const auto& [expr, lowered] : v) {
      w.str(expr);
      w.str(lowered);
    }
  }
  void operator()(fk::Millis, const char*, double v) { w.f64(v); }
  void operator()(fk::Pch, const char*, PchOutcome v) {
    if (form == EntryWire::Reply) {
      w.u32(uint32_t(v));
    } else {
      w.u64(uint32_t(v));
    }
  }
  void operator()(fk::Created, const char*, int64_t v) {
    w.u64(static_cast<uint64_t>(created_at ? created_at : v));
  }
  void operator()(fk::Time, const char*, int64_t v) { w.u64(static_cast<uint64_t>(v)); }
  template <BlobKind K>
  void operator()(fk::Code<K>, const char*, const Blob& b) {
    if (form == EntryWire::Reply) {
      w.str(b);
    } else {
      w.u64(b.size());
    }
  }
};

// A time in seconds: a u64 that fits int64_t.
int64_t read_time(WireReader& r, const char* name) {
  const uint64_t v = r.u64();
  if (v > uint64_t(INT64_MAX)) throw WireError(std::string("bad ") + name);
  return int64_t(v);
}

// One field off the wire, by kind.
struct WireFieldReader {
  WireReader& r;
  Entry& e;
  EntryWire form;

  void operator()(fk::Text, const char*, std::string& v) { v = r.str(); }
  void operator()(fk::Log, const char*, std::string& v) { v = r.str(); }
  void operator()(fk::Manifest, const char*, std::string& v) { v = r.str(); }
  void operator()(fk::TextList, const char*, std::vector<std::string>& v) { v = r.strs(); }
  void operator()(fk::NamePairs, const char*, NamePairList& v) {
    v.resize(r.count());
    for (auto& [expr, lowered] : v) {
      expr = r.str();
      lowered = r.str();
    }
  }
  // Infinity and NaN would be written back as null in JSON, which no reader accepts.
  void operator()(fk::Millis, const char* name, double& v) {
    v = r.f64();
    if (!std::isfinite(v)) throw WireError(std::string("bad ") + name);
  }
  void operator()(fk::Pch, const char*, PchOutcome& v) {
    v = pch_outcome_from_wire(form == EntryWire::Reply ? r.u32() : r.u64());
  }
  void operator()(fk::Created, const char* name, int64_t& v) { v = read_time(r, name); }
  void operator()(fk::Time, const char* name, int64_t& v) { v = read_time(r, name); }
  template <BlobKind K>
  void operator()(fk::Code<K>, const char*, Blob& b) {
    if (form == EntryWire::Reply) {
      b = r.str();
    } else {
      e.recorded_sizes.of(K) = r.u64();
    }
  }
};

}  // namespace

void put_entry_fields(WireWriter& w, const Entry& e, EntryWire form, int64_t created) {
  WireFieldWriter put{w, form, created};
  if (form == EntryWire::Reply) {
    entry_fields::for_each_reply_field(e, put);
  } else {
    entry_fields::for_each_metadata_field(e, put);
  }
}

void get_entry_fields(WireReader& r, Entry* e, EntryWire form) {
  WireFieldReader get{r, *e, form};
  if (form == EntryWire::Reply) {
    entry_fields::for_each_reply_field(*e, get);
  } else {
    entry_fields::for_each_metadata_field(*e, get);
  }
}

}  // namespace kjit
