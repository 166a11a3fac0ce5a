"""Compiling through the cache: results, hits by tier, lowered names, errors with logs,
options, binaries and cache maintenance. CPU only (explicit target)."""
import hashlib
import json
import os
import textwrap
import unittest

from _support import ARCH, SAXPY, TEMPLATED, kjit, run_python, tempdir, unique_source


class CompileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempdir(self)
        self.cache = kjit.Cache(self.dir)
        self.compiler = kjit.Compiler(self.cache)
        self.addCleanup(self.cache.close)
        self.addCleanup(self.compiler.close)

    def compile(self, src=SAXPY, **kw):
        kw.setdefault("arch", ARCH)
        b = self.compiler.compile(src, **kw)
        self.addCleanup(b.close)
        return b

    def test_compile_gives_ptx_cubin_and_metadata(self):
        b = self.compile()
        self.assertEqual(b.tier, kjit.Tier.COMPILED)
        self.assertIn(".entry saxpy", b.ptx)
        self.assertTrue(b.cubin.startswith(b"\x7fELF"))
        self.assertIsNone(b.ltoir)
        self.assertEqual(b.target, ARCH)
        self.assertRegex(b.key, r"^[0-9a-f]{64}$")
        self.assertEqual(b.kernel_names, ["saxpy"])
        self.assertEqual(b.log, "")
        self.assertGreater(b.compile_ms, 0)
        meta = b.metadata
        self.assertEqual(json.loads(b.metadata_json), meta)
        self.assertEqual(meta["target"], ARCH)
        self.assertEqual(b.key, kjit.compute_key(SAXPY, arch=ARCH))
        self.assertIn(b.key[:12], repr(b))

    def test_nvrtc_crash_is_a_status_not_a_dead_process(self):
        """NVRTC 13.0 dies with SIGSEGV on this source with this name expression
        (fuzz/nvrtc-crash/): the compile worker, the default mode, turns that into an
        NvrtcError for this compile, and this process lives on."""
        with self.assertRaises(kjit.NvrtcError) as cm:
            self.compile("template <typename ~> __global__ void t(T* p) { *p = T(1); }\n",
                         arch="sm_90", name_expressions=["t<int>"])
        self.assertIn("crashed", str(cm.exception))
        self.assertEqual(self.compile().tier, kjit.Tier.COMPILED)

    def test_memory_then_disk_hit_then_other_process(self):
        first = self.compile()
        again = self.compile()
        self.assertEqual(again.tier, kjit.Tier.MEMORY)
        self.assertEqual(again.ptx, first.ptx)
        self.cache.clear_memory()
        disk = self.compile()
        self.assertEqual(disk.tier, kjit.Tier.DISK)
        self.assertEqual(disk.cubin, first.cubin)
        s = self.cache.stats()
        self.assertIsInstance(s, kjit.CacheStats)
        self.assertEqual((s.compiles, s.memory_hits, s.disk_hits, s.misses), (1, 1, 1, 1))
        self.assertEqual(s.hits, 2)
        self.assertEqual(s.disk_state, kjit.DiskState.OK)
        self.assertEqual(s.remote_state, kjit.RemoteState.NONE)
        self.assertEqual(s.not_stored, 0)
        self.assertEqual(s.message, "")
        self.assertGreaterEqual(s.disk_entries, 1)
        self.assertIsInstance(s.compile_ms_saved, float)
        self.assertEqual((s.remote_claims, s.total_remote_claim_waits), (0, 0))
        # Every field of the C struct, under its own name.
        fields = [f for f, _ in kjit._lib.CacheStatsStruct._fields_ if f != "struct_size"]
        self.assertEqual(sorted(fields), sorted(vars(s)))
        # A fresh process on the same directory hits the disk tier.
        r = run_python(textwrap.dedent("""
            import kjit, sys
            with kjit.Cache(sys.argv[1] if len(sys.argv) > 1 else %r) as c, \\
                    kjit.Compiler(c) as comp:
                b = comp.compile(%r, arch=%r)
                print(b.tier.name, b.key)
            """ % (self.dir, SAXPY, ARCH)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["DISK", first.key])

    def test_a_different_option_is_a_different_entry(self):
        a = self.compile()
        b = self.compile(defines={"UNUSED": 1})
        self.assertNotEqual(a.key, b.key)
        self.assertEqual(b.tier, kjit.Tier.COMPILED)

    def test_lowered_names(self):
        b = self.compile(TEMPLATED, name_expressions=["fill<float, 2>", "fill<int, 3>"])
        names = b.name_expressions
        self.assertEqual(list(names), ["fill<float, 2>", "fill<int, 3>"])
        lf = b.lowered_name("fill<float, 2>")
        self.assertTrue(lf.startswith("_Z"), lf)
        self.assertEqual(names["fill<float, 2>"], lf)
        self.assertNotEqual(lf, b.lowered_name("fill<int, 3>"))
        self.assertEqual(sorted(b.kernel_names), sorted(names.values()))
        with self.assertRaises(kjit.NameNotFound) as cm:
            b.lowered_name("fill<double, 1>")
        self.assertIsInstance(cm.exception, LookupError)
        # Lowered names survive the cache.
        self.cache.clear_memory()
        again = self.compile(TEMPLATED, name_expressions=["fill<float, 2>", "fill<int, 3>"])
        self.assertEqual(again.tier, kjit.Tier.DISK)
        self.assertEqual(again.lowered_name("fill<float, 2>"), lf)

    def test_name_expression_that_names_nothing(self):
        with self.assertRaises(kjit.NameNotFound) as cm:
            self.compile(TEMPLATED, name_expressions=["nothing_here<int>"])
        e = cm.exception
        self.assertEqual(e.status, kjit.Status.NAME_NOT_FOUND)
        # The compile's log, as the C status carries it, names the expression.
        self.assertIn("nothing_here<int>", e.log)
        self.assertIn(e.log.rstrip("\n"), str(e))
        # A lookup on a binary has no compile log.
        b = self.compile(TEMPLATED, name_expressions=["fill<float, 2>"])
        with self.assertRaises(kjit.NameNotFound) as cm:
            b.lowered_name("fill<double, 1>")
        self.assertEqual(cm.exception.log, "")

    def test_enums_print_their_names(self):
        b = self.compile()
        self.assertEqual(str(b.tier), "Tier.COMPILED")
        self.assertEqual("%s" % b.tier, "Tier.COMPILED")
        self.assertEqual("{}".format(b.tier), "Tier.COMPILED")
        self.assertEqual("%d" % b.tier, "0")
        self.assertEqual("{:d}".format(kjit.Tier.DISK), "2")
        self.assertEqual(b.tier, 0)
        self.assertEqual(str(kjit.Status.NAME_NOT_FOUND), "Status.NAME_NOT_FOUND")
        both = kjit.Output.PTX | kjit.Output.CUBIN
        self.assertIn("PTX", str(both))
        self.assertIn("CUBIN", str(both))
        self.assertTrue(str(both).startswith("Output."))
        self.assertEqual(int(both), 3)

    def test_compile_error_carries_the_log(self):
        src = "extern \"C\" __global__ void broken(int* p) { *p = undeclared_thing; }\n"
        with self.assertRaises(kjit.CompileError) as cm:
            self.compile(src)
        e = cm.exception
        self.assertEqual(e.status, kjit.Status.COMPILE)
        self.assertIn("undeclared_thing", e.log)
        self.assertIn("error", e.log)
        self.assertIn("undeclared_thing", str(e))
        self.assertTrue(e.message)
        self.assertIsInstance(e, kjit.KjitError)
        # Failures are not cached: the same source fails again with the same log.
        with self.assertRaises(kjit.CompileError) as cm2:
            self.compile(src)
        self.assertEqual(cm2.exception.log, e.log)

    def test_toolkit_headers_need_no_include_option(self):
        src = ("#include <cuda_fp16.h>\n"
               "extern \"C\" __global__ void h(__half* p) { *p = __float2half(1.0f); }\n")
        b = self.compile(src, pch=False)
        self.assertIn(".entry h", b.ptx)
        with self.assertRaises(kjit.CompileError) as cm:
            self.compile(src, toolkit="")
        self.assertIn("cuda_fp16.h", cm.exception.log)
        self.assertEqual(self.cache.stats().not_stored, 0)

    def test_exceptions_pickle(self):
        import pickle
        e = kjit.CompileError(kjit.Status.COMPILE, "m", "the log")
        e2 = pickle.loads(pickle.dumps(e))
        self.assertEqual((type(e2), e2.status, e2.message, e2.log),
                         (kjit.CompileError, kjit.Status.COMPILE, "m", "the log"))
        n = pickle.loads(pickle.dumps(kjit.LibraryNotFound("gone")))
        self.assertEqual(n.message, "gone")

    def test_warning_log_on_success(self):
        b = self.compile('extern "C" __global__ void w(int* p) { int unused = 1; }\n')
        self.assertEqual(b.tier, kjit.Tier.COMPILED)
        self.assertIn("unused", b.log)

    def test_options_keywords(self):
        src = textwrap.dedent(r'''
            #include "consts.h"
            #include "inc_dir_header.h"
            #if !defined(FLAG) || VALUE != 7 || NAME_ONLY != 1
            #error defines missing
            #endif
            #if __cplusplus < 201703L
            #error not c++17
            #endif
            extern "C" __global__ void k(float* p) { p[0] = SCALE * INC_VALUE; }
            ''')
        inc = tempdir(self)
        with open(os.path.join(inc, "inc_dir_header.h"), "w") as f:
            f.write("#define INC_VALUE 3.0f\n")
        kw = dict(std=17, defines={"FLAG": None, "VALUE": 7}, headers={"consts.h":
                  "#define SCALE 2.0f\n"}, include_paths=[inc], fast_math=True,
                  max_registers=64, line_info=True, options=["-DNAME_ONLY"])
        b = self.compile(src, **kw)
        self.assertIn(".entry k", b.ptx)
        # Same again through an Options object: the same key.
        with kjit.Options(arch=ARCH, **kw) as o:
            self.assertIn("define", repr(o))
            b2 = self.compiler.compile(src, o)
            self.addCleanup(b2.close)
            self.assertEqual(b2.key, b.key)
            self.assertEqual(b2.tier, kjit.Tier.MEMORY)
            with o.clone() as c:
                c.define("EXTRA")
                self.assertNotEqual(kjit.compute_key(src, c), b.key)
            self.assertEqual(kjit.compute_key(src, o), b.key)
        # Editing a header reached through an include path changes the key.
        with open(os.path.join(inc, "inc_dir_header.h"), "w") as f:
            f.write("#define INC_VALUE 4.0f\n")
        b3 = self.compile(src, **kw)
        self.assertNotEqual(b3.key, b.key)
        self.assertEqual(b3.tier, kjit.Tier.COMPILED)

    def test_cupy_style_raw_options(self):
        src = '#if A != 1 || __cplusplus < 201703L\n#error\n#endif\n__global__ void k() {}\n'
        raw = ("-std=c++17", "-DA=1", "-arch=" + ARCH)
        b = self.compiler.compile(src, raw)
        self.addCleanup(b.close)
        self.assertEqual(b.target, ARCH)
        self.assertEqual(b.key, kjit.compute_key(src, list(raw)))
        with kjit.Options(options=raw) as o:
            self.assertEqual(kjit.compute_key(src, o), b.key)

    def test_defines_as_strings(self):
        src = '#if A != 1 || !defined(B)\n#error\n#endif\n__global__ void k() {}\n'
        self.compile(src, defines=["A=1", "B"])
        with self.assertRaises(kjit.CompileError):
            self.compile(src, defines=["A=2", "B"])

    def test_outputs_and_targets(self):
        ptx_only = self.compile(outputs=["ptx"])
        self.assertIsNone(ptx_only.cubin)
        self.assertIn(".entry saxpy", ptx_only.ptx)
        cubin = self.compile(outputs=kjit.Output.CUBIN)
        self.assertIsNotNone(cubin.cubin)
        virtual = self.compile(arch="compute_" + ARCH.split("_")[1])
        self.assertIsNone(virtual.cubin)
        self.assertIsNotNone(virtual.ptx)
        by_int = self.compile(arch=int(ARCH.split("_")[1]))
        self.assertEqual(by_int.target, ARCH)
        lto = self.compile(outputs=["ltoir"])
        self.assertIsNotNone(lto.ltoir)
        self.assertIsNone(lto.ptx)

    def test_program_name_appears_in_the_log(self):
        with self.assertRaises(kjit.CompileError) as cm:
            self.compile("this is not C++", name="my_program.cu")
        self.assertIn("my_program.cu", cm.exception.log)

    def test_bytes_source(self):
        b = self.compile(SAXPY.encode())
        self.assertEqual(b.key, self.compile(SAXPY).key)

    def test_compile_async(self):
        fut = self.compiler.compile_async(unique_source("async"), arch=ARCH)
        with fut:
            b = fut.result(timeout=120)
            self.addCleanup(b.close)
            self.assertTrue(fut.done())
            self.assertEqual(b.kernel_names, ["k_async"])
            with self.assertRaises(kjit.InvalidArgument):
                fut.result()  # taken once
        bad = self.compiler.compile_async("not C++ at all", arch=ARCH)
        with bad, self.assertRaises(kjit.CompileError) as cm:
            bad.result()
        self.assertIn("error", cm.exception.log)

    def test_hashes(self):
        self.assertEqual(kjit.hash_source(b"abc"), hashlib.sha256(b"abc").hexdigest())
        self.assertEqual(kjit.hash_source("é"), hashlib.sha256("é".encode()).hexdigest())
        self.assertEqual(kjit.hash_source(b""), hashlib.sha256(b"").hexdigest())
        self.assertEqual(kjit.hash_source(b"a\0b"), hashlib.sha256(b"a\0b").hexdigest())
        self.assertNotEqual(kjit.hash_options(["ab", "c"]), kjit.hash_options(["a", "bc"]))
        self.assertNotEqual(kjit.hash_options(["a", "b"]), kjit.hash_options(["b", "a"]))
        self.assertRegex(kjit.hash_options([]), r"^[0-9a-f]{64}$")


class CacheMaintenanceTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempdir(self)
        self.cache = kjit.Cache(self.dir)
        self.addCleanup(self.cache.close)
        with kjit.Compiler(self.cache) as c:
            self.keys = []
            for tag in ("one", "two", "three"):
                with c.compile(unique_source(tag), arch=ARCH) as b:
                    self.keys.append(b.key)

    def test_directory_entries_get_remove(self):
        self.assertEqual(os.path.realpath(self.cache.directory), os.path.realpath(self.dir))
        entries = self.cache.entries()
        self.assertEqual(sorted(e.key for e in entries), sorted(self.keys))
        e = entries[0]
        self.assertIsInstance(e, kjit.CacheEntry)
        self.assertEqual(e.target, ARCH)
        self.assertEqual(len(e.kernels), 1)
        self.assertGreater(e.bytes, 0)
        with self.cache.get(self.keys[0]) as b:
            self.assertEqual(b.key, self.keys[0])
            self.assertIn(b.tier, (kjit.Tier.MEMORY, kjit.Tier.DISK))
            self.assertEqual(b.kernel_names, ["k_one"])
        self.cache.remove(self.keys[0])
        with self.assertRaises(kjit.NotFound):
            self.cache.get(self.keys[0])
        with self.assertRaises(kjit.NotFound):
            self.cache.remove(self.keys[0])
        self.assertEqual(len(self.cache.entries()), 2)

    def test_verify_prune_clear(self):
        self.assertEqual(self.cache.verify(), (3, 0))
        self.assertEqual(self.cache.prune(0), 3)
        self.assertEqual(self.cache.entries(), [])
        self.cache.clear()
        self.assertEqual(self.cache.stats().disk_entries, 0)

    def test_export_import_put(self):
        path = os.path.join(tempdir(self), "entries.kjit")
        self.assertEqual(self.cache.export_to(path), 3)
        with kjit.Cache(tempdir(self)) as other:
            self.assertEqual(other.import_from(path), (3, 0))
            self.assertEqual(sorted(e.key for e in other.entries()), sorted(self.keys))
            with kjit.Cache(tempdir(self)) as third:
                with other.get(self.keys[1]) as b:
                    third.put(b)
                self.assertEqual([e.key for e in third.entries()], [self.keys[1]])
        with open(path, "rb") as f:
            data = f.read()
        damaged = bytearray(data)
        damaged[200:220] = b"G" * 20  # inside an entry: that entry is rejected
        with open(path, "wb") as f:
            f.write(bytes(damaged))
        with kjit.Cache(tempdir(self)) as other:
            self.assertEqual(other.import_from(path), (2, 1))
        with open(path, "wb") as f:
            f.write(data[:len(data) // 2])  # truncated: malformed file
        with kjit.Cache(tempdir(self)) as other:
            with self.assertRaises(kjit.CacheCorrupt):
                other.import_from(path)

    def test_read_only_and_memory_only(self):
        with kjit.Cache(self.dir, read_only=True) as ro:
            self.assertEqual(ro.stats().disk_state, kjit.DiskState.READ_ONLY)
            with self.assertRaises(kjit.ReadOnly):
                ro.clear()
            with kjit.Compiler(ro) as c, c.compile(unique_source("ro"), arch=ARCH) as b:
                self.assertEqual(b.tier, kjit.Tier.COMPILED)
                with self.assertRaises(kjit.ReadOnly) as cm:
                    ro.put(b)
                self.assertIsInstance(cm.exception, kjit.CacheError)
        with kjit.Cache(memory_only=True) as mem:
            self.assertEqual(mem.directory, "")
            self.assertEqual(mem.stats().disk_state, kjit.DiskState.DISABLED)
            self.assertIn("memory-only", repr(mem))

    def test_unusable_directory_gives_a_memory_cache_that_says_why(self):
        blocker = os.path.join(tempdir(self), "a-file")
        with open(blocker, "w") as f:
            f.write("x")
        with kjit.Cache(os.path.join(blocker, "sub")) as c:
            s = c.stats()
            self.assertEqual(s.disk_state, kjit.DiskState.UNAVAILABLE)
            self.assertTrue(s.message)


if __name__ == "__main__":
    unittest.main()
