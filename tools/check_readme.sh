#!/usr/bin/env bash
# Checks what README.md promises a newcomer on its first screen and about the store:
#  - its first code block is a sh block of exactly two commands (tools/run.sh, tools/test.sh);
#  - it describes results as payload files indexed by SQLite, in one place it links to
#    (the "The cache" section), and nowhere as kept or stored in SQLite itself
#    ("every result in one SQLite database", "memory → SQLite → Redis", "stored in SQLite").
#   tools/check_readme.sh [README.md]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
readme=${1:-$root/README.md}
[ -f "$readme" ] || { echo "check_readme: no such file: $readme" >&2; exit 1; }
python3 - "$readme" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
problems = []
blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
if not blocks:
    problems.append("no code block")
else:
    lang, body = blocks[0]
    cmds = [l for l in body.splitlines() if l.strip() and not l.strip().startswith("#")]
    if lang != "sh" or len(cmds) != 2 or not all(c.startswith("bash tools/") for c in cmds):
        problems.append("the first code block is not the two commands (bash tools/run.sh, "
                        "bash tools/test.sh): %r" % (cmds,))
flat = re.sub(r"\s+", " ", text)
for pattern in [r"(every|each) result in one SQLite", r"→ SQLite →",
                r"stored in SQLite", r"(keeps|keep|stores|store) (every|each|all|the) "
                r"(results?|entries|kernels) in (one |an |the )?SQLite"]:
    m = re.search(pattern, flat)
    if m:
        problems.append("the store is described as SQLite itself: '%s'" % m.group(0))
if "(#the-cache)" not in text or "## The cache" not in text:
    problems.append("no link to the store's description (## The cache)")
if not re.search(r"payload files?", flat.split("## ")[0]):
    problems.append("the first paragraph does not say results live in payload files")
for p in problems:
    print("check_readme: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
echo "check_readme: README.md's first screen and store description are as documented"
