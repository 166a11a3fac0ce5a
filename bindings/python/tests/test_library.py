"""Finding libkjit, the prototypes against the headers, the struct layouts against the C
compiler's, status names and the exception hierarchy."""
import ctypes
import os
import shutil
import subprocess
import textwrap
import unittest

from _support import PKG_ROOT, header_dir, kjit, public_functions, run_python, \
    subprocess_env, tempdir
from kjit import _lib

# Functions of the headers the package does not call, and why.
NOT_WRAPPED = {
    "kjit_set_log_callback",     # a callback into Python from kjit's worker threads
    "kjit_kernel_launch",        # launches use the packed form
    "kjit_kernel_launch_sized",  # likewise
}


def _loaded_lib():
    kjit.version()
    return kjit.library_path()


class LoadingTest(unittest.TestCase):
    def test_version_and_path(self):
        path = _loaded_lib()
        self.assertTrue(os.path.exists(path), path)
        self.assertIn("libkjit.so", os.path.basename(path))
        self.assertEqual(kjit.version() // 10000, 0)
        self.assertEqual(kjit.version_string().count("."), 2)
        self.assertEqual(kjit.load_library(), path)  # idempotent
        with self.assertRaises(kjit.KjitError):
            kjit.load_library("/elsewhere/libkjit.so.0")
        self.assertTrue(kjit.nvrtc_version())

    def test_import_does_not_load_the_library(self):
        r = run_python(textwrap.dedent("""
            import kjit
            maps = open("/proc/self/maps").read()
            print(kjit.library_path(), "libkjit" in maps)
            kjit.version()
            print(kjit.library_path() is not None, "libkjit" in open("/proc/self/maps").read())
            """))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["None", "False", "True", "True"])

    def test_explicit_path_and_kjit_library_are_authoritative(self):
        env = subprocess_env(KJIT_LIBRARY="/nonexistent/libkjit.so.0")
        r = run_python("import kjit; kjit.version()", env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("LibraryNotFound", r.stderr)
        self.assertIn("KJIT_LIBRARY=/nonexistent/libkjit.so.0", r.stderr)
        lib = _loaded_lib()
        env = subprocess_env(KJIT_LIBRARY="/nonexistent/libkjit.so.0")
        r = run_python("import kjit; print(kjit.load_library(%r)); print(kjit.version())"
                       % lib, env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[0], lib)
        r = run_python("import kjit; kjit.load_library('/no/such/libkjit.so.0')")
        self.assertIn("explicit path /no/such/libkjit.so.0", r.stderr)
        r = run_python("import kjit; kjit.load_library(42)")
        self.assertIn("TypeError", r.stderr)

    def test_not_found_names_every_place_tried(self):
        pkg = os.path.join(tempdir(self), "site")
        shutil.copytree(os.path.join(PKG_ROOT, "kjit"), os.path.join(pkg, "kjit"))
        env = dict(os.environ, PYTHONPATH=pkg, LD_LIBRARY_PATH="")
        env.pop("KJIT_LIBRARY", None)
        r = run_python("import kjit; kjit.Cache(memory_only=True)", env, cwd=pkg)
        if r.returncode == 0:
            self.skipTest("the system loader finds an installed libkjit.so.0")
        self.assertIn("LibraryNotFound", r.stderr)
        self.assertIn("KJIT_LIBRARY: not set", r.stderr)
        self.assertIn(os.path.join(pkg, "kjit", "libkjit.so.0") + ": no such file", r.stderr)
        self.assertIn(os.path.join(pkg, "libkjit.so.0") + ": no such file", r.stderr)
        self.assertIn("system loader", r.stderr)

    def test_bundled_copy_next_to_the_package(self):
        lib = _loaded_lib()
        for inside in (True, False):
            site = os.path.join(tempdir(self), "site")
            shutil.copytree(os.path.join(PKG_ROOT, "kjit"), os.path.join(site, "kjit"))
            dest = os.path.join(site, "kjit" if inside else "", "libkjit.so.0")
            shutil.copy(lib, dest)
            # LD_LIBRARY_PATH stays: libkjit's own dependencies (cJSON ...) may live there
            # (a bundle); the copy next to the package is tried before the system loader.
            env = dict(os.environ, PYTHONPATH=site)
            env.pop("KJIT_LIBRARY", None)
            r = run_python("import kjit; kjit.version(); print(kjit.library_path())", env,
                           cwd=site)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), dest)

    def test_a_library_that_is_not_kjit(self):
        import ctypes.util
        libc = ctypes.util.find_library("c")
        if not libc:
            self.skipTest("no libc found")
        r = run_python("import kjit; kjit.load_library(%r)" % libc)
        self.assertIn("not a usable kjit library", r.stderr)


@unittest.skipIf(header_dir() is None, "kjit headers not found (set KJIT_INCLUDE_DIR)")
class HeadersTest(unittest.TestCase):
    def test_prototypes_cover_the_headers(self):
        funcs = public_functions(header_dir())
        self.assertGreater(len(funcs), 80)
        for name, (restype, argtypes) in _lib.PROTOTYPES.items():
            self.assertIn(name, funcs, "%s is not in the headers" % name)
            self.assertEqual(len(argtypes), len(funcs[name]),
                             "%s: %d parameters in the prototype, %d in the header"
                             % (name, len(argtypes), len(funcs[name])))
            returns_void = restype is None
            self.assertEqual(returns_void, self._returns_void(name), name)
        missing = set(funcs) - set(_lib.PROTOTYPES) - NOT_WRAPPED
        self.assertEqual(missing, set(), "public functions without a prototype")

    def _returns_void(self, name):
        import re
        for h in os.listdir(os.path.join(header_dir(), "kjit")):
            with open(os.path.join(header_dir(), "kjit", h)) as f:
                m = re.search(r"KJIT_EXPORT\s+([\w\s\*]+?)\b%s\s*\(" % name, f.read())
            if m:
                return m.group(1).strip() == "void"
        raise AssertionError(name)

    def test_struct_layouts_match_the_c_compiler(self):
        cc = shutil.which(os.environ.get("CC", "cc"))
        if not cc:
            self.skipTest("no C compiler")
        structs = {
            "kjit_cache_options": _lib.CacheOptionsStruct,
            "kjit_cache_stats": _lib.CacheStatsStruct,
            "kjit_cache_entry_info": _lib.CacheEntryInfoStruct,
            "kjit_worker_info": _lib.WorkerInfoStruct,
            "kjit_kernel_attributes": _lib.KernelAttributesStruct,
            "kjit_launch_config": _lib.LaunchConfigStruct,
            "kjit_gemm_desc": _lib.GemmDescStruct,
            "kjit_gemm_options": _lib.GemmOptionsStruct,
            "kjit_gemm_stats": _lib.GemmStatsStruct,
        }
        lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <kjit/kjit.h>",
                 "int main(void) {"]
        expected = []
        for cname, py in structs.items():
            lines.append('printf("%%s %%zu\\n", "%s", sizeof(%s));' % (cname, cname))
            expected.append("%s %d" % (cname, ctypes.sizeof(py)))
            for fname, _ in py._fields_:
                lines.append('printf("%%s.%%s %%zu\\n", "%s", "%s", offsetof(%s, %s));'
                             % (cname, fname, cname, fname))
                expected.append("%s.%s %d" % (cname, fname, getattr(py, fname).offset))
        lines += ["return 0;", "}"]
        d = tempdir(self)
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        subprocess.run([cc, "-std=c99", "-I", header_dir(), "-o", exe, src], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        self.assertEqual(out.split("\n")[:-1], expected)

    def test_status_values_match_the_header(self):
        import re
        with open(os.path.join(header_dir(), "kjit", "common.h")) as f:
            values = dict((m.group(1), int(m.group(2))) for m in re.finditer(
                r"KJIT_(?:ERROR_)?(\w+) = (\d+)", f.read()))
        for st in kjit.Status:
            self.assertEqual(values.get(st.name), st.value, st.name)
        self.assertEqual(len([k for k in values if not k.startswith("LOG_")]),
                         len(kjit.Status))


class ErrorsTest(unittest.TestCase):
    def test_every_status_has_a_class_and_a_name(self):
        from kjit._errors import error_class, make_error
        for st in kjit.Status:
            if st == kjit.Status.OK:
                continue
            cls = error_class(st)
            self.assertEqual(cls.default_status, st, cls)
            e = make_error(st, "what happened")
            self.assertIsInstance(e, kjit.KjitError)
            self.assertEqual(e.status, st)
            self.assertIn(st.name, str(e))
            self.assertIn("what happened", str(e))
            self.assertTrue(kjit.status_string(st).startswith("KJIT_ERROR_" + st.name), st)
        self.assertEqual(kjit.status_string(12345), "unknown kjit status")
        e = make_error(12345, "x")
        self.assertIs(type(e), kjit.KjitError)
        self.assertIn("12345", str(e))

    def test_hierarchy(self):
        self.assertTrue(issubclass(kjit.CudaUnavailable, kjit.CudaError))
        self.assertTrue(issubclass(kjit.CudaSticky, kjit.CudaError))
        self.assertTrue(issubclass(kjit.CacheCorrupt, kjit.CacheError))
        self.assertTrue(issubclass(kjit.InvalidArgument, ValueError))
        self.assertTrue(issubclass(kjit.ArgumentMismatch, TypeError))
        self.assertTrue(issubclass(kjit.Timeout, TimeoutError))
        self.assertTrue(issubclass(kjit.LibraryNotFound, OSError))
        self.assertTrue(issubclass(kjit.KjitIOError, OSError))
        self.assertTrue(issubclass(kjit.NotFound, LookupError))
        for name in kjit.__all__:
            self.assertTrue(hasattr(kjit, name), name)
        e = kjit.KjitIOError(kjit.Status.IO, "disk on fire")
        self.assertEqual((e.status, e.message), (kjit.Status.IO, "disk on fire"))
        self.assertIn("disk on fire", str(e))


class DocumentationTest(unittest.TestCase):
    def test_every_public_name_is_documented(self):
        import inspect
        for name in kjit.__all__:
            obj = getattr(kjit, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            self.assertTrue(inspect.getdoc(obj), "kjit.%s has no docstring" % name)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") and attr not in ("__call__", "__init__"):
                        continue
                    if inspect.isfunction(member) or isinstance(member, property):
                        doc = member.__doc__
                        if attr == "__init__":
                            continue  # documented on the class
                        self.assertTrue(doc, "kjit.%s.%s has no docstring" % (name, attr))


if __name__ == "__main__":
    unittest.main()
