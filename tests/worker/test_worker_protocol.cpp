// The compile worker's protocol (worker/protocol.h): requests travel whole through one
// codec, and nothing a peer sends is trusted.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "key/request.h"
#include "support/entry_sample.h"
#include "util/fs.h"
#include "util/pch_outcome.h"
#include "worker/protocol.h"

namespace wk = kjit::worker;

namespace {

// ---- every field of a request reaches the worker ------------------------------------------------

// A value of each field type unlike its default, different for each field (from its name).
void sample(std::string* v, const std::string& field) {
  *v = "value of " + field;
}
void sample(std::vector<std::string>* v, const std::string& field) {
  *v = {"first of " + field, "", "third of " + field};
}
void sample(std::vector<std::pair<std::string, std::string>>* v, const std::string& field) {
  *v = {{field + ".h", "int a;"}, {"b.h", std::string("\0\xff", 2)}};
}
void sample(bool* v, const std::string&) {
  *v = !*v;
}
void sample(unsigned* v, const std::string& field) {
  *v = 0x80000000u + unsigned(field.size());
}
void sample(int* v, const std::string& field) {
  *v = -2 - int(field.size());
}
void sample(uint64_t* v, const std::string& field) {
  *v = 0x1234567890ull << 20 | field.size();
}

#define KJIT_SAMPLE_FIELD(type, field, init) sample(&v->field, #field);
void sample(kjit::CompileOptions* v, const std::string&) {
  KJIT_COMPILE_OPTIONS_FIELDS(KJIT_SAMPLE_FIELD)
}
void sample(kjit::NormalisedOptions* v,
            const std::string&){KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_SAMPLE_FIELD)}
#undef KJIT_SAMPLE_FIELD

TEST(WorkerProtocol, RequestRoundTripsWithEveryField) {
  wk::CompileRequest q;
#define KJIT_SAMPLE_FIELD(type, field) sample(&q.field, #field);
  KJIT_COMPILE_REQUEST_FIELDS(KJIT_SAMPLE_FIELD)
#undef KJIT_SAMPLE_FIELD
  // Every field holds something other than its default.
  const wk::CompileRequest defaults;
  const kjit::CompileOptions& default_options = defaults.options;
  const kjit::NormalisedOptions& default_norm = defaults.norm;
#define KJIT_DIFFERS(type, field) EXPECT_FALSE(q.field == defaults.field) << #field;
  KJIT_COMPILE_REQUEST_FIELDS(KJIT_DIFFERS)
#undef KJIT_DIFFERS
#define KJIT_DIFFERS(type, field, init) \
  EXPECT_FALSE(q.options.field == default_options.field) << #field;
  KJIT_COMPILE_OPTIONS_FIELDS(KJIT_DIFFERS)
#undef KJIT_DIFFERS
#define KJIT_DIFFERS(type, field, init) EXPECT_FALSE(q.norm.field == default_norm.field) << #field;
  KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_DIFFERS)
#undef KJIT_DIFFERS

  const wk::CompileRequest back = wk::decode_request(wk::encode(q));
  // Field by field, so that a failure names the field the codec lost.
#define KJIT_SAME(type, field, init) EXPECT_TRUE(back.options.field == q.options.field) << #field;
  KJIT_COMPILE_OPTIONS_FIELDS(KJIT_SAME)
#undef KJIT_SAME
#define KJIT_SAME(type, field, init) EXPECT_TRUE(back.norm.field == q.norm.field) << #field;
  KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_SAME)
#undef KJIT_SAME
#define KJIT_SAME(type, field) EXPECT_TRUE(back.field == q.field) << #field;
  KJIT_COMPILE_REQUEST_FIELDS(KJIT_SAME)
#undef KJIT_SAME
  EXPECT_TRUE(back == q);
  // And the encoding is a function of the request alone.
  EXPECT_EQ(wk::encode(back), wk::encode(q));
}

TEST(WorkerProtocol, DefaultRequestRoundTrips) {
  const wk::CompileRequest q;
  const wk::CompileRequest back = wk::decode_request(wk::encode(q));
  EXPECT_TRUE(back == q);
  EXPECT_EQ(back.options.target, "auto");
  EXPECT_TRUE(back.norm.builtin_std);
}

// ---- the protocol never trusts sizes ----------------------------------------------------------

TEST(WorkerProtocol, MalformedMessagesAreRejected) {
  wk::CompileRequest q;
  q.cwd = "/";
  q.source = "x";
  q.options.headers = {{"a.h", "int a;"}};
  q.norm.nvrtc = {"-arch=sm_90"};
  const std::string good = wk::encode(q);
  EXPECT_EQ(wk::decode_request(good).options.headers.size(), 1u);
  for (size_t cut = 0; cut < good.size(); cut += 3) {
    EXPECT_THROW(wk::decode_request(good.substr(0, cut)), wk::ProtocolError) << cut;
  }
  EXPECT_THROW(wk::decode_request(good + "x"), wk::ProtocolError);
  std::string huge = good;
  huge[0] = '\xff';  // cwd length far beyond the message
  huge[7] = '\x7f';
  EXPECT_THROW(wk::decode_request(huge), wk::ProtocolError);
  // A frame header announcing more than the cap is refused before anything is allocated.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  unsigned char h[16] = {3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};  // 4 GiB
  ASSERT_EQ(write(sv[0], h, sizeof h), ssize_t(sizeof h));
  wk::FrameType type;
  std::string payload;
  EXPECT_EQ(wk::read_frame(sv[1], &type, &payload, kjit::monotonic_ms() + 1000),
            wk::ReadResult::TooLarge);
  // A truncated frame is an error, not a hang.
  unsigned char h2[16] = {3, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(write(sv[0], h2, sizeof h2), ssize_t(sizeof h2));
  ASSERT_EQ(write(sv[0], "abc", 3), 3);
  close(sv[0]);
  EXPECT_EQ(wk::read_frame(sv[1], &type, &payload, kjit::monotonic_ms() + 1000),
            wk::ReadResult::Error);
  close(sv[1]);
}

}  // namespace

namespace {

// The PCH outcome of a reply (and of its entry) is one of four values: any other is a
// protocol error, never masked into range (a reply of 7 once read as 3, "failed").
TEST(WorkerProtocol, PchOutcomeOutOfRangeIsAProtocolError) {
  wk::CompileReply rep;
  rep.outcome.pch = kjit::PchOutcome::Used;
  auto e = std::make_shared<kjit::Entry>();
  e->target = "sm_90";
  e->pch = kjit::PchOutcome::Created;
  rep.outcome.entry = e;
  const std::string good = wk::encode(rep);
  const wk::CompileReply back = wk::decode_reply(good);
  EXPECT_EQ(back.outcome.pch, kjit::PchOutcome::Used);
  ASSERT_TRUE(back.outcome.entry);
  EXPECT_EQ(back.outcome.entry->pch, kjit::PchOutcome::Created);
  for (const uint32_t bad : {4u, 7u, 0xffffffffu}) {
    wk::CompileReply outcome = rep;
    outcome.outcome.pch = kjit::PchOutcome(bad);
    EXPECT_THROW(wk::decode_reply(wk::encode(outcome)), wk::ProtocolError) << bad;
    auto bad_entry = std::make_shared<kjit::Entry>(*e);
    bad_entry->pch = kjit::PchOutcome(bad);
    wk::CompileReply entry = rep;
    entry.outcome.entry = bad_entry;
    EXPECT_THROW(wk::decode_reply(wk::encode(entry)), wk::ProtocolError) << bad;
  }
}

}  // namespace

namespace {

// The exact bytes of a reply carrying an entry with every field set (and an audit): a
// change of them is a change of the worker's protocol (docs/formats.md).
TEST(WorkerProtocol, ReplyBytesArePinned) {
  wk::CompileReply rep;
  rep.outcome.status = KJIT_ERROR_COMPILE;
  rep.outcome.message = "it failed";
  rep.outcome.pch = kjit::PchOutcome::Created;
  rep.outcome.entry = std::make_shared<kjit::Entry>(kjit::test::entry_with_distinct_fields());
  rep.audit.available = true;
  rep.audit.doubt = "doubt";
  EXPECT_EQ(kjit::test::hex(wk::encode(rep)),
            "0500000009000000000000006974206661696c65640100000001000000060000"
            "0000000000736d5f39306112000000000000002f2f207074780a2e656e747279"
            "206b31202806000000000000007f454c46000107000000000000006c746f0069"
            "72ff4a00000000000000707478617320696e666f202020203a20506f74656e74"
            "69616c20506572666f726d616e6365204c6f73733a2077676d6d612073657269"
            "616c697a65640a7761726e696e673a202278220a02000000000000000f000000"
            "000000007363616c653c666c6f61742c20323e13000000000000005f5a357363"
            "616c6549664c693245457650545f010000000000000067000000000000000002"
            "0000000000000013000000000000005f5a357363616c6549664c693245457650"
            "545f02000000000000006b3203000000000000000c000000000000002d617263"
            "683d736d5f393061000000000000000009000000000000002d44583d22612062"
            "2219000000000000006e767274632031332e302e383820434c2d333634323437"
            "3134080000000000000066757365642e63750000000000c02840803bb16a0000"
            "000002000000010000000000000000000000000000000500000000000000646f"
            "756274");
}

}  // namespace
