// The one list of an entry's fields (store/entry_fields.h) drives every encoding: an entry
// with every field set to a value of its own goes through each codec and comes back equal,
// field by field, in each field the codec carries, and at its default in the others.
// (A data member of Entry without a row does not build: entry_fields.h checks the count.)
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/entry.h"
#include "store/entry_fields.h"
#include "store/export.h"
#include "support/entry_sample.h"
#include "worker/protocol.h"

namespace {

using kjit::BlobKind;
using kjit::Entry;
using kjit::test::entry_with_distinct_fields;
namespace fk = kjit::field_kind;

enum class Codec { Json, Binary, Export, Reply };

// Whether `codec` carries the field of a row (by its metadata and reply columns).
bool carries(Codec codec, bool meta, int reply, const std::string& member) {
  switch (codec) {
    case Codec::Json:
    case Codec::Binary:
      return meta;
    case Codec::Export:  // the metadata and, beside it, the key
      return meta || member == "key";
    case Codec::Reply:
      return reply > 0;
  }
  return false;
}

// One field of `back`, read by `codec` from the encoding of `sample`.
template <class Kind, class T>
void expect_field(Kind, Codec, const std::string& member, bool carried, const T& back,
                  const T& sample, const T& fresh, const Entry&) {
  if (carried) {
    EXPECT_EQ(back, sample) << member;
  } else {
    EXPECT_EQ(back, fresh) << member << " is not carried, yet it was read";
  }
}
// A blob in the metadata is its size, read back into recorded_sizes.
template <BlobKind K>
void expect_field(fk::Code<K> kind, Codec codec, const std::string& member, bool carried,
                  const kjit::Blob& back, const kjit::Blob& sample, const kjit::Blob& fresh,
                  const Entry& whole) {
  if (carried && (codec == Codec::Json || codec == Codec::Binary)) {
    EXPECT_EQ(back, fresh) << member;
    Entry::Sizes sizes = whole.recorded_sizes;
    EXPECT_EQ(sizes.of(K), sample.size()) << member;
    return;
  }
  expect_field<fk::Code<K>, kjit::Blob>(kind, codec, member, carried, back, sample, fresh, whole);
}

void expect_fields(Codec codec, const Entry& back, const Entry& sample) {
  const Entry fresh;
#define KJIT_EXPECT_FIELD(member, name, kind, meta, reply)                                    \
  expect_field(fk::kind{}, codec, #member, carries(codec, meta, reply, #member), back.member, \
               sample.member, fresh.member, back);
  KJIT_ENTRY_FIELDS(KJIT_EXPECT_FIELD)
#undef KJIT_EXPECT_FIELD
}

// The sample sets every field of the list to a value of its own, so that a codec that
// drops a field, or reads it into another, is seen.
TEST(EntryFields, TheSampleSetsEveryField) {
  const Entry sample = entry_with_distinct_fields();
  const Entry fresh;
#define KJIT_EXPECT_SET(member, name, kind, meta, reply) \
  EXPECT_FALSE(sample.member == fresh.member) << #member;
  KJIT_ENTRY_FIELDS(KJIT_EXPECT_SET)
#undef KJIT_EXPECT_SET
  EXPECT_NE(sample.target, sample.toolchain);
  EXPECT_NE(sample.kernels, sample.options);
  EXPECT_NE(sample.created, sample.last_used);
  EXPECT_NE(sample.log, sample.manifest);
}

TEST(EntryFields, JsonMetadataCarriesEveryMetadataField) {
  const Entry sample = entry_with_distinct_fields();
  Entry back;
  back.load_metadata(sample.metadata_json());
  expect_fields(Codec::Json, back, sample);
}

TEST(EntryFields, BinaryMetadataCarriesEveryMetadataField) {
  const Entry sample = entry_with_distinct_fields();
  Entry back;
  back.load_metadata_binary(sample.metadata_binary());
  expect_fields(Codec::Binary, back, sample);
}

TEST(EntryFields, ExportRecordCarriesTheKeyTheMetadataAndTheCode) {
  const Entry sample = entry_with_distinct_fields();
  Entry back;
  ASSERT_TRUE(kjit::decode_record(kjit::encode_record(sample), &back));
  expect_fields(Codec::Export, back, sample);
}

// The reply carries the code and every field but the manifest (the worker compiles code);
// the client sets the key, and the entry was last used when it was made.
TEST(EntryFields, WorkerReplyCarriesItsFields) {
  const Entry sample = entry_with_distinct_fields();
  kjit::worker::CompileReply rep;
  rep.outcome.entry = std::make_shared<Entry>(sample);
  const kjit::worker::CompileReply got = kjit::worker::decode_reply(kjit::worker::encode(rep));
  ASSERT_TRUE(got.outcome.entry);
  Entry back = *got.outcome.entry;
  EXPECT_EQ(back.last_used, sample.created);
  back.last_used = Entry().last_used;
  expect_fields(Codec::Reply, back, sample);
}

// Empty strings and lists, zero numbers: an entry with nothing set comes back as it was.
TEST(EntryFields, AnEmptyEntryComesBackEmpty) {
  const Entry fresh;
  Entry from_json, from_binary;
  from_json.load_metadata(fresh.metadata_json());
  expect_fields(Codec::Json, from_json, fresh);
  from_binary.load_metadata_binary(fresh.metadata_binary());
  expect_fields(Codec::Binary, from_binary, fresh);
  kjit::worker::CompileReply rep;
  rep.outcome.entry = std::make_shared<Entry>(fresh);
  const kjit::worker::CompileReply got = kjit::worker::decode_reply(kjit::worker::encode(rep));
  ASSERT_TRUE(got.outcome.entry);
  expect_fields(Codec::Reply, *got.outcome.entry, fresh);
}

}  // namespace
