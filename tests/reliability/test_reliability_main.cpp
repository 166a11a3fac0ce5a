// Reliability of the shared cache: compile-once under a multi-process stampede (also with
// the compiling process SIGKILLed, and for a compile error), bounded size with LRU,
// fork() after opening, corruption injection (checked against compiles without a cache)
// and faults (read-only, no permission, disk full, no GPU driver).
//
// Worker processes are this program re-executed with --worker ...; they start together
// on a pipe barrier and report one line on stdout. Nothing here needs a GPU.
//
// The program's main(): a worker when re-executed with --worker, else the tests.
#include <gtest/gtest.h>

#include "support/reliability.h"

using namespace kjit::test::reliability;

int main(int argc, char** argv) {
  g_self = argv[0];
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) g_self.assign(buf, size_t(n));
  if (argc >= 2 && std::strcmp(argv[1], "--worker") == 0) {
    const std::string mode = argc > 2 ? argv[2] : "";
    if (mode == "compile" && argc == 7) {
      return compile_worker(argv[3], argv[4], std::atoi(argv[5]), std::atoi(argv[6]));
    }
    if (mode == "open" && argc == 6) {
      return open_worker(argv[3], std::atoi(argv[4]), std::atoi(argv[5]));
    }
    if (mode == "fault" && argc == 5) return fault_worker(argv[3], argv[4]);
    std::fprintf(stderr, "unknown worker mode\n");
    return 64;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
