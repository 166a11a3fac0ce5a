#!/usr/bin/env python3
"""Tests of tools/check_counters.py on copies of the files it reads, one list changed."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECKER = os.path.join(ROOT, "tools", "check_counters.py")


def checker_files():
    spec = importlib.util.spec_from_file_location("check_counters", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FILES


class CheckCounters(unittest.TestCase):
    def run_checker(self, path=None, old=None, new=None, count=1):
        """Runs the checker on a copy of the tree where `old` (a regex) became `new` in
        `path` (exactly `count` times)."""
        with tempfile.TemporaryDirectory() as root:
            for f in checker_files():
                os.makedirs(os.path.dirname(os.path.join(root, f)), exist_ok=True)
                shutil.copy(os.path.join(ROOT, f), os.path.join(root, f))
            if path:
                full = os.path.join(root, path)
                with open(full) as fh:
                    text, n = re.subn(old, new, fh.read(), flags=re.M)
                self.assertEqual(n, count, "%s: /%s/ matched %d times" % (path, old, n))
                with open(full, "w") as fh:
                    fh.write(text)
            p = subprocess.run([sys.executable, CHECKER, "--root", root],
                               capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

    def assert_fails(self, rc, out, *needles):
        self.assertEqual(rc, 1, out)
        for needle in needles:
            self.assertIn(needle, out)

    def test_the_tree_passes(self):
        rc, out = self.run_checker()
        self.assertEqual(rc, 0, out)
        self.assertIn("18 counters agree", out)

    def test_counter_removed_from_the_x_macro(self):
        rc, out = self.run_checker("src/store/cache.h", r"^  X\(pch_failed\) *\\\n", "")
        self.assert_fails(rc, out, "include/kjit/cache.h: kjit_cache_stats: extra counter "
                          "'pch_failed'", "bindings/julia/src/KJit.jl: struct CacheStats: extra "
                          "counter 'total_pch_failed'", "bindings/go/cache.go")

    def test_counter_missing_from_the_public_header(self):
        rc, out = self.run_checker("include/kjit/cache.h", r"^  uint64_t pch_used;.*\n", "")
        self.assert_fails(rc, out, "include/kjit/cache.h: kjit_cache_stats: counter 'pch_used' "
                          "is missing")

    def test_renamed_counter_missing(self):
        rc, out = self.run_checker("bindings/rust/src/cache.rs",
                                   r"^    pub total_compile_ms_saved: f64,\n", "")
        self.assert_fails(rc, out, "bindings/rust/src/cache.rs: struct CacheStats: "
                          "'total_compile_ms_saved', the total of counter 'compile_us_saved', "
                          "is missing")

    def test_total_missing_from_the_rust_raw_layer(self):
        rc, out = self.run_checker("bindings/rust/kjit-sys/src/lib.rs",
                                   r"^    pub total_pch_used: u64,\n", "")
        self.assert_fails(rc, out, "bindings/rust/kjit-sys/src/lib.rs: struct kjit_cache_stats: "
                          "'total_pch_used', the total of counter 'pch_used', is missing")

    def test_counter_missing_from_the_rust_layout_test(self):
        rc, out = self.run_checker("bindings/rust/kjit-sys/tests/layout.rs",
                                   r" remote_claim_waits,", "")
        self.assert_fails(rc, out, "layout.rs: rust_layout!(kjit_cache_stats): counter "
                          "'remote_claim_waits' is missing")

    def test_extra_counter_in_the_python_raw_layer(self):
        rc, out = self.run_checker("bindings/python/kjit/_lib.py",
                                   r'^(        \("pch_failed", c_uint64\),\n)',
                                   r'\1        ("pch_reused", c_uint64),\n')
        self.assert_fails(rc, out, "bindings/python/kjit/_lib.py: CacheStatsStruct._fields_: "
                          "extra counter 'pch_reused'")

    def test_counter_missing_from_the_python_record(self):
        rc, out = self.run_checker("bindings/python/kjit/_cache.py", r"^    misses: int.*\n", "")
        self.assert_fails(rc, out, "bindings/python/kjit/_cache.py: class CacheStats: counter "
                          "'misses' is missing")

    def test_counters_out_of_order_in_the_julia_raw_layer(self):
        rc, out = self.run_checker("bindings/julia/src/LibKJit.jl",
                                   r"^(    pch_used::UInt64\n)(    pch_failed::UInt64\n)",
                                   r"\2\1")
        self.assert_fails(rc, out, "bindings/julia/src/LibKJit.jl: struct kjit_cache_stats: "
                          "'pch_failed' is out of order: include/kjit/cache.h has 'pch_used' "
                          "after 'pch_created'")

    def test_counter_missing_from_the_julia_struct(self):
        rc, out = self.run_checker("bindings/julia/src/KJit.jl",
                                   r"^    total_evictions::UInt64\n", "")
        self.assert_fails(rc, out, "bindings/julia/src/KJit.jl: struct CacheStats: "
                          "'total_evictions', the total of counter 'evictions', is missing")

    def test_counter_not_copied_by_go(self):
        rc, out = self.run_checker("bindings/go/cache.go",
                                   r"^\t\tRemoteClaimWaitHits: .*\n", "")
        self.assert_fails(rc, out, "bindings/go/cache.go: Stats()'s copy of C.kjit_cache_stats: "
                          "counter 'remote_claim_wait_hits' is missing",
                          "bindings/go/cache.go: CacheStats.RemoteClaimWaitHits is never set by "
                          "Stats()")

    def test_list_not_found(self):
        rc, out = self.run_checker("bindings/julia/src/KJit.jl", r"^struct CacheStats$",
                                   "struct CacheCounters")
        self.assert_fails(rc, out, "bindings/julia/src/KJit.jl: cannot find struct CacheStats")


if __name__ == "__main__":
    unittest.main()
