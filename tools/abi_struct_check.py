#!/usr/bin/env python3
"""Checks that every public kjit_* struct of an ABI baseline only grew at its end.

    abi_struct_check.py BASELINE.abi CURRENT.abi

Both files are abidw XML. kjit's public structs start with a struct_size field and may
gain members at their end (callers pass the size they know). For each kjit_* struct of
the baseline this checks that the current one still has every old member at the same
offset with the same type, and is not smaller. Exit status 1 with a list of problems.
"""
import sys
import xml.etree.ElementTree as ET


def load(path):
    root = ET.parse(path).getroot()
    by_id = {}
    structs = {}
    for el in root.iter():
        tid = el.get("id")
        if tid:
            by_id[tid] = el
        if el.tag in ("class-decl", "union-decl") and el.get("name", "").startswith("kjit_") \
                and el.get("is-declaration-only") != "yes" and el.find("data-member") is not None:
            structs[el.get("name")] = el
    return by_id, structs


def type_name(by_id, tid, depth=0):
    el = by_id.get(tid)
    if el is None or depth > 20:
        return "?" + str(tid)
    tag = el.tag
    if tag in ("type-decl", "class-decl", "union-decl", "enum-decl"):
        return el.get("name", "?")
    if tag == "typedef-decl":
        return el.get("name", "?")
    if tag == "pointer-type-def":
        return type_name(by_id, el.get("type-id"), depth + 1) + "*"
    if tag == "reference-type-def":
        return type_name(by_id, el.get("type-id"), depth + 1) + "&"
    if tag == "qualified-type-def":
        quals = [q for q in ("const", "volatile", "restrict") if el.get(q) == "yes"]
        return " ".join(quals + [type_name(by_id, el.get("type-id"), depth + 1)])
    if tag == "array-type-def":
        dims = "".join("[%s]" % s.get("length", "?") for s in el.findall("subrange"))
        return type_name(by_id, el.get("type-id"), depth + 1) + dims
    if tag == "function-type":
        ret = el.find("return")
        params = [type_name(by_id, p.get("type-id"), depth + 1) for p in el.findall("parameter")]
        rname = type_name(by_id, ret.get("type-id"), depth + 1) if ret is not None else "void"
        return "%s(*)(%s)" % (rname, ", ".join(params))
    return tag


def members(by_id, struct):
    out = []
    for dm in struct.findall("data-member"):
        var = dm.find("var-decl")
        if var is None:
            continue
        out.append((var.get("name"), int(dm.get("layout-offset-in-bits", "0")),
                    type_name(by_id, var.get("type-id"))))
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    old_ids, old_structs = load(sys.argv[1])
    new_ids, new_structs = load(sys.argv[2])
    problems = []
    for name, old in sorted(old_structs.items()):
        new = new_structs.get(name)
        if new is None:
            continue  # not reachable any more: abidiff reports what that means
        old_size = int(old.get("size-in-bits", "0"))
        new_size = int(new.get("size-in-bits", "0"))
        if new_size < old_size:
            problems.append("%s shrank from %d to %d bits" % (name, old_size, new_size))
        current = {m[0]: m for m in members(new_ids, new)}
        for m_name, offset, tname in members(old_ids, old):
            m = current.get(m_name)
            if m is None:
                problems.append("%s: member '%s' was removed" % (name, m_name))
            elif m[1] != offset:
                problems.append("%s: member '%s' moved from bit %d to bit %d" % (name, m_name, offset, m[1]))
            elif m[2] != tname:
                problems.append("%s: member '%s' changed type from '%s' to '%s'" % (name, m_name, tname, m[2]))
        first = members(new_ids, new)
        if first and first[0][0] != "struct_size":
            problems.append("%s: does not start with struct_size, so it cannot grow" % name)
        for m_name, offset, _ in first:
            if m_name not in {m[0] for m in members(old_ids, old)} and offset < old_size:
                problems.append("%s: new member '%s' is not at the end (bit %d < old size %d)"
                                % (name, m_name, offset, old_size))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
