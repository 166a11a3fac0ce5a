"""The compiled launch path (kjit/_fastlaunch.c) declares its own copies of
kjit_launch_config, of the DLPack structs and of the argument kinds. These tests read its
source and check each copy against the one it mirrors: the C header, the ctypes
structures of _lib.py and _arrays.py, and the numbers of _kernel.py. No build needed."""
import ctypes
import os
import re
import unittest

from _support import kjit  # noqa: F401  (puts the package on the path)
from kjit import _arrays, _kernel, _lib

HERE = os.path.dirname(os.path.abspath(__file__))
FAST_C = os.path.join(HERE, "..", "kjit", "_fastlaunch.c")
# The header the library was built from: the installed one where the tests run against an
# install (KJIT_INCLUDE_DIR), else the checkout's.
INCLUDE = os.environ.get("KJIT_INCLUDE_DIR") or os.path.join(HERE, "..", "..", "..", "include")
KERNEL_H = os.path.join(INCLUDE, "kjit", "kernel.h")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _struct_fields(text, closing_name):
    """[(type, name, count)] of the `typedef struct ... { ... } closing_name;` in `text`."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    m = re.search(r"typedef struct[^{};]*\{([^{}]*)\}\s*" + closing_name + r"\s*;", text)
    if m is None:
        raise AssertionError("no struct %s found" % closing_name)
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", m.group(1), flags=re.S)
    fields = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        d = re.fullmatch(r"(.+?)\s*(\**)\s*(\w+)\s*(?:\[(\d+)\])?", decl, re.S)
        if d is None:
            raise AssertionError("unread field %r of %s" % (decl, closing_name))
        fields.append((d.group(1).strip() + d.group(2), d.group(3), int(d.group(4) or 1)))
    return fields


_CTYPES = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32, "int": ctypes.c_int,
           "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16, "uint64_t": ctypes.c_uint64,
           "int64_t*": ctypes.c_void_p, "void*": ctypes.c_void_p}


def _ctypes_layout(struct):
    """[(name, offset, size)] of a ctypes structure."""
    return [(n, getattr(struct, n).offset, getattr(struct, n).size) for n, *_ in struct._fields_]


class LaunchConfig(unittest.TestCase):
    def test_fastlaunch_copy_matches_header(self):
        header = _struct_fields(_read(KERNEL_H), "kjit_launch_config")
        copy = _struct_fields(_read(FAST_C), "launch_config")
        self.assertEqual(copy, header)

    def test_ctypes_structure_matches_header(self):
        header = _struct_fields(_read(KERNEL_H), "kjit_launch_config")
        py = _lib.LaunchConfigStruct
        self.assertEqual([f[0] for f in py._fields_], [name for _, name, _ in header])
        for (ctype, name, count), (pname, ptype) in zip(header, py._fields_):
            want = _CTYPES[ctype] * count if count > 1 else _CTYPES[ctype]
            self.assertEqual(ctypes.sizeof(ptype), ctypes.sizeof(want), name)

    def test_fastlaunch_size_assert_matches_ctypes(self):
        m = re.search(r"sizeof\(launch_config\)\s*==\s*(\d+)", _read(FAST_C))
        self.assertIsNotNone(m)
        self.assertEqual(int(m.group(1)), ctypes.sizeof(_lib.LaunchConfigStruct))


class DLPack(unittest.TestCase):
    def _c_layout(self, fields):
        """[(name, offset, size)] of C fields laid out with natural alignment."""
        class S(ctypes.Structure):
            _fields_ = [(n, _CTYPES[t] * c if c > 1 else _CTYPES[t]) for t, n, c in fields]
        return S, [(n, getattr(S, n).offset, getattr(S, n).size) for _, n, _ in fields]

    def test_dl_tensor_matches_ctypes(self):
        c, layout = self._c_layout(_struct_fields(_read(FAST_C), "dl_tensor"))
        py = _arrays.DLTensor
        self.assertEqual(ctypes.sizeof(c), ctypes.sizeof(py))
        self.assertEqual(layout[0][1:], (py.data.offset, py.data.size))
        self.assertEqual(dict((n, o) for n, o, _ in layout)["byte_offset"],
                         py.byte_offset.offset)
        self.assertEqual(dict((n, o) for n, o, _ in layout)["shape"], py.shape.offset)
        self.assertEqual(dict((n, o) for n, o, _ in layout)["strides"], py.strides.offset)

    def test_versioned_tensor_offset_matches_ctypes(self):
        text = _read(FAST_C)
        fields = _struct_fields(text, "dl_managed_tensor_versioned")
        self.assertEqual(fields[-1][:2], ("dl_tensor", "tensor"))
        c, layout = self._c_layout(fields[:-1] + [("void*", "tensor", 1)])
        py = _arrays.DLManagedTensorVersioned
        names = [n for n, *_ in py._fields_]
        tensor = [n for n in names if "tensor" in n][-1]
        self.assertEqual(dict((n, o) for n, o, _ in layout)["tensor"],
                         getattr(py, tensor).offset)


class ArgumentKinds(unittest.TestCase):
    def _c_kinds(self):
        text = _read(FAST_C)
        m = re.search(r"enum\s*\{([^}]*KIND_LIMIT[^}]*)\}", text, re.S)
        self.assertIsNotNone(m)
        body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
        return {n: int(v) for n, v in re.findall(r"KIND_(\w+)\s*=\s*(\d+)", body)}

    def test_python_kinds_match_c(self):
        c = self._c_kinds()
        py = {name[3:]: getattr(_kernel, name) for name in dir(_kernel)
              if re.fullmatch(r"_K_[A-Z_]+", name) and isinstance(getattr(_kernel, name), int)}
        py.update({k.upper(): v for k, v in _kernel._K_POINTERS.items()})
        self.assertGreaterEqual(len(py), 11)
        for name, value in py.items():
            self.assertIn(name, c, "_kernel._K_%s has no KIND_%s in _fastlaunch.c" % (name, name))
            self.assertEqual(value, c[name], "KIND_%s" % name)
        # Kinds the C side knows that _kernel never hands out: only FLOAT (floats are
        # decided in C from the object itself).
        self.assertEqual(set(c) - set(py), {"FLOAT"})

    def test_kinds_fit_the_low_byte(self):
        # _kernel ORs the item size in from bit 8 on.
        self.assertTrue(all(v < 256 for v in self._c_kinds().values()))


if __name__ == "__main__":
    unittest.main()
