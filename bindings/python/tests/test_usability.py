"""What a newcomer meets first: the install route without pip or wheel, `import kjit`
saying when the compiled launch path is missing, errors said once and in Python's terms,
the compile-only one-liner, what the cache did not keep, and a clean dir(kjit)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from _support import ARCH, PKG_ROOT, SAXPY, kjit, subprocess_env, unique_source


def copy_without_fast_path(dest):
    """The package source without any built kjit._fastlaunch."""
    shutil.copytree(os.path.join(PKG_ROOT, "kjit"), os.path.join(dest, "kjit"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))


class ImportWarningTest(unittest.TestCase):
    def import_from(self, root, **env):
        e = subprocess_env()
        e.pop("KJIT_PYTHON_FAST", None)
        e.update(env)
        e["PYTHONPATH"] = root
        return subprocess.run([sys.executable, "-c", "import kjit; print(kjit.launch_path())"],
                              env=e, capture_output=True, text=True, timeout=120)

    def test_missing_fast_path_is_said_once_at_import(self):
        with tempfile.TemporaryDirectory() as d:
            copy_without_fast_path(d)
            r = self.import_from(d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), ["ctypes"])
            self.assertEqual(r.stderr.count("FastPathWarning"), 1, r.stderr)
            self.assertIn("kjit._fastlaunch is not built", r.stderr)
            self.assertIn("KJIT_PYTHON_FAST=0", r.stderr)
            # Chosen on purpose: silent.
            r = self.import_from(d, KJIT_PYTHON_FAST="0")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("FastPathWarning", r.stderr)

    def test_warning_is_a_catchable_category(self):
        self.assertTrue(issubclass(kjit.FastPathWarning, RuntimeWarning))


class InstallScriptTest(unittest.TestCase):
    def test_install_py_works_without_pip_or_wheel(self):
        with tempfile.TemporaryDirectory() as d:
            # -S: no site-packages at all, so neither pip nor wheel can be what makes it work.
            r = subprocess.run([sys.executable, "-S", os.path.join(PKG_ROOT, "install.py"),
                                "--target", d], capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("installed kjit %s into %s" % (kjit.__version__, d), r.stdout)
            self.assertRegex(r.stdout, r"fast launch path \(kjit._fastlaunch\): (built|not built: .+)")
            dist = os.path.join(d, "kjit-%s.dist-info" % kjit.__version__)
            with open(os.path.join(dist, "RECORD")) as f:
                record = f.read()
            self.assertIn("kjit/__init__.py,sha256=", record)
            with open(os.path.join(dist, "METADATA")) as f:
                self.assertIn("Version: %s" % kjit.__version__, f.read())
            e = subprocess_env(KJIT_PYTHON_FAST="0")
            e["PYTHONPATH"] = d
            r = subprocess.run([sys.executable, "-c", "import kjit; print(kjit.__file__)"],
                               env=e, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.strip().startswith(d), r.stdout)


class ErrorTextTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kjit-py-usability-")
        self.cache = kjit.Cache(self.dir)
        self.compiler = kjit.Compiler(self.cache)

    def tearDown(self):
        self.compiler.close()
        self.cache.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_compile_error_says_each_error_once(self):
        with self.assertRaises(kjit.CompileError) as cm:
            self.compiler.compile('extern "C" __global__ void k(float* x) { x[0] = y; }',
                                  arch=ARCH)
        text = str(cm.exception)
        self.assertEqual(text.count('identifier "y" is undefined'), 1, text)
        self.assertTrue(text.startswith("KJIT_ERROR_COMPILE: compilation of"), text)
        self.assertIn('identifier "y" is undefined', cm.exception.log)

    def test_name_not_found_advice_in_python_terms(self):
        with self.assertRaises(kjit.NameNotFound) as cm:
            self.compiler.compile("template <class T> __global__ void k(T* x) { x[0] = 1; }",
                                  arch=ARCH, name_expressions=["kk<float>"])
        text = str(cm.exception)
        self.assertNotIn("kjit_options_clone", text)
        self.assertNotIn("kjit_options_clone", cm.exception.log)
        self.assertIn("Options.clone()", text)
        self.assertEqual(text.count("names nothing in"), 1, text)


class OneLinerTest(unittest.TestCase):
    def test_compile_one_liner_and_not_stored(self):
        with tempfile.TemporaryDirectory() as d:
            old = os.environ.get("KJIT_CACHE_DIR")
            os.environ["KJIT_CACHE_DIR"] = d
            try:
                b = kjit.compile(unique_source("oneliner") + SAXPY, arch=ARCH)
                self.assertTrue(b.cubin)
                self.assertEqual(len(b.key), 64)
                self.assertIsNone(b.not_stored)
            finally:
                if old is None:
                    del os.environ["KJIT_CACHE_DIR"]
                else:
                    os.environ["KJIT_CACHE_DIR"] = old
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(
                [sys.executable, "-c",
                 "import kjit; b = kjit.compile(%r, arch=%r); print(b.not_stored)"
                 % (unique_source("disabled") + SAXPY, ARCH)],
                env=subprocess_env(KJIT_CACHE_DISABLE="1", KJIT_CACHE_DIR=d,
                                   KJIT_PYTHON_FAST="0"),
                capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("KJIT_CACHE_DISABLE", r.stdout)

    def test_dir_shows_the_api_only(self):
        names = dir(kjit)
        self.assertNotIn("annotations", names)
        self.assertNotIn("TYPE_CHECKING", names)
        for name in ("compile", "kernel", "Compiler", "FastPathWarning", "Gemm"):
            self.assertIn(name, names)
            self.assertIn(name, kjit.__all__)


if __name__ == "__main__":
    unittest.main()
