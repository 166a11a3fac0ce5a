#!/usr/bin/env python3
"""Tests of tools/check_function_length.py on small source trees written here."""
import os
import subprocess
import sys
import tempfile
import unittest

from lint_tree import write_sources

CHECKER = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "check_function_length.py")


def function(name, lines, signature="void {}() {{"):
    """A function of exactly `lines` lines, its body full of things that look like braces."""
    body = ['  const char* s = "{{{";  // }', "  /* { */", "  char c = '{';",
            '  const char* r = R"x({)x";']
    body += ["  (void)0;"] * (lines - 2 - len(body))
    return "\n".join([signature.format(name)] + body[: lines - 2] + ["}"]) + "\n"


class FunctionLength(unittest.TestCase):
    def run_checker(self, files, allow=None):
        with tempfile.TemporaryDirectory() as root:
            write_sources(root, files)
            args = [sys.executable, CHECKER, "--root", root, "--limit", "150"]
            if allow is not None:
                with open(os.path.join(root, "allow.txt"), "w") as f:
                    f.write("# allowed\n" + "".join(line + "\n" for line in allow))
                args += ["--allow", os.path.join(root, "allow.txt")]
            p = subprocess.run(args + ["src"], capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

    def test_at_the_limit_passes(self):
        rc, out = self.run_checker({"a.cpp": function("fine", 150)})
        self.assertEqual(rc, 0, out)

    def test_over_the_limit_fails_with_its_name(self):
        rc, out = self.run_checker({"a.cpp": function("fine", 20) + function("long_one", 151)})
        self.assertEqual(rc, 1)
        self.assertIn("src/a.cpp:", out)
        self.assertIn("long_one is 151 lines", out)
        self.assertNotIn("fine", out)

    def test_members_constructors_and_namespaces(self):
        text = ("namespace n {\nstruct S {\n  S();\n  int x_{0};\n};\n"
                + function("S::S", 151, "{}() : x_{{1}} {{")
                + function("Other::method", 160, "int {}(int a) const noexcept {{")
                + function("trailing", 152, "auto {}() -> int {{")
                + "}  // namespace n\n")
        rc, out = self.run_checker({"b.cpp": text})
        self.assertEqual(rc, 1)
        self.assertIn("S::S is 151 lines", out)
        self.assertIn("Other::method is 160 lines", out)
        self.assertIn("trailing is 152 lines", out)

    def test_allowlisted_function_may_be_long(self):
        rc, out = self.run_checker({"cli/c.cpp": function("cmd_long", 200)},
                                   allow=["src/cli/c.cpp:cmd_long"])
        self.assertEqual(rc, 0, out)

    def test_allowlisted_function_that_got_short_fails(self):
        rc, out = self.run_checker({"cli/c.cpp": function("cmd_long", 100)},
                                   allow=["src/cli/c.cpp:cmd_long"])
        self.assertEqual(rc, 1)
        self.assertIn("remove it from the allowlist", out)

    def test_allowlisted_function_that_is_gone_fails(self):
        rc, out = self.run_checker({"cli/c.cpp": function("other", 10)},
                                   allow=["src/cli/c.cpp:cmd_long"])
        self.assertEqual(rc, 1)
        self.assertIn("no longer exists", out)

    def test_allowlist_covers_only_its_own_function(self):
        rc, out = self.run_checker({"cli/c.cpp": function("cmd_long", 200) + function("b", 151)},
                                   allow=["src/cli/c.cpp:cmd_long"])
        self.assertEqual(rc, 1)
        self.assertIn("b is 151 lines", out)


if __name__ == "__main__":
    unittest.main()
