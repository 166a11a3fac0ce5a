"""Builds the optional compiled launch path, kjit._fastlaunch (kjit/_fastlaunch.c), where a
C compiler and the Python headers (Debian: python3-dev) are available. Without them the
build goes on without it and the package launches through ctypes, which behaves the same
(``kjit.launch_path()`` says which is in use). Everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("kjit._fastlaunch", ["kjit/_fastlaunch.c"], optional=True)])
