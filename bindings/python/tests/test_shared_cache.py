"""The cache is shared across languages: a kernel compiled from C is a disk hit from
Python with the same key and the same PTX, and the other way round.

The C side is tests/crosslang/crosslang.c (the C leg of bindings/test_bindings.sh's
cross-language scenario; $KJIT_CROSSLANG_C, or built here with the C compiler) and the
kjit command line tool ($KJIT_CLI, or build*/src/cli/kjit of the checkout).
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from _support import REPO, find_cli, header_dir, kjit, tempdir

CROSSLANG_DIR = os.path.join(REPO, "tests", "crosslang")
SOURCE = os.path.join(CROSSLANG_DIR, "saxpy.cu")


def crosslang_options():
    """The options every leg of the cross-language test uses (see crosslang.c)."""
    return kjit.Options(arch="sm_80", std=17, defines={"BLOCK": 256},
                        outputs=kjit.Output.PTX | kjit.Output.CUBIN)


def lib_env():
    d = os.path.dirname(kjit.library_path() or "")
    env = dict(os.environ)
    if d:
        env["LD_LIBRARY_PATH"] = d + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return env


@unittest.skipUnless(os.path.isfile(SOURCE), "tests/crosslang is not next to the package")
class CrossLanguageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        kjit.version()  # load the library now: its directory is the C side's too
        cls.c_leg = os.environ.get("KJIT_CROSSLANG_C")
        if not cls.c_leg:
            cc = shutil.which(os.environ.get("CC", "cc"))
            inc = header_dir()
            if cc and inc and kjit.library_path():
                d = cls.build_dir = tempfile.mkdtemp(prefix="kjit-py-c-")
                exe = os.path.join(d, "crosslang")
                r = subprocess.run([cc, "-std=c99", "-I", inc, "-o", exe,
                                    os.path.join(CROSSLANG_DIR, "crosslang.c"),
                                    kjit.library_path()], capture_output=True, text=True)
                if r.returncode == 0:
                    cls.c_leg = exe

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "build_dir", None):
            shutil.rmtree(cls.build_dir, True)

    def python_leg(self, cache_dir):
        with open(SOURCE) as f:
            src = f.read()
        with kjit.Cache(cache_dir) as cache, kjit.Compiler(cache) as c, \
                crosslang_options() as o, c.compile(src, o) as b:
            return b.tier, b.key, b.ptx.encode()

    def c(self, cache_dir, want):
        if not self.c_leg:
            self.skipTest("no C leg: set KJIT_CROSSLANG_C or install a C compiler")
        out = os.path.join(tempdir(self), "c.ptx")
        r = subprocess.run([self.c_leg, cache_dir, SOURCE, out, want], env=lib_env(),
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, "C leg (expected tier %s): %s%s"
                         % (want, r.stdout, r.stderr))
        key = r.stdout.split("key ")[1].split()[0]
        with open(out, "rb") as f:
            return key, f.read()

    def test_c_first_then_python(self):
        d = tempdir(self)
        c_key, c_ptx = self.c(d, "compiled")
        tier, key, ptx = self.python_leg(d)
        self.assertEqual(tier, kjit.Tier.DISK)
        self.assertEqual(key, c_key)
        self.assertEqual(ptx, c_ptx)

    def test_python_first_then_c(self):
        d = tempdir(self)
        tier, key, ptx = self.python_leg(d)
        self.assertEqual(tier, kjit.Tier.COMPILED)
        c_key, c_ptx = self.c(d, "disk")
        self.assertEqual(c_key, key)
        self.assertEqual(c_ptx, ptx)


@unittest.skipUnless(os.path.isfile(SOURCE), "tests/crosslang is not next to the package")
class CommandLineTest(unittest.TestCase):
    """The kjit CLI and Python on one cache directory."""

    def setUp(self):
        self.cli = find_cli()
        if not self.cli:
            self.skipTest("kjit CLI not found (set KJIT_CLI)")
        self.work = tempdir(self)
        shutil.copy(SOURCE, self.work)

    def cli_compile(self, cache_dir):
        out = os.path.join(self.work, "out.ptx")
        r = subprocess.run([self.cli, "compile", "saxpy.cu", "--arch", "sm_80", "--ptx",
                            "-o", out, "-D", "BLOCK=256", "--json", "--cache-dir", cache_dir,
                            "--", "-std=c++17"],
                           cwd=self.work, env=lib_env(), capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        j = json.loads(r.stdout)
        with open(out, "rb") as f:
            return j["tier"], j["key"], f.read()

    def python_compile(self, cache_dir):
        with open(os.path.join(self.work, "saxpy.cu")) as f:
            src = f.read()
        # The CLI names the program after the file as given and adds -D before the
        # options after "--".
        with kjit.Cache(cache_dir) as cache, kjit.Compiler(cache) as c, \
                c.compile(src, arch="sm_80", name="saxpy.cu", defines={"BLOCK": 256},
                          options=["-std=c++17"]) as b:
            return b.tier, b.key, b.ptx.encode()

    def test_cli_first_then_python(self):
        d = tempdir(self)
        tier, key, ptx = self.cli_compile(d)
        self.assertEqual(tier, "compiled")
        ptier, pkey, pptx = self.python_compile(d)
        self.assertEqual((ptier, pkey, pptx), (kjit.Tier.DISK, key, ptx))

    def test_python_first_then_cli(self):
        d = tempdir(self)
        ptier, pkey, pptx = self.python_compile(d)
        self.assertEqual(ptier, kjit.Tier.COMPILED)
        self.assertEqual(self.cli_compile(d), ("disk", pkey, pptx))


if __name__ == "__main__":
    unittest.main()
