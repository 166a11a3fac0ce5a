"""Threads: parallel compiles through one compiler and cache, one compile for many
threads asking for the same program, errors that belong to their own thread, and the
GIL released while NVRTC runs."""
import threading
import time
import unittest

from _support import ARCH, kjit, tempdir, unique_source


def heavy_source(tag, kernels=100):
    """A program NVRTC needs a noticeable time for (about 0.3 s per 50 kernels)."""
    return "".join(
        'extern "C" __global__ void k_%s_%d(float* p) { float s = 0; '
        'for (int i = 0; i < %d; ++i) s += __sinf(p[i] * %d.0f); p[0] = s; }\n'
        % (tag, i, 8 + i % 5, i) for i in range(kernels))


def run_threads(n, target):
    results, errors = [None] * n, []
    barrier = threading.Barrier(n)

    def body(i):
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append((i, e))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


class ThreadsTest(unittest.TestCase):
    def setUp(self):
        self.cache = kjit.Cache(tempdir(self))
        self.compiler = kjit.Compiler(self.cache)
        self.addCleanup(self.cache.close)
        self.addCleanup(self.compiler.close)

    def test_parallel_compiles_of_different_programs(self):
        def work(i):
            with self.compiler.compile(unique_source("t%d" % i), arch=ARCH) as b:
                return b.kernel_names, b.tier
        results, errors = run_threads(8, work)
        self.assertEqual(errors, [])
        for i, (names, tier) in enumerate(results):
            self.assertEqual(names, ["k_t%d" % i])
            self.assertEqual(tier, kjit.Tier.COMPILED)
        self.assertEqual(self.cache.stats().compiles, 8)

    def test_many_threads_one_program_one_compile(self):
        src = heavy_source("same", 20)

        def work(i):
            with self.compiler.compile(src, arch=ARCH) as b:
                return b.key, b.tier
        results, errors = run_threads(8, work)
        self.assertEqual(errors, [])
        self.assertEqual(len({key for key, _ in results}), 1)
        self.assertEqual([t for _, t in results].count(kjit.Tier.COMPILED), 1)
        s = self.cache.stats()
        self.assertEqual(s.compiles, 1)
        self.assertEqual(s.hits, 7)

    def test_errors_belong_to_their_thread(self):
        def work(i):
            errs = []
            for r in range(5):
                ident = "undefined_symbol_thread_%d_round_%d" % (i, r)
                try:
                    self.compiler.compile('__global__ void k(int* p) { *p = %s; }' % ident,
                                          arch=ARCH)
                except kjit.CompileError as e:
                    errs.append((ident, e))
                try:
                    self.compiler.compile(unique_source("ok%d_%d" % (i, r)),
                                          arch="sm_bad%d" % i)
                except kjit.InvalidArgument as e:
                    errs.append(("sm_bad%d" % i, e))
            return errs
        results, errors = run_threads(8, work)
        self.assertEqual(errors, [])
        for i, errs in enumerate(results):
            self.assertEqual(len(errs), 10)
            for ident, e in errs:
                self.assertIn(ident, str(e))
                for other in range(8):
                    if other != i:
                        self.assertNotIn("thread_%d_" % other, str(e))
                        self.assertNotIn("sm_bad%d" % other, e.message)

    def test_the_gil_is_released_while_nvrtc_runs(self):
        src = heavy_source("gil", 200)
        done = threading.Event()
        span = []

        def compile_it():
            t0 = time.perf_counter()
            self.compiler.compile(src, arch=ARCH).close()
            span.extend((t0, time.perf_counter()))
            done.set()

        worker = threading.Thread(target=compile_it)
        stamps = []
        worker.start()
        while not done.is_set():
            stamps.append(time.perf_counter())
            for _ in range(200):  # some pure-Python work between time stamps
                pass
        stamps.append(time.perf_counter())
        worker.join()
        t0, t1 = span
        duration = t1 - t0
        if duration < 0.1:
            self.skipTest("the compile took only %.3f s: too short to tell" % duration)
        # Holding the GIL in C would stop this thread for the whole compile; released,
        # it only waits for the interpreter's switch interval (5 ms) now and then.
        during = [t for t in stamps if t0 <= t <= t1]
        self.assertGreater(len(during), 100, "this thread hardly ran during the compile")
        inside = [t0] + during + [min(t for t in stamps if t >= t1)]
        gaps = [b - a for a, b in zip(inside, inside[1:])]
        self.assertLess(max(gaps), duration / 2,
                        "this thread stalled %.3f s during a %.3f s compile"
                        % (max(gaps), duration))


if __name__ == "__main__":
    unittest.main()
