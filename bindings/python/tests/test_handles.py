"""Handles: close() and context managers, use after close, dependants of a cache, and
handles left to the garbage collector."""
import gc
import textwrap
import unittest

from _support import ARCH, SAXPY, kjit, run_python, tempdir


class HandlesTest(unittest.TestCase):
    def test_use_after_close_raises(self):
        cache = kjit.Cache(tempdir(self))
        compiler = kjit.Compiler(cache)
        opts = kjit.Options(arch=ARCH)
        binary = compiler.compile(SAXPY, opts)
        fut = compiler.compile_async(SAXPY, opts)
        fut.result().close()
        for h in (binary, fut, opts, compiler, cache):
            self.assertFalse(h.closed)
            h.close()
            self.assertTrue(h.closed)
            h.close()  # twice is a no-op
            self.assertIn("closed", repr(h))
        uses = [
            lambda: cache.stats(), lambda: cache.directory, lambda: cache.clear_memory(),
            lambda: cache.clear(), lambda: cache.entries(), lambda: cache.verify(),
            lambda: cache.prune(0), lambda: cache.get("0" * 64),
            lambda: cache.remove("0" * 64), lambda: cache.export_to("/tmp/x"),
            lambda: cache.import_from("/tmp/x"),
            lambda: compiler.compile(SAXPY, arch=ARCH), lambda: compiler.kernel(SAXPY, "k"),
            lambda: compiler.compile_async(SAXPY, arch=ARCH),
            lambda: opts.add("-DX"), lambda: opts.set_arch("sm_90"), lambda: opts.clone(),
            lambda: opts.define("A"), lambda: opts.header("a.h", ""),
            lambda: opts.include_path("/tmp"), lambda: opts.name_expression("f<int>"),
            lambda: opts.set_outputs(["ptx"]), lambda: opts.set_device(0),
            lambda: opts.set_name("x.cu"),
            lambda: binary.ptx, lambda: binary.cubin, lambda: binary.log, lambda: binary.key,
            lambda: binary.tier, lambda: binary.target, lambda: binary.kernel_names,
            lambda: binary.name_expressions, lambda: binary.lowered_name("x"),
            lambda: binary.kernel("saxpy"), lambda: binary.metadata,
            lambda: binary.compile_ms,
            lambda: fut.result(), lambda: fut.done(), lambda: fut.cancel(),
        ]
        for use in uses:
            with self.assertRaises(kjit.InvalidHandle) as cm:
                use()
            self.assertIn("is closed", str(cm.exception))
            self.assertEqual(cm.exception.status, kjit.Status.INVALID_HANDLE)
        with self.assertRaises(kjit.InvalidHandle):
            with cache:
                pass

    def test_closed_options_or_cache_are_not_silently_replaced(self):
        with kjit.Compiler() as compiler:
            opts = kjit.Options(arch=ARCH)
            opts.close()
            with self.assertRaises(kjit.InvalidHandle):
                compiler.compile(SAXPY, opts)
            with self.assertRaises(kjit.InvalidHandle):
                kjit.compute_key(SAXPY, opts)
        cache = kjit.Cache(memory_only=True)
        cache.close()
        with self.assertRaises(kjit.InvalidHandle):
            kjit.Compiler(cache)

    def test_context_managers(self):
        with kjit.Cache(tempdir(self)) as cache, kjit.Compiler(cache) as compiler, \
                kjit.Options(arch=ARCH) as opts, compiler.compile(SAXPY, opts) as binary:
            self.assertIn("saxpy", binary.kernel_names)
        for h in (cache, compiler, opts, binary):
            self.assertTrue(h.closed)

    def test_a_cache_does_not_close_under_its_compilers(self):
        cache = kjit.Cache(tempdir(self))
        c1, c2 = kjit.Compiler(cache), kjit.Compiler(cache)
        self.assertIs(c1.cache, cache)
        with self.assertRaises(kjit.InvalidArgument) as cm:
            cache.close()
        self.assertIn("2 open", str(cm.exception))
        self.assertFalse(cache.closed)
        c1.close()
        with self.assertRaises(kjit.InvalidArgument):
            cache.close()
        with c2.compile(SAXPY, arch=ARCH) as b:  # still works
            self.assertEqual(b.tier, kjit.Tier.COMPILED)
        c2.close()
        cache.close()
        self.assertTrue(cache.closed)

    def test_objects_outlive_what_made_them(self):
        with kjit.Cache(tempdir(self)) as cache:
            compiler = kjit.Compiler(cache)
            opts = kjit.Options(arch=ARCH, name_expressions=[])
            binary = compiler.compile(SAXPY, opts)
            opts.close()
            compiler.close()
        self.assertIn(".entry saxpy", binary.ptx)  # the binary owns its data
        binary.close()

    def test_garbage_collected_handles(self):
        for _ in range(20):
            cache = kjit.Cache(memory_only=True)
            compiler = kjit.Compiler(cache)
            compiler.compile(SAXPY, arch=ARCH)  # the binary is dropped unclosed
            kjit.Options(arch=ARCH, std=17)
            del compiler, cache
        gc.collect()

    def test_interpreter_exit_with_open_handles(self):
        r = run_python(textwrap.dedent("""
            import kjit
            cache = kjit.Cache(%r)
            compiler = kjit.Compiler(cache)
            binary = compiler.compile(%r, arch=%r)
            opts = kjit.Options(arch=%r)
            cycle = [compiler, cache]
            cycle.append(cycle)
            print("ok")
            """ % (tempdir(self), SAXPY, ARCH, ARCH)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ok")
        self.assertEqual(r.stderr, "")


if __name__ == "__main__":
    unittest.main()
