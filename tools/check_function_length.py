#!/usr/bin/env python3
"""Fails when a function in the given source tree is longer than the limit.

A function's length is counted from the first line of its signature to the line of its
closing brace. Bodies are found by matching braces after comments, string and character
literals and preprocessor lines are blanked, so the scan needs no compiler. Functions
listed in the allowlist (one `path:function` per line, relative to the repository root,
`#` comments allowed) may be longer for now; an entry that is no longer too long, or no
longer exists, fails too, so that the list only shrinks.

Usage: check_function_length.py [--root DIR] [--limit N] [--allow FILE] DIR...
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hpp")
# Blocks that hold declarations rather than statements: functions defined inside them count.
TYPE_KEYWORDS = ("namespace", "class", "struct", "union", "enum", "extern")
CONTROL_KEYWORDS = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return"}
NOT_NAMES = {"void", "int", "bool", "char", "auto", "const", "unsigned", "long", "double",
             "float", "size_t", "static", "inline", "constexpr", "noexcept", "decltype"}


def blank(text):
    """Returns `text` with comments, literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True

    def spaces(chunk):
        return "".join(ch if ch == "\n" else " " for ch in chunk)

    while i < n:
        ch = text[i]
        if at_line_start and ch == "#":
            j = i
            while j < n:  # a directive runs to an unescaped newline, comments included
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                j += 1
            out.append(spaces(text[i:j]))
            i = j
            continue
        if ch == "\n":
            at_line_start = True
            out.append(ch)
            i += 1
            continue
        if not ch.isspace():
            at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(spaces(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(spaces(text[i:j]))
            i = j
        elif ch == "R" and text.startswith('"', i + 1) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            paren = text.find("(", i + 2)
            delim = text[i + 2:paren]
            end = text.find(")" + delim + '"', paren)
            j = n if end < 0 else end + len(delim) + 2
            out.append(spaces(text[i:j]))
            i = j
        elif ch in "\"'":
            if ch == "'" and i and (text[i - 1].isalnum()):  # digit separator: 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            out.append(spaces(text[i:j + 1]))
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def function_name(header):
    """The name of the function whose signature is `header`, or None if it is not one."""
    h = " ".join(header.split())
    if not h.endswith(")") and not re.search(
            r"\)\s*((const|noexcept|override|final|mutable|volatile|&|&&)\s*)*"
            r"(->\s*[\w:<>,\s\*&]+)?$", h) and not re.search(r"\)\s*:\s*.*\)$", h):
        # Constructors with an initialiser list end with ")" or "}" of their last member.
        if not re.search(r"\)\s*:\s*", h):
            return None
    first_word = re.match(r"[\w:]*", h).group(0)
    if first_word in CONTROL_KEYWORDS or first_word in TYPE_KEYWORDS:
        return None
    if "=" in h.split("(")[0]:  # a lambda or initialiser assigned to a variable
        return None
    depth = 0
    for pos, ch in enumerate(h):
        if ch == "(" and depth == 0:
            before = h[:pos].rstrip()
            m = re.search(r"(operator\s*\S+|~?[\w:]+)$", before)
            name = m.group(1) if m else ""
            if name.split("::")[-1] in NOT_NAMES or not name:
                inner = re.match(r"\(\s*([\w:]+)\s*\)", h[pos:])  # void(name)(args)
                name = inner.group(1) if inner else ""
            if name in CONTROL_KEYWORDS or not name:
                return None
            return name
        if ch == "<":
            depth += 0  # template arguments hold no parameter list at this level
    return None


def functions(path):
    """Yields (name, first_line, last_line) for each function defined in `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank(f.read())
    stack = []  # kinds of the open blocks: "scope", "function", "other", "init"
    header_start = 0
    func = None
    i = 0
    for i, ch in enumerate(text):
        if ch == "{":
            inside_function = "function" in stack
            header = text[header_start:i]
            kind = "other"
            if stack and stack[-1] == "init":
                kind = "init"  # braces nested in an initialiser
            elif not inside_function:
                stripped = " ".join(header.split())
                words = re.findall(r"[A-Za-z_]\w*", stripped)
                if words and words[0] == "template":
                    stripped = re.sub(r"^template\s*<.*?>\s*", "", stripped)
                    words = re.findall(r"[A-Za-z_]\w*", stripped)
                if any(w in TYPE_KEYWORDS for w in words[:3]) and "(" not in stripped.split("{")[0].split(":")[0]:
                    kind = "scope"
                elif stripped.endswith(("=", ",")) or (
                        re.search(r"[\w\]>]$", stripped)
                        and not re.search(r"\b(const|noexcept|override|final|mutable)$", stripped)
                        and not re.search(r"\)[\w\s&]*->", stripped)):  # trailing return type
                    kind = "init"  # a brace initialiser: `x_{1}`, `= {...}`
                else:
                    name = function_name(stripped)
                    if name:
                        kind = "function"
                        first = header_start + (len(header) - len(header.lstrip()))
                        func = (name, text.count("\n", 0, first) + 1)
            stack.append(kind)
            if kind != "init":  # an initialiser stays part of the header it is in
                header_start = i + 1
        elif ch == "}":
            kind = stack.pop() if stack else "other"
            if kind == "function" and "function" not in stack and func:
                yield func[0], func[1], text.count("\n", 0, i) + 1
                func = None
            if kind != "init":
                header_start = i + 1
        elif ch == ";":
            header_start = i + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="paths are reported relative to it")
    parser.add_argument("--limit", type=int, default=150)
    parser.add_argument("--allow", help="allowlist file")
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args()

    allowed = set()
    if args.allow:
        with open(args.allow, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    allowed.add(line)

    found = {}
    for d in args.dirs:
        for dirpath, _, files in os.walk(os.path.join(args.root, d)):
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, args.root)
                    for fn, first, last in functions(path):
                        key = f"{rel}:{fn}"
                        length = last - first + 1
                        if length > found.get(key, (0, 0))[0]:
                            found[key] = (length, first)

    failures = []
    for key, (length, first) in sorted(found.items()):
        if length > args.limit and key not in allowed:
            path, fn = key.split(":", 1)
            failures.append(f"{path}:{first}: {fn} is {length} lines (limit {args.limit}): "
                            "split it by step")
    for key in sorted(allowed):
        length = found.get(key, (0, 0))[0]
        if length <= args.limit:
            why = "no longer exists" if key not in found else f"is {length} lines now"
            failures.append(f"{args.allow}: {key} {why}: remove it from the allowlist")
    for f in failures:
        print(f)
    if not failures:
        print(f"every function is at most {args.limit} lines "
              f"({len(allowed)} allowlisted, {len(found)} checked)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
