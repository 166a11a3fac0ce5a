// What a record of NVRTC's inputs trusts (key/inputs.h): a stamp taken by another process is
// never enough on its own, since a write through a shared memory mapping can change a
// file's bytes and keep its size and times; a file is hashed on a process's first use.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "key/inputs.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::FileInput;
using kjit::test::TempDir;
using kjit::test::write_file;

std::string digest_of(const std::string& bytes) {
  return kjit::to_hex(kjit::sha256(bytes));
}

// A record of `path` as another process would have made it: the file's stamp now, with the
// digest of `bytes`.
FileInput recorded(const std::string& path, const std::string& bytes) {
  FileInput in;
  in.path = in.opened = path;
  in.exists = true;
  in.digest = digest_of(bytes);
  EXPECT_TRUE(kjit::stamp_path(path, &in.stamp));
  return in;
}

void let_settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
}

TEST(Inputs, RecordedStampAloneDoesNotVouchForBytes) {
  // A record whose stamp is the file's stamp now but whose digest is of other bytes (as
  // after an edit that kept the stamp): a process that has not hashed the file must see it.
  TempDir dir;
  const std::string h = dir.path() + "/h.h";
  write_file(h, "#define V 222\n");
  let_settle();
  kjit::forget_seen_files();
  EXPECT_FALSE(kjit::inputs_hold({recorded(h, "#define V 111\n")}));
  EXPECT_TRUE(kjit::inputs_hold({recorded(h, "#define V 222\n")}));
}

TEST(Inputs, HashedOncePerProcessThenTrustedByStamp) {
  TempDir dir;
  const std::string h = dir.path() + "/h.h";
  write_file(h, "#define V 111\n");
  let_settle();
  kjit::forget_seen_files();
  const FileInput in = recorded(h, "#define V 111\n");
  ASSERT_TRUE(kjit::inputs_hold({in}));
  // Another digest under the same stamp is not taken from the memo of what was hashed.
  EXPECT_FALSE(kjit::inputs_hold({recorded(h, "#define V 999\n")}));
  // An edit with a new stamp is hashed again.
  write_file(h, "#define V 333\n");
  EXPECT_FALSE(kjit::inputs_hold({in}));
}

TEST(Inputs, WriteThroughDirtyMappingIsSeenByANewProcess) {
  // The real case: the second write through a shared mapping whose page is already dirty
  // keeps size, modification and change time on ext4 (and tmpfs never stamps such writes).
  TempDir dir;
  const std::string h = dir.path() + "/h.h";
  write_file(h, "#define V 111\n");
  const int fd = ::open(h.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char* map = static_cast<char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(map, MAP_FAILED);
  map[0] = '#';  // the first write: the page becomes dirty and writable, the times move
  let_settle();
  kjit::forget_seen_files();
  const FileInput in = recorded(h, "#define V 111\n");
  ASSERT_TRUE(kjit::inputs_hold({in}));  // hashed once here
  map[11] = '2';                         // "#define V 122": no fault, no new stamp
  map[12] = '2';
  kjit::PathStamp now;
  ASSERT_TRUE(kjit::stamp_path(h, &now));
  const bool stamp_kept = now.mtime_ns == in.stamp.mtime_ns && now.ctime_ns == in.stamp.ctime_ns &&
                          now.size == in.stamp.size;
  munmap(map, 4096);
  ::close(fd);
  if (!stamp_kept) GTEST_SKIP() << "this file system stamped the write through the mapping";
  // Within this process the unchanged stamp is trusted (documented); a new process hashes.
  EXPECT_TRUE(kjit::inputs_hold({in}));
  kjit::forget_seen_files();
  EXPECT_FALSE(kjit::inputs_hold({in}));
  EXPECT_TRUE(kjit::inputs_hold({recorded(h, "#define V 122\n")}));
}

}  // namespace
