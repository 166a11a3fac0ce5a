// normalise() depends on the machine only through the facts it is given (MachineFacts):
// NVRTC's architectures and version, the toolkits, the device's architecture. These tests
// give it invented facts and check that the result follows them, with no driver, no NVRTC
// query and no toolkit discovery of its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "key/toolchain.h"
#include "key/toolkit.h"
#include "nvrtc/options.h"
#include "util/error.h"

namespace {

struct Invented {
  kjit::ToolchainFacts nvrtc;
  kjit::Toolkit automatic, named;
  int device_asked = -1;

  Invented() {
    nvrtc.id = "nvrtc 99.1.0 invented";
    nvrtc.version = "99.1";
    nvrtc.archs = {75, 80};
    automatic.root = "/invented/cuda";
    automatic.found_by = "libnvrtc";
    automatic.include_dirs = {"/invented/cuda/include"};
    automatic.fingerprint = std::string(64, 'a');
    named.root = "/elsewhere/cuda";
    named.found_by = "option";
    named.include_dirs = {"/elsewhere/cuda/include"};
    named.fingerprint = std::string(64, 'b');
  }

  kjit::MachineFacts facts(bool reads_files) {
    kjit::MachineFacts m;
    m.nvrtc = &nvrtc;
    m.nvrtc_toolkit_root = automatic.root;
    m.automatic = reads_files ? &automatic : nullptr;
    m.named = &named;
    m.device_arch = [this](int device) {
      device_asked = device;
      return std::string("sm_80");
    };
    return m;
  }
};

kjit::CompileOptions options(const std::string& target) {
  kjit::CompileOptions o;
  o.target = target;
  return o;
}

TEST(Normalise, AutoTargetIsTheGivenDevicesArchitecture) {
  Invented m;
  kjit::CompileOptions o = options("auto");
  o.device = 3;
  const kjit::NormalisedOptions n = kjit::normalise(o, m.facts(false));
  EXPECT_EQ(n.target, "sm_80");
  EXPECT_EQ(m.device_asked, 3);
}

TEST(Normalise, AnExplicitTargetNeverAsksForTheDevice) {
  Invented m;
  kjit::CompileOptions o = options("auto");
  o.raw = {"-arch=sm_75"};
  EXPECT_EQ(kjit::normalise(o, m.facts(false)).target, "sm_75");
  EXPECT_EQ(m.device_asked, -1);
}

TEST(Normalise, SupportedTargetsAreTheGivenNvrtcs) {
  Invented m;
  try {
    kjit::normalise(options("sm_90"), m.facts(false));
    FAIL() << "sm_90 is not among the invented NVRTC's architectures";
  } catch (const kjit::Error& e) {
    EXPECT_EQ(e.status(), KJIT_ERROR_UNSUPPORTED_TARGET);
    EXPECT_NE(e.message().find("NVRTC 99.1"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("supported: sm_75, sm_80"), std::string::npos) << e.message();
  }
}

TEST(Normalise, ToolkitsComeFromTheFacts) {
  Invented m;
  const kjit::NormalisedOptions reads = kjit::normalise(options("sm_80"), m.facts(true));
  EXPECT_EQ(reads.toolkit_fingerprint, m.automatic.fingerprint);
  ASSERT_FALSE(reads.key.empty());
  EXPECT_EQ(reads.key.back(), "-I/invented/cuda/include");
  ASSERT_EQ(reads.skip_roots.size(), 1u);
  EXPECT_EQ(reads.skip_roots[0], "/invented/cuda");

  const kjit::NormalisedOptions none = kjit::normalise(options("sm_80"), m.facts(false));
  EXPECT_EQ(none.toolkit_fingerprint, "none: no file can be read");
  EXPECT_TRUE(none.skip_roots.empty());
  for (const std::string& k : none.key) EXPECT_NE(k.rfind("-I", 0), 0u) << k;

  kjit::CompileOptions o = options("sm_80");
  o.toolkit_root = "/elsewhere/cuda";
  const kjit::NormalisedOptions named = kjit::normalise(o, m.facts(true));
  EXPECT_EQ(named.toolkit_fingerprint, m.automatic.fingerprint + m.named.fingerprint);
  EXPECT_EQ(named.key.back(), "-I/elsewhere/cuda/include");
}

TEST(Normalise, OptionsThatReadFilesNeedTheFactsOfAProgramThatReadsFiles) {
  Invented m;
  kjit::CompileOptions o = options("sm_80");
  o.raw = {"-include=pre.h"};
  try {
    kjit::normalise(o, m.facts(false));
    FAIL() << "a pre-include read with the facts of a program that reads no file";
  } catch (const kjit::Error& e) {
    EXPECT_EQ(e.status(), KJIT_ERROR_INTERNAL);
  }
  EXPECT_EQ(kjit::normalise(o, m.facts(true)).pre_includes.size(), 1u);
}

// The PCH switch reaches normalise() through its input (MachineFacts::switches), never
// through the environment: KJIT_PCH set either way changes nothing of the result, the
// switch given does.
TEST(Normalise, PchSwitchIsAnInputNotTheEnvironment) {
  Invented m;
  kjit::CompileOptions o = options("sm_80");
  o.pch = true;
  for (const char* env : {"0", "1"}) {
    ::setenv("KJIT_PCH", env, 1);
    kjit::MachineFacts on = m.facts(true);
    on.switches.pch = true;
    kjit::MachineFacts off = m.facts(true);
    off.switches.pch = false;
    EXPECT_TRUE(kjit::normalise(o, on).pch) << "KJIT_PCH=" << env;
    EXPECT_FALSE(kjit::normalise(o, off).pch) << "KJIT_PCH=" << env;
  }
  ::unsetenv("KJIT_PCH");
}

}  // namespace
