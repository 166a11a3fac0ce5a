#!/usr/bin/env python3
"""Tests of tools/check_layers.py on small source trees written here."""
import os
import subprocess
import sys
import tempfile
import unittest

from lint_tree import write_sources

CHECKER = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "check_layers.py")


class Layers(unittest.TestCase):
    def run_checker(self, files):
        with tempfile.TemporaryDirectory() as root:
            write_sources(root, files)
            p = subprocess.run([sys.executable, CHECKER, "--root", root],
                               capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

    def test_includes_that_point_down_pass(self):
        rc, out = self.run_checker({
            "compile/a.cpp": '#include "compile/a.h"\n#include "key/k.h"\n#include "kjit/kjit.h"\n',
            "key/k.cpp": '#include "store/s.h"\n#include "util/fs.h"\n#include <vector>\n',
        })
        self.assertEqual(rc, 0, out)

    def test_an_upward_include_fails_with_file_and_rooms(self):
        rc, out = self.run_checker({"key/k.cpp": '#include "util/fs.h"\n  #  include "compile/c.h"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('src/key/k.cpp includes "compile/c.h": key may not depend on compile', out)

    def test_a_sideways_include_fails(self):
        rc, out = self.run_checker({"blas/g.cpp": '#include "link/l.h"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn("blas may not depend on link", out)

    def test_the_cli_may_include_only_the_builtin_header_list(self):
        rc, out = self.run_checker({"cli/i.cpp": '#include "key/builtin_std.h"\n'})
        self.assertEqual(rc, 0, out)
        rc, out = self.run_checker({"cli/i.cpp": '#include "key/key.h"\n'})
        self.assertEqual(rc, 1, out)

    def test_the_worker_is_one_room_between_compile_and_nvrtc(self):
        rc, out = self.run_checker({
            "compile/c.cpp": '#include "worker/client.h"\n#include "nvrtc/options.h"\n',
            "worker/client.h": '#include "worker/protocol.h"\n#include "store/outcome.h"\n',
            "worker/main.cpp": '#include "nvrtc/nvrtc_program.h"\n#include "worker/protocol.h"\n',
            "nvrtc/options.cpp": '#include "key/request.h"\n#include "cuda/nvrtc_lib.h"\n',
        })
        self.assertEqual(rc, 0, out)
        rc, out = self.run_checker({"worker/main.cpp": '#include "compile/compiler.h"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('src/worker/main.cpp includes "compile/compiler.h": '
                      "worker may not depend on compile", out)
        rc, out = self.run_checker({"nvrtc/pch.cpp": '#include "worker/client.h"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn("nvrtc may not depend on worker", out)

    def test_an_unknown_room_fails(self):
        rc, out = self.run_checker({"extra/x.cpp": "int x;\n"})
        self.assertEqual(rc, 1, out)
        self.assertIn("src/extra: a room check_layers.py does not know", out)


if __name__ == "__main__":
    unittest.main()
