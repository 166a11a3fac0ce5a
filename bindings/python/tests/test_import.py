"""`import kjit` stays cheap: no typing, no dataclasses (nor inspect, ast, re), no GEMM or
linking module until they are used; what is deferred behaves as if it were not."""
import dataclasses
import pickle
import subprocess
import sys
import unittest

from _support import kjit, subprocess_env

HEAVY = ("typing", "dataclasses", "inspect", "ast", "re", "kjit._gemm", "kjit._link")


def child(code):
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, env=subprocess_env()).stdout.split()


class ImportTest(unittest.TestCase):
    def test_import_kjit_loads_no_heavy_module(self):
        # What `import kjit` itself loads: an interpreter's site setup (.pth files of other
        # packages) may have loaded some of them before.
        loaded = child("import sys; before = set(sys.modules); import kjit; "
                       "print(' '.join(m for m in %r if m in sys.modules and m not in before))"
                       % (HEAVY,))
        self.assertEqual(loaded, [])

    def test_deferred_names(self):
        for name in ("Gemm", "GemmDesc", "GemmDtype", "gemm_check", "matmul_desc", "Linker",
                     "link", "InputKind", "nvjitlink_version", "CacheStats", "CacheEntry",
                     "KernelAttributes"):
            self.assertIn(name, dir(kjit))
            self.assertIn(name, kjit.__all__)
            self.assertIs(getattr(kjit, name), getattr(kjit, name))
        self.assertIs(kjit.Gemm, kjit._gemm.Gemm)
        with self.assertRaises(AttributeError):
            kjit.no_such_name
        out = child("from kjit import GemmDesc, CacheStats; import dataclasses; "
                    "print(dataclasses.is_dataclass(GemmDesc), "
                    "dataclasses.fields(CacheStats)[0].name)")
        self.assertEqual(out, ["True", "disk_state"])

    def test_link_functions_declared_when_imported_after_the_library_loads(self):
        try:
            kjit.version()
        except kjit.LibraryNotFound as e:
            self.skipTest(str(e))
        out = child("import kjit; kjit.version(); from kjit import _lib\n"
                    "assert 'kjit._link' not in __import__('sys').modules\n"
                    "kjit.nvjitlink_version\n"
                    "f = _lib.lib().kjit_linker_create\n"
                    "print(f.restype.__name__, len(f.argtypes))")
        self.assertEqual(out, ["c_int", "2"])

    def test_records_are_dataclasses(self):
        a = kjit.KernelAttributes(1, 2, 3, 4, 5, 6, 7, 8)
        self.assertTrue(dataclasses.is_dataclass(a))
        self.assertEqual(repr(a).split("(")[0], "KernelAttributes")
        self.assertEqual(a, pickle.loads(pickle.dumps(a)))
        self.assertEqual(hash(a), hash(kjit.KernelAttributes(1, 2, 3, 4, 5, 6, 7, 8)))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            a.num_regs = 0
        self.assertEqual(dataclasses.asdict(a)["binary_version"], 8)
        self.assertEqual(kjit.CacheStats.hits.__doc__.split()[0], "Hits")
        # made on first construction, once, whichever thread gets there first
        out = child("import threading; from kjit import _kernel, _cache\n"
                    "seen = []\n"
                    "def f(): seen.append(type(_cache.CacheEntry('k', 't', [], 1, 2, 3, 4.0)))\n"
                    "ts = [threading.Thread(target=f) for _ in range(8)]\n"
                    "[t.start() for t in ts]; [t.join() for t in ts]\n"
                    "print(len(set(seen)), repr(_cache.CacheEntry('k', 't', [], 1, 2, 3, 4.0))"
                    ".split('(')[0])")
        self.assertEqual(out, ["1", "CacheEntry"])


if __name__ == "__main__":
    unittest.main()
