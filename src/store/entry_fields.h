// The one list of an entry's fields (store/entry.h), from which every encoding of an entry
// is generated: the JSON metadata (Entry::metadata_json, hence export records and
// kjit_binary_metadata_json), the binary metadata of payload files (Entry::metadata_binary)
// and the entry in the compile worker's reply (worker/protocol.h). A field added here
// appears in each encoding that its row names; docs/formats.md states the formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "store/entry.h"

namespace kjit {

// How a field is written; each codec has one way of writing each kind.
namespace field_kind {
struct Text {};       // std::string
struct TextList {};   // std::vector<std::string>
struct NamePairs {};  // (expression, lowered name) pairs
struct Log {};        // Text; the JSON adds "advisories" (ptxas_advisories) after it
struct Millis {};     // double, finite
struct Pch {};        // PchOutcome: its name in JSON, its number (checked) in binary
struct Created {};    // int64_t >= 0, seconds; an encoder given another time writes that one
struct Time {};       // int64_t >= 0, seconds
struct Manifest {};   // Text; left out of the JSON when empty
// A blob: its size in the metadata ("sizes" in JSON), read back into
// Entry::recorded_sizes; its bytes where an encoding carries code (the worker's reply).
template <BlobKind K>
struct Code {};
}  // namespace field_kind

// X(member, JSON name, kind, in the metadata, position in the worker's reply)
// in the order of the metadata (JSON and binary). "In the metadata" is 1 for a field of
// the JSON and binary metadata, 0 for none; the reply's position is 1, 2, ... in the
// reply's order (the reply predates this list, its order differs), 0 when not sent.
// key and last_used are in none of these: each container writes the key itself (payload
// file header, export record; the worker's client knows it) and the index keeps last use.
// Every data member of Entry is a row, recorded_sizes aside (the Code rows fill it).
#define KJIT_ENTRY_FIELDS(X)                                             \
  X(target, "target", Text, 1, 1)                                        \
  X(toolchain, "toolchain", Text, 1, 9)                                  \
  X(program_name, "program", Text, 1, 10)                                \
  X(options, "options", TextList, 1, 8)                                  \
  X(names, "names", NamePairs, 1, 6)                                     \
  X(kernels, "kernels", TextList, 1, 7)                                  \
  X(log, "log", Log, 1, 5)                                               \
  X(compile_ms, "compile_ms", Millis, 1, 11)                             \
  X(pch, "pch", Pch, 1, 13)                                              \
  X(created, "created", Created, 1, 12)                                  \
  X(manifest, "manifest", Manifest, 1, 0) /* the worker compiles code */ \
  X(ptx, "ptx", Code<BlobKind::Ptx>, 1, 2)                               \
  X(cubin, "cubin", Code<BlobKind::Cubin>, 1, 3)                         \
  X(ltoir, "ltoir", Code<BlobKind::LtoIr>, 1, 4)                         \
  X(key, "key", Text, 0, 0)                                              \
  X(last_used, "last_used", Time, 0, 0)

namespace entry_fields {

#define KJIT_ENTRY_FIELD_ID(member, name, kind, meta, reply) member,
enum class Id : int { KJIT_ENTRY_FIELDS(KJIT_ENTRY_FIELD_ID) };
#undef KJIT_ENTRY_FIELD_ID

#define KJIT_ENTRY_FIELD_ONE(member, name, kind, meta, reply) +1
constexpr int kCount = 0 KJIT_ENTRY_FIELDS(KJIT_ENTRY_FIELD_ONE);
#undef KJIT_ENTRY_FIELD_ONE

#define KJIT_ENTRY_FIELD_REPLY(member, name, kind, meta, reply) reply,
constexpr int kReplyPosition[] = {KJIT_ENTRY_FIELDS(KJIT_ENTRY_FIELD_REPLY)};
#undef KJIT_ENTRY_FIELD_REPLY

// How many fields the reply carries; and whether their positions are 1..that, each once.
constexpr int reply_count() {
  int n = 0;
  for (int p : kReplyPosition) n += p > 0;
  return n;
}
constexpr bool reply_positions_distinct() {
  for (int want = 1; want <= reply_count(); ++want) {
    int seen = 0;
    for (int p : kReplyPosition) seen += p == want;
    if (seen != 1) return false;
  }
  return true;
}
static_assert(reply_positions_distinct(), "the reply's positions must be 1, 2, ... each once");

// Entry can be brace-initialised from exactly kCount + 1 values (the rows and
// recorded_sizes): a data member without a row fails to build here.
struct AnyValue {
  template <class T>
  operator T() const;  // NOLINT(google-explicit-constructor): never called, only named
};
template <class T, class Seq, class = void>
struct BracedFrom : std::false_type {};
template <class T, size_t... I>
struct BracedFrom<T, std::index_sequence<I...>, std::void_t<decltype(T{(void(I), AnyValue{})...})>>
    : std::true_type {};
static_assert(BracedFrom<Entry, std::make_index_sequence<kCount + 1>>::value &&
                  !BracedFrom<Entry, std::make_index_sequence<kCount + 2>>::value,
              "every data member of Entry needs a row in KJIT_ENTRY_FIELDS");

// Calls f(kind, JSON name, member) for each field of the metadata, in its order. `E` is
// Entry or const Entry.
template <class E, class F>
void for_each_metadata_field(E& e, F&& f) {
#define KJIT_ENTRY_FIELD_META(member, name, kind, meta, reply) \
  if constexpr ((meta) != 0) f(field_kind::kind{}, name, e.member);
  KJIT_ENTRY_FIELDS(KJIT_ENTRY_FIELD_META)
#undef KJIT_ENTRY_FIELD_META
}

// The same for the field at position `P` of the worker's reply, then for every field of the
// reply in its order.
template <int P, class E, class F>
void reply_field_at(E& e, F& f) {
#define KJIT_ENTRY_FIELD_AT(member, name, kind, meta, reply) \
  if constexpr (reply == P) f(field_kind::kind{}, name, e.member);
  KJIT_ENTRY_FIELDS(KJIT_ENTRY_FIELD_AT)
#undef KJIT_ENTRY_FIELD_AT
}
template <class E, class F, int... P>
void reply_fields_in(E& e, F& f, std::integer_sequence<int, P...>) {
  (reply_field_at<P + 1>(e, f), ...);
}
template <class E, class F>
void for_each_reply_field(E& e, F&& f) {
  reply_fields_in(e, f, std::make_integer_sequence<int, reply_count()>());
}

}  // namespace entry_fields
}  // namespace kjit
