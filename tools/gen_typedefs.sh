#!/usr/bin/env bash
# Writes include/kjit/kjit_typedefs.h: a function-pointer type PFN_<name> for every function
# the public headers declare, for programs that dlopen() libkjit and resolve the functions
# with dlsym(). The types are derived from the prototypes, so they cannot drift from them.
#   tools/gen_typedefs.sh           rewrite the header
#   tools/gen_typedefs.sh --check   fail if the header is not what this script writes
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/include/kjit/kjit_typedefs.h
# The headers in the order the umbrella header includes them.
headers=$(sed -n 's/^#include "\([a-z_]*\)\.h"$/\1/p' "$root/include/kjit/kjit.h")
[ -n "$headers" ] || { echo "gen_typedefs: no #include in include/kjit/kjit.h" >&2; exit 1; }
generate() {
  cat <<'HEAD'
/*
 * kjit — function-pointer types of every exported function, for programs that load
 * libkjit at run time (dlopen + dlsym/dlvsym) instead of linking to it:
 *
 *   PFN_kjit_compile compile = (PFN_kjit_compile)dlsym(lib, "kjit_compile");
 *
 * PFN_<name> is the type of &<name>. Generated from the prototypes by
 * tools/gen_typedefs.sh (do not edit by hand); a test checks that every exported function
 * has its type and that each type matches its prototype.
 */
#ifndef KJIT_TYPEDEFS_H
#define KJIT_TYPEDEFS_H

#include "kjit.h"

#ifdef __cplusplus
extern "C" {
#endif
HEAD
  for h in $headers; do
    perl -0777 -se '
      my $src = do { local $/; <STDIN> };
      $src =~ s{/\*.*?\*/}{}gs;
      $src =~ s{//[^\n]*}{}g;
      my @out;
      while ($src =~ /\bKJIT_EXPORT\s+([^;{}#]*?)\b(kjit_\w+)\s*\(([^;]*?)\)\s*;/gs) {
        my ($ret, $name, $params) = ($1, $2, $3);
        for ($ret, $params) { s/\s+/ /g; s/^ //; s/ $//; s/\( /(/g; s/ \)/)/g; }
        my $line = "typedef $ret (*PFN_$name)($params);";
        if (length($line) > 96) {
          # Wrap after commas, continuation lines indented under the opening parenthesis.
          my $indent = " " x (length("typedef $ret (*PFN_$name)("));
          my @parts = split /, /, $params;
          my ($text, $cur) = ("", "typedef $ret (*PFN_$name)(");
          for my $i (0 .. $#parts) {
            my $piece = $parts[$i] . ($i < $#parts ? "," : ");");
            if (length($cur) + length($piece) + 1 > 96 && $cur !~ /\($/) {
              $text .= "$cur\n"; $cur = $indent . $piece;
            } else {
              $cur .= ($cur =~ /\($/ ? "" : " ") . $piece;
            }
          }
          $line = $text . $cur;
        }
        push @out, $line;
      }
      if (@out) { print "\n/* ---- $h.h */\n\n", join("\n", @out), "\n"; }
    ' -- -h="$h" <"$root/include/kjit/$h.h"
  done
  cat <<'TAIL'

#ifdef __cplusplus
}
#endif

#endif /* KJIT_TYPEDEFS_H */
TAIL
}
if [ "${1:-}" = --check ]; then
  if ! diff -u "$out" <(generate) >&2; then
    echo "gen_typedefs: $out is out of date; run tools/gen_typedefs.sh" >&2
    exit 1
  fi
  echo "gen_typedefs: $out is up to date"
else
  generate >"$out"
fi
