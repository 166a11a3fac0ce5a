// What compiled code says about itself (src/store/code_facts.h) and what is built on it: a
// kernel's parameters from its PTX (kjit_binary_param_count/_info), ptxas's performance
// advisories (kjit_binary_advisory*, the metadata, the log), and the launch of a kernel
// that takes one struct (kjit_kernel_launch_params), with shared memory above the default.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/kjit.h"
#include "store/code_facts.h"
#include "support/cuda_checks.h"
#include "support/test_support.h"

namespace {

using kjit::PtxParam;

std::vector<PtxParam> params_of(const std::string& ptx, const std::string& name, bool* ok) {
  std::vector<PtxParam> out;
  *ok = kjit::ptx_entry_params(ptx, name, &out);
  return out;
}

TEST(CodeFacts, PtxParamsAreReadWithTheirAlignment) {
  const std::string ptx =
      ".version 8.8\n.target sm_90a\n"
      ".visible .entry kern2(\n\t.param .u32 kern2_param_0\n)\n{\n\tret;\n}\n"
      ".visible .entry kern(\n"
      "\t.param .align 64 .b8 kern_param_0[1280],\n"
      "\t.param .u64 .ptr .global .align 4 kern_param_1,\n"
      "\t.param .f32 kern_param_2,\n"
      "\t.param .align 4 .b8 kern_param_3[12]\n)\n{\n\tret;\n}\n"
      ".visible .entry none()\n{\n\tret;\n}\n";
  bool ok = false;
  const std::vector<PtxParam> p = params_of(ptx, "kern", &ok);
  ASSERT_TRUE(ok);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].size, 1280u);
  EXPECT_EQ(p[0].align, 64u);
  EXPECT_EQ(p[1].size, 8u);
  EXPECT_EQ(p[1].align, 8u) << "the .align after .ptr is the pointee's";
  EXPECT_EQ(p[2].size, 4u);
  EXPECT_EQ(p[2].align, 4u);
  EXPECT_EQ(p[3].size, 12u);
  EXPECT_EQ(p[3].align, 4u);
  const std::vector<PtxParam> two = params_of(ptx, "kern2", &ok);
  ASSERT_TRUE(ok);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].size, 4u);
  EXPECT_TRUE(params_of(ptx, "none", &ok).empty());
  EXPECT_TRUE(ok);
  params_of(ptx, "ker", &ok);
  EXPECT_FALSE(ok) << "a prefix of a kernel's name is no kernel";
  params_of(".visible .entry odd(\n\t.param .texref odd_param_0\n)\n", "odd", &ok);
  EXPECT_FALSE(ok) << "a declaration it does not understand is no answer";
}

TEST(CodeFacts, AdvisoriesComeFromPtxasLinesOnce) {
  const std::string log =
      "kernel.cu(3): warning: something else\n"
      "ptxas info    : (C7509) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to the presence of Extern calls in the function 'k'\n"
      "ptxas info    : (C7509) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to the presence of Extern calls in the function 'k'\n"
      "ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to wgmma pipeline crossing function boundary\n"
      "a Potential Performance Loss said by someone other than ptxas\n";
  const std::vector<std::string> a = kjit::ptxas_advisories(log);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].rfind("(C7509) Potential Performance Loss: wgmma", 0), 0u) << a[0];
  EXPECT_EQ(a[1].rfind("(C7510)", 0), 0u) << a[1];
  EXPECT_NE(kjit::advisory_summary(a).find("2 performance advisories"), std::string::npos);
  EXPECT_EQ(kjit::advisory_summary({}), "");
  EXPECT_TRUE(kjit::ptxas_advisories("ptxas info    : Used 8 registers\n").empty());
}

struct Compiled {
  kjit_compiler* c = nullptr;
  kjit_options* o = nullptr;
  kjit_binary* b = nullptr;
  Compiled(const char* target, const std::string& source) {
    EXPECT_EQ(kjit_compiler_create(nullptr, 1, &c), KJIT_OK);
    EXPECT_EQ(kjit_options_create(&o), KJIT_OK);
    EXPECT_EQ(kjit_options_set_target(o, target), KJIT_OK);
    status = kjit_compile(c, source.c_str(), o, &b);
  }
  ~Compiled() {
    kjit_binary_destroy(b);
    kjit_options_destroy(o);
    kjit_compiler_destroy(c);
  }
  kjit_status status = KJIT_OK;
};

// A struct parameter as the host lays it out, and in the kernel.
struct alignas(16) HostParams {
  float scale[5];
  int count;
  double* out;
};

const char* const kStructSource = R"(
struct alignas(16) Params { float scale[5]; int count; double* out; };
extern "C" __global__ void with_struct(__grid_constant__ const Params p, int extra) {
  p.out[threadIdx.x] = p.scale[0] * p.count + extra;
}
)";

TEST(CodeFacts, BinaryGivesTheKernelsParametersWithoutAGpu) {
  Compiled k("sm_90", kStructSource);
  ASSERT_EQ(k.status, KJIT_OK) << kjit_last_error();
  size_t count = 0, size = 0, align = 0;
  ASSERT_EQ(kjit_binary_param_count(k.b, "with_struct", &count), KJIT_OK) << kjit_last_error();
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(kjit_binary_param_info(k.b, "with_struct", 0, &size, &align), KJIT_OK);
  EXPECT_EQ(size, sizeof(HostParams));
  EXPECT_EQ(align, alignof(HostParams));
  ASSERT_EQ(kjit_binary_param_info(k.b, "with_struct", 1, &size, &align), KJIT_OK);
  EXPECT_EQ(size, 4u);
  EXPECT_EQ(kjit_binary_param_info(k.b, "with_struct", 2, &size, &align),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_binary_param_count(k.b, "nope", &count), KJIT_ERROR_NAME_NOT_FOUND);
  EXPECT_NE(std::string(kjit_last_error()).find("with_struct"), std::string::npos);
  EXPECT_EQ(kjit_binary_param_count(k.b, nullptr, &count), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_binary_param_count(nullptr, "with_struct", &count), KJIT_ERROR_INVALID_HANDLE);
}

// wgmma with a call inside its pipeline (a device assert's handler, here called directly):
// ptxas serialises it and says so. The advisory is on the binary, in its metadata, and the
// same from a hit; the kernel without the call has none.
const char* const kWgmmaSource = R"(
extern "C" __global__ void k(float* out, unsigned long long da, unsigned long long db, int flag) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0, d4 = 0, d5 = 0, d6 = 0, d7 = 0;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
               "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3), "+f"(d4), "+f"(d5), "+f"(d6), "+f"(d7)
               : "l"(da), "l"(db), "r"(flag));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#ifndef NO_CALL
  if (flag == 7) __assertfail("flag", __FILE__, __LINE__, __func__, sizeof(char));
#endif
  float* o = out + threadIdx.x * 8;
  o[0] = d0; o[1] = d1; o[2] = d2; o[3] = d3; o[4] = d4; o[5] = d5; o[6] = d6; o[7] = d7;
}
)";

TEST(CodeFacts, PtxasAdvisoryIsOnTheBinaryAndInItsMetadata) {
  Compiled k("sm_90a", kWgmmaSource);
  ASSERT_EQ(k.status, KJIT_OK) << kjit_last_error();
  ASSERT_EQ(kjit_binary_advisory_count(k.b), 1u) << kjit_binary_log(k.b);
  const std::string a = kjit_binary_advisory(k.b, 0);
  EXPECT_EQ(a.rfind("(C75", 0), 0u) << a;
  EXPECT_NE(a.find("wgmma.mma_async instructions are serialized"), std::string::npos) << a;
  EXPECT_EQ(kjit_binary_advisory(k.b, 1), nullptr);
  EXPECT_NE(std::string(kjit_binary_metadata_json(k.b)).find("\"advisories\":[\"(C75"),
            std::string::npos);
  Compiled quiet("sm_90a", std::string("#define NO_CALL\n") + kWgmmaSource);
  ASSERT_EQ(quiet.status, KJIT_OK) << kjit_last_error();
  EXPECT_EQ(kjit_binary_advisory_count(quiet.b), 0u) << kjit_binary_log(quiet.b);
  EXPECT_NE(std::string(kjit_binary_metadata_json(quiet.b)).find("\"advisories\":[]"),
            std::string::npos);
  EXPECT_EQ(kjit_binary_advisory_count(nullptr), 0u);
}

// Argument checks that need no driver.
TEST(CodeFacts, LaunchParamsChecksItsArgumentsFirst) {
  HostParams p{};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(kjit_kernel_launch_params(nullptr, nullptr, &p, sizeof p, alignof(HostParams)),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_launch_params(nullptr, &cfg, &p, sizeof p, alignof(HostParams)),
            KJIT_ERROR_INVALID_HANDLE);
}

// ---------------------------------------------------------------------------------------
// On a GPU

class LaunchParamsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(kjit_compiler_create(nullptr, 1, &compiler_), KJIT_OK) << kjit_last_error();
    CU_ASSERT(kjit::cuda::driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)));
  }
  void TearDown() override {
    kjit_kernel_destroy(kernel_);
    kjit_compiler_destroy(compiler_);
  }
  kjit_kernel* create(const char* source, const char* name) {
    kjit_binary* log = nullptr;
    EXPECT_EQ(kjit_kernel_create(compiler_, source, name, nullptr, 0, 0, &kernel_, &log), KJIT_OK)
        << kjit_last_error() << (log ? kjit_binary_log(log) : "");
    kjit_binary_destroy(log);
    return kernel_;
  }
  kjit_compiler* compiler_ = nullptr;
  kjit_kernel* kernel_ = nullptr;
};

const char* const kOneStruct = R"(
struct alignas(16) Params { float scale[5]; int count; double* out; };
extern "C" __global__ void one(__grid_constant__ const Params p) {
  extern __shared__ double buffer[];
  buffer[threadIdx.x] = p.scale[1] * p.count;
  __syncthreads();
  p.out[threadIdx.x] = buffer[threadIdx.x];
}
)";

TEST_F(LaunchParamsGpu, StructOfTheKernelsLayoutLaunchesAndAnotherIsRefused) {
  kjit_kernel* k = create(kOneStruct, "one");
  ASSERT_NE(k, nullptr);
  auto& drv = kjit::cuda::driver();
  CUdeviceptr out = 0;
  CU_ASSERT(drv.cuMemAlloc(&out, 32 * sizeof(double)));
  HostParams p{};
  p.scale[1] = 1.5f;
  p.count = 4;
  p.out = reinterpret_cast<double*>(out);
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.block[0] = 32;
  cfg.shared_bytes = 100 * 1024;  // above the default 48 KiB: raised by the launch itself
  EXPECT_EQ(kjit_kernel_launch_params(k, &cfg, &p, sizeof p, alignof(HostParams)), KJIT_OK)
      << kjit_last_error();
  CU_ASSERT(drv.cuCtxSynchronize());
  double host[32] = {};
  CU_ASSERT(drv.cuMemcpyDtoH(host, out, sizeof host));
  EXPECT_EQ(host[31], 6.0);
  // A struct of another size or alignment: refused before the driver sees it.
  struct Bigger {
    HostParams p;
    char more[16];
  } bigger{};
  EXPECT_EQ(kjit_kernel_launch_params(k, &cfg, &bigger, sizeof bigger, alignof(Bigger)),
            KJIT_ERROR_ARGUMENT_MISMATCH);
  const std::string sizes = "is " + std::to_string(sizeof p) + " bytes, the struct given is " +
                            std::to_string(sizeof bigger);
  EXPECT_NE(std::string(kjit_last_error()).find(sizes), std::string::npos) << kjit_last_error();
  EXPECT_EQ(kjit_kernel_launch_params(k, &cfg, &p, sizeof p, 8), KJIT_ERROR_ARGUMENT_MISMATCH);
  EXPECT_EQ(kjit_kernel_launch_params(k, &cfg, &p, sizeof p, 3), KJIT_ERROR_INVALID_ARGUMENT);
  // More shared memory than the device has: a message with its limit.
  cfg.shared_bytes = 4u << 20;
  EXPECT_EQ(kjit_kernel_launch_params(k, &cfg, &p, sizeof p, 0), KJIT_ERROR_CUDA);
  EXPECT_NE(std::string(kjit_last_error()).find("bytes of shared memory per block"),
            std::string::npos)
      << kjit_last_error();
  CU_ASSERT(drv.cuMemFree(out));
}

}  // namespace
