#!/usr/bin/env python3
"""Installs the kjit package with any Python 3.8+, without pip, wheel or network:

    python3 bindings/python/install.py            # into this Python's site-packages
    python3 bindings/python/install.py --user     # into the user's site-packages
    python3 bindings/python/install.py --target DIR

It copies kjit/ there, builds the compiled launch path (kjit._fastlaunch) in the copy
where setuptools, a C compiler and the Python headers are (saying so either way: without
it kernels launch through ctypes, with the same behaviour), and writes the package's
metadata (kjit-<version>.dist-info, with its RECORD), so that `pip show kjit` and
`pip uninstall kjit` know it. `pip install --no-build-isolation bindings/python` does the
same where pip can build a wheel (setuptools 70.1 or later, or the wheel package).
"""
import argparse
import hashlib
import base64
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        return re.search(r'^version = "([^"]+)"', f.read(), flags=re.M).group(1)


def build_fast_path(pkg_dir):
    """Builds kjit/_fastlaunch.c into `pkg_dir`; returns "" or why it was not built."""
    try:
        import setuptools  # noqa: F401
    except ImportError:
        return "setuptools is not installed"
    with tempfile.TemporaryDirectory() as work:
        shutil.copy(os.path.join(HERE, "setup.py"), work)
        shutil.copy(os.path.join(HERE, "pyproject.toml"), work)
        shutil.copy(os.path.join(HERE, "README.md"), work)
        shutil.copytree(os.path.join(HERE, "kjit"), os.path.join(work, "kjit"))
        r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                           cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        built = [f for f in os.listdir(os.path.join(work, "kjit"))
                 if f.startswith("_fastlaunch") and f.endswith(sysconfig.get_config_var(
                     "EXT_SUFFIX") or ".so")]
        if not built:
            lines = [l for l in r.stdout.splitlines() if "error" in l.lower()]
            return (lines[-1].strip() if lines else "the build failed (status %d)" % r.returncode)
        for f in built:
            shutil.copy(os.path.join(work, "kjit", f), os.path.join(pkg_dir, f))
    return ""


def record_line(root, path):
    with open(path, "rb") as f:
        data = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (os.path.relpath(path, root), digest, len(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="the user's site-packages")
    where.add_argument("--target", help="this directory (put it on PYTHONPATH)")
    args = ap.parse_args()
    if sys.version_info < (3, 8):
        sys.exit("install.py: kjit needs Python 3.8 or later, not %s" % sys.version.split()[0])
    root = (args.target or (site.getusersitepackages() if args.user
                            else sysconfig.get_paths()["purelib"]))
    os.makedirs(root, exist_ok=True)
    pkg = os.path.join(root, "kjit")
    ver = version()
    dist = os.path.join(root, "kjit-%s.dist-info" % ver)
    for old in [pkg] + [os.path.join(root, d) for d in os.listdir(root)
                        if re.match(r"kjit-[^-]+\.dist-info$", d)]:
        shutil.rmtree(old, ignore_errors=True)
    shutil.copytree(os.path.join(HERE, "kjit"), pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.o"))
    why = build_fast_path(pkg)
    os.makedirs(dist)
    with open(os.path.join(dist, "METADATA"), "w", encoding="utf-8") as f:
        f.write("Metadata-Version: 2.1\nName: kjit\nVersion: %s\nRequires-Python: >=3.8\n"
                "Summary: Run-time CUDA C++ kernels compiled with NVRTC and cached "
                "(ctypes binding of libkjit)\n" % ver)
    with open(os.path.join(dist, "INSTALLER"), "w", encoding="utf-8") as f:
        f.write("kjit-install.py\n")
    files = [os.path.join(d, n) for base in (pkg, dist) for d, _, ns in os.walk(base)
             for n in ns]
    with open(os.path.join(dist, "RECORD"), "w", encoding="utf-8") as f:
        for path in sorted(files):
            f.write(record_line(root, path) + "\n")
        f.write("%s,,\n" % os.path.relpath(os.path.join(dist, "RECORD"), root))
    print("installed kjit %s into %s" % (ver, root))
    print("fast launch path (kjit._fastlaunch): %s" % ("built" if not why else
                                                       "not built: " + why))


if __name__ == "__main__":
    main()
