// The exact bytes of every encoding of an entry (JSON metadata, binary metadata of payload
// files, export records), pinned for an entry with every field set: a change of any of them
// is a change of format (docs/formats.md) and must be made on purpose, with its version.
#include <gtest/gtest.h>

#include <string>

#include "store/entry.h"
#include "store/export.h"
#include "support/entry_sample.h"

namespace {

using kjit::test::entry_with_distinct_fields;
using kjit::test::hex;

const char kJson[] =
    "{\"format\":3,\"target\":\"sm_90a\",\"toolchain\":\"nvrtc 13.0.88 CL-36424714\","
    "\"program\":\"fused.cu\",\"options\":[\"-arch=sm_90a\",\"\","
    "\"-DX=\\\"a b\\\"\"],\"names\":[{\"expression\":\"scale<float, 2>\","
    "\"lowered\":\"_Z5scaleIfLi2EEvPT_\"},{\"expression\":\"g\",\"lowered\":\"\"}],"
    "\"kernels\":[\"_Z5scaleIfLi2EEvPT_\",\"k2\"],"
    "\"log\":\"ptxas info    : Potential Performance Loss: wgmma serialized\\nwarning: "
    "\\\"x\\\"\\n\","
    "\"advisories\":[\"Potential Performance Loss: wgmma serialized\"],"
    "\"compile_ms\":12.375,\"pch\":\"used\",\"created\":1790000000,"
    "\"manifest\":\"{\\\"records\\\":[]}\",\"sizes\":{\"ptx\":18,\"cubin\":6,"
    "\"ltoir\":7}}";

// Format 3, target, toolchain, program, options, names, kernels, log, compile_ms (f64 bits),
// pch (u64 2: used), created, manifest, the sizes of PTX, CUBIN and LTO-IR.
const char kBinary[] =
    "03000000000000000600000000000000736d5f39306119000000000000006e76"
    "7274632031332e302e383820434c2d3336343234373134080000000000000066"
    "757365642e637503000000000000000c000000000000002d617263683d736d5f"
    "393061000000000000000009000000000000002d44583d226120622202000000"
    "000000000f000000000000007363616c653c666c6f61742c20323e1300000000"
    "0000005f5a357363616c6549664c693245457650545f01000000000000006700"
    "00000000000000020000000000000013000000000000005f5a357363616c6549"
    "664c693245457650545f02000000000000006b324a0000000000000070747861"
    "7320696e666f202020203a20506f74656e7469616c20506572666f726d616e63"
    "65204c6f73733a2077676d6d612073657269616c697a65640a7761726e696e67"
    "3a202278220a0000000000c028400200000000000000803bb16a000000000e00"
    "0000000000007b227265636f726473223a5b5d7d120000000000000006000000"
    "000000000700000000000000";

TEST(EntryEncodings, JsonMetadataBytesArePinned) {
  EXPECT_EQ(entry_with_distinct_fields().metadata_json(), kJson);
}

TEST(EntryEncodings, BinaryMetadataBytesArePinned) {
  EXPECT_EQ(hex(entry_with_distinct_fields().metadata_binary()), kBinary);
}

TEST(EntryEncodings, ExportRecordBytesArePinned) {
  EXPECT_EQ(hex(kjit::encode_record(entry_with_distinct_fields())),
            "4000000000000000303132333435363738396162636465663031323334353637"
            "3839616263646566303132333435363738396162636465663031323334353637"
            "383961626364656629020000000000007b22666f726d6174223a332c22746172"
            "676574223a22736d5f393061222c22746f6f6c636861696e223a226e76727463"
            "2031332e302e383820434c2d3336343234373134222c2270726f6772616d223a"
            "2266757365642e6375222c226f7074696f6e73223a5b222d617263683d736d5f"
            "393061222c22222c222d44583d5c226120625c22225d2c226e616d6573223a5b"
            "7b2265787072657373696f6e223a227363616c653c666c6f61742c20323e222c"
            "226c6f7765726564223a225f5a357363616c6549664c693245457650545f227d"
            "2c7b2265787072657373696f6e223a2267222c226c6f7765726564223a22227d"
            "5d2c226b65726e656c73223a5b225f5a357363616c6549664c69324545765054"
            "5f222c226b32225d2c226c6f67223a22707478617320696e666f202020203a20"
            "506f74656e7469616c20506572666f726d616e6365204c6f73733a2077676d6d"
            "612073657269616c697a65645c6e7761726e696e673a205c22785c225c6e222c"
            "2261647669736f72696573223a5b22506f74656e7469616c20506572666f726d"
            "616e6365204c6f73733a2077676d6d612073657269616c697a6564225d2c2263"
            "6f6d70696c655f6d73223a31322e3337352c22706368223a2275736564222c22"
            "63726561746564223a313739303030303030302c226d616e6966657374223a22"
            "7b5c227265636f7264735c223a5b5d7d222c2273697a6573223a7b2270747822"
            "3a31382c22637562696e223a362c226c746f6972223a377d7d12000000000000"
            "002f2f207074780a2e656e747279206b31202806000000000000007f454c4600"
            "0107000000000000006c746f006972ff400000000000000050be92925dbfdabe"
            "f5e19a083eb58ac9161f744b993fa0a9e1c3e8266eef7cbedeb87af7331eecba"
            "2f774f1db84d4d8609b5e6969bdda215a7ad6b6a9ffdaed1");
}

// A creation time given to the encoder is written in place of the entry's own, nothing else.
TEST(EntryEncodings, CreatedGivenReplacesTheEntrysOwn) {
  std::string json = kJson;
  json.replace(json.find("1790000000"), 10, "42");
  EXPECT_EQ(entry_with_distinct_fields().metadata_json(42), json);
  std::string binary = kBinary;
  const std::string created_hex = "803bb16a00000000";  // 1790000000, little-endian
  ASSERT_EQ(binary.find(created_hex), binary.rfind(created_hex));
  binary.replace(binary.find(created_hex), created_hex.size(), "2a00000000000000");
  EXPECT_EQ(hex(entry_with_distinct_fields().metadata_binary(42)), binary);
}

}  // namespace
