// kjit::read_file reads a regular file in one read when its size holds (payload, fact and
// record files are read so in every fresh process): whole files of every size around the
// buffer's, and files whose size says nothing (a FIFO, /proc) read to their end.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "support/test_support.h"
#include "util/fs.h"

namespace {

using kjit::test::TempDir;
using kjit::test::write_file;

TEST(ReadFile, WholeFilesOfEverySizeAndFilesWithoutASize) {
  TempDir d;
  std::mt19937 rng(7);
  for (size_t size : {size_t(0), size_t(1), size_t(4095), size_t(65535), size_t(65536),
                      size_t(65537), size_t(200001)}) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = char(rng());
    const std::string path = d.file("f" + std::to_string(size));
    write_file(path, bytes);
    const std::optional<std::string> got = kjit::read_file(path);
    ASSERT_TRUE(got.has_value()) << size;
    EXPECT_EQ(*got, bytes) << size;
  }
  EXPECT_FALSE(kjit::read_file(d.file("missing")).has_value());
  EXPECT_FALSE(kjit::read_file(d.path()).has_value()) << "a directory is no file";

  const std::optional<std::string> status = kjit::read_file("/proc/self/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->find("\nVmRSS:"), std::string::npos) << "stopped before its end";
  const std::optional<std::string> maps = kjit::read_file("/proc/self/maps");
  ASSERT_TRUE(maps.has_value());
  EXPECT_GT(maps->size(), 4096u) << "read past its first page";
  EXPECT_EQ(maps->back(), '\n');

  const std::string fifo = d.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string sent(150000, 'p');
  std::thread writer([&] {
    FILE* f = std::fopen(fifo.c_str(), "wb");
    for (size_t at = 0; f && at < sent.size(); at += 1000)
      std::fwrite(sent.data() + at, 1, 1000, f);
    if (f) std::fclose(f);
  });
  const std::optional<std::string> piped = kjit::read_file(fifo);
  writer.join();
  ASSERT_TRUE(piped.has_value());
  EXPECT_EQ(piped->size(), sent.size());
}

}  // namespace
