// Kernels on a real GPU: device queries, correctness against the CPU, parameter info and
// occupancy, sized and packed launches, name expressions, unknown names and argument checks.
#include "kernel_gpu/kernel_gpu.h"

namespace {

using namespace kjit::test::kernel_gpu;  // NOLINT(google-build-using-namespace)

TEST_F(KernelGpu, DeviceQueries) {
  int count = 0;
  ASSERT_EQ(kjit_device_count(&count), KJIT_OK);
  EXPECT_GE(count, 1);
  char arch[16];
  ASSERT_EQ(kjit_device_arch(0, arch, sizeof arch), KJIT_OK);
  EXPECT_EQ(std::string(arch), "sm_" + std::to_string(cc_));
  char name[256];
  ASSERT_EQ(kjit_device_name(0, name, sizeof name), KJIT_OK);
  EXPECT_GT(std::strlen(name), 0u);
  char tiny[2];
  EXPECT_EQ(kjit_device_name(0, tiny, sizeof tiny), KJIT_ERROR_BUFFER_TOO_SMALL);
  int version = 0;
  ASSERT_EQ(kjit_driver_version(&version), KJIT_OK);
  EXPECT_GE(version, 12000);
  EXPECT_EQ(kjit_device_arch(count, arch, sizeof arch), KJIT_ERROR_CUDA_UNAVAILABLE);
  EXPECT_NE(last_error().find("does not exist"), std::string::npos) << last_error();
}

TEST_F(KernelGpu, SaxpyMatchesCpuAtManySizes) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(kjit_kernel_load_path(k), KJIT_LOAD_CUBIN);
  EXPECT_STREQ(kjit_kernel_symbol(k), "saxpy");
  for (size_t n :
       {size_t(1), size_t(31), size_t(256), size_t(1000), size_t(65537), size_t((1 << 20) + 5)}) {
    run_saxpy(k, n, Mode::Args);
  }
}

TEST_F(KernelGpu, ParamInfoAttributesOccupancy) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  size_t count = 0;
  ASSERT_EQ(kjit_kernel_param_count(k, &count), KJIT_OK);
  ASSERT_EQ(count, 4u);
  const size_t want_off[] = {0, 8, 16, 24}, want_size[] = {4, 8, 8, 4};
  for (size_t i = 0; i < 4; ++i) {
    size_t off = 0, size = 0;
    ASSERT_EQ(kjit_kernel_param_info(k, i, &off, &size), KJIT_OK);
    EXPECT_EQ(off, want_off[i]) << i;
    EXPECT_EQ(size, want_size[i]) << i;
  }
  size_t off = 0, size = 0;
  EXPECT_EQ(kjit_kernel_param_info(k, 4, &off, &size), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("4 parameters"), std::string::npos) << last_error();
  size_t total = 0;
  ASSERT_EQ(kjit_kernel_param_buffer_size(k, &total), KJIT_OK);
  EXPECT_EQ(total, 28u);

  kjit_kernel_attributes attrs{};
  attrs.struct_size = sizeof attrs;
  ASSERT_EQ(kjit_kernel_get_attributes(k, &attrs), KJIT_OK) << last_error();
  EXPECT_EQ(attrs.struct_size, sizeof attrs);
  EXPECT_GT(attrs.num_regs, 0);
  EXPECT_GE(attrs.max_threads_per_block, 256);
  EXPECT_EQ(attrs.binary_version, cc_);
  EXPECT_GT(attrs.ptx_version, 0);
  EXPECT_EQ(attrs.static_shared_bytes, 0);

  // A size below the 0.1.0 struct is refused, and nothing is written.
  struct {
    kjit_kernel_attributes a;
    int newer;  // a field of a newer kjit
    int guard;
  } small{};
  small.a.struct_size = static_cast<uint32_t>(offsetof(kjit_kernel_attributes, const_bytes));
  small.a.num_regs = -7;
  EXPECT_EQ(kjit_kernel_get_attributes(k, &small.a), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(small.a.num_regs, -7);
  // A newer caller's larger struct gets every field this kjit knows, zero for the one it
  // does not, and nothing past its struct_size.
  small.a.struct_size = static_cast<uint32_t>(offsetof(decltype(small), guard));
  small.newer = -7;
  small.guard = -9;
  ASSERT_EQ(kjit_kernel_get_attributes(k, &small.a), KJIT_OK) << last_error();
  EXPECT_EQ(small.a.num_regs, attrs.num_regs);
  EXPECT_EQ(small.a.binary_version, attrs.binary_version);
  EXPECT_EQ(small.a.struct_size, offsetof(decltype(small), guard));
  EXPECT_EQ(small.newer, 0);
  EXPECT_EQ(small.guard, -9);

  int blocks = 0;
  ASSERT_EQ(kjit_kernel_occupancy(k, 256, 0, &blocks), KJIT_OK) << last_error();
  EXPECT_GE(blocks, 1);
  EXPECT_EQ(kjit_kernel_occupancy(k, 0, 0, &blocks), KJIT_ERROR_INVALID_ARGUMENT);
  int min_grid = 0, block = 0;
  ASSERT_EQ(kjit_kernel_suggest_block_size(k, 0, &min_grid, &block), KJIT_OK) << last_error();
  EXPECT_GE(block, 32);
  EXPECT_GE(min_grid, 1);
}

TEST_F(KernelGpu, SizedAndPackedLaunches) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  run_saxpy(k, 5000, Mode::Sized);
  run_saxpy(k, 5001, Mode::Packed);

  // A kernel without parameters takes an empty packed buffer.
  kjit_kernel* e = make(kEmptySource, "empty_kernel");
  ASSERT_NE(e, nullptr);
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(kjit_kernel_launch_packed(e, &cfg, nullptr, 0), KJIT_OK) << last_error();
  EXPECT_EQ(kjit_kernel_launch(e, &cfg, nullptr, 0), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSynchronize());
}

TEST_F(KernelGpu, TemplatedKernelsThroughNameExpressions) {
  kjit_kernel* kf = make(kjit::test::kTemplateSource, "scale<float, 3>");
  kjit_kernel* ki = make(kjit::test::kTemplateSource, "scale<int, 7>");
  ASSERT_NE(kf, nullptr);
  ASSERT_NE(ki, nullptr);
  EXPECT_EQ(std::string(kjit_kernel_symbol(kf)).rfind("_Z", 0), 0u) << kjit_kernel_symbol(kf);
  EXPECT_STRNE(kjit_kernel_symbol(kf), kjit_kernel_symbol(ki));

  const int n = 1000;
  std::vector<float> f = random_floats(n, 7);
  std::vector<int> iv(n);
  for (int i = 0; i < n; ++i) iv[static_cast<size_t>(i)] = i - 500;
  DevBuf df(n * sizeof(float)), di(n * sizeof(int));
  df.upload(f.data());
  di.upload(iv.data());
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 128;
  cfg.grid[0] = (n + 127) / 128;
  float ff = 1.5f;
  int fi = -2, count = n;
  void* fargs[] = {&df.ptr, &ff, &count};
  void* iargs[] = {&di.ptr, &fi, &count};
  ASSERT_EQ(kjit_kernel_launch(kf, &cfg, fargs, 3), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_kernel_launch(ki, &cfg, iargs, 3), KJIT_OK) << last_error();
  CU_ASSERT(D().cuCtxSynchronize());
  std::vector<float> gf(n), wf(n);
  std::vector<int> gi(n);
  df.download(gf.data());
  di.download(gi.data());
  for (size_t i = 0; i < size_t(n); ++i) wf[i] = f[i] * 1.5f + 3.0f;
  expect_close(gf, wf, "scale<float, 3>");
  for (int i = 0; i < n; ++i) ASSERT_EQ(gi[size_t(i)], (i - 500) * -2 + 7) << i;

  // From a compiled binary: the expression must have been given at compile time.
  kjit_options* opts = nullptr;
  ASSERT_EQ(kjit_options_create(&opts), KJIT_OK);
  ASSERT_EQ(kjit_options_add_name_expression(opts, "scale<double, 1>"), KJIT_OK);
  kjit_binary* bin = nullptr;
  ASSERT_EQ(kjit_compile(compiler_, kjit::test::kTemplateSource, opts, &bin), KJIT_OK)
      << last_error();
  kjit_kernel* kd = nullptr;
  ASSERT_EQ(kjit_kernel_from_binary(bin, "scale<double, 1>", 0, 0, &kd), KJIT_OK) << last_error();
  kernels_.push_back(kd);
  EXPECT_STREQ(kjit_kernel_symbol(kd), kjit_binary_lowered_name(bin, "scale<double, 1>"));
  kjit_kernel* missing = nullptr;
  EXPECT_EQ(kjit_kernel_from_binary(bin, "scale<float, 9>", 0, 0, &missing),
            KJIT_ERROR_NAME_NOT_FOUND);
  EXPECT_NE(last_error().find("name expression"), std::string::npos) << last_error();
  EXPECT_EQ(missing, nullptr);
  kjit_binary_destroy(bin);
  kjit_options_destroy(opts);
}

TEST_F(KernelGpu, UnknownKernelNameIsNameNotFound) {
  kjit_kernel* k = nullptr;
  const kjit_status st =
      kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpyy", nullptr, 0, 0, &k, nullptr);
  EXPECT_EQ(st, KJIT_ERROR_NAME_NOT_FOUND) << last_error();
  EXPECT_NE(last_error().find("saxpyy"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("saxpy)"), std::string::npos)
      << "lists the kernels: " << last_error();
  EXPECT_EQ(k, nullptr);

  // A compile error hands back the log.
  kjit_binary* log = nullptr;
  EXPECT_EQ(kjit_kernel_create(compiler_, "extern \"C\" __global__ void f() { nope(); }", "f",
                               nullptr, 0, 0, &k, &log),
            KJIT_ERROR_COMPILE);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(kjit_binary_log(log)).find("nope"), std::string::npos);
  kjit_binary_destroy(log);
}

TEST_F(KernelGpu, ArgumentMismatchIsCaughtBeforeTheDriver) {
  kjit_kernel* k = make(kjit::test::kSaxpySource, "saxpy");
  ASSERT_NE(k, nullptr);
  DevBuf dx(64 * sizeof(float)), dy(64 * sizeof(float));
  float a = 1;
  int n = 64;
  double wide = 1;
  void* args[] = {&a, &dx.ptr, &dy.ptr, &n};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 64;

  EXPECT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("takes 4 arguments, 3 given"), std::string::npos) << last_error();
  void* five[] = {&a, &dx.ptr, &dy.ptr, &n, &n};
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, five, 5), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("5 given"), std::string::npos) << last_error();

  const size_t bad_sizes[] = {sizeof a, sizeof dx.ptr, sizeof dy.ptr, sizeof wide};
  EXPECT_EQ(kjit_kernel_launch_sized(k, &cfg, args, bad_sizes, 4), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("argument 3"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("expected 4 bytes, given 8"), std::string::npos) << last_error();
  const size_t bad0[] = {sizeof wide, sizeof dx.ptr, sizeof dy.ptr, sizeof n};
  EXPECT_EQ(kjit_kernel_launch_sized(k, &cfg, args, bad0, 4), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("argument 0"), std::string::npos) << last_error();

  unsigned char packed[32] = {};
  EXPECT_EQ(kjit_kernel_launch_packed(k, &cfg, packed, 32), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_NE(last_error().find("expected 28 bytes"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("given 32"), std::string::npos) << last_error();

  void* with_null[] = {&a, nullptr, &dy.ptr, &n};
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, with_null, 4), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("argument 1"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_launch(k, &cfg, nullptr, 4), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_launch(k, nullptr, args, 4), KJIT_ERROR_INVALID_ARGUMENT);

  kjit_launch_config zero = cfg;
  zero.grid[1] = 0;
  EXPECT_EQ(kjit_kernel_launch(k, &zero, args, 4), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("grid 1x0x1"), std::string::npos) << last_error();
  kjit_launch_config tiny = cfg;
  tiny.struct_size = 4;
  EXPECT_EQ(kjit_kernel_launch(k, &tiny, args, 4), KJIT_ERROR_INVALID_ARGUMENT);

  // The driver's own rejection carries its error name.
  kjit_launch_config huge = cfg;
  huge.block[0] = 4096;
  EXPECT_EQ(kjit_kernel_launch(k, &huge, args, 4), KJIT_ERROR_CUDA);
  EXPECT_NE(last_error().find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << last_error();

  // Still launches correctly afterwards.
  run_saxpy(k, 64, Mode::Args);
}

}  // namespace
