#!/usr/bin/env bash
# Fails unless every line of every c, cuda and cmake snippet in docs/tutorial.md appears in
# the tutorial's program (examples/tutorial/), so the tutorial shows code that is built and
# run (by tools/test_install.sh) rather than code that only looks right.
#   tools/check_tutorial.sh [TUTORIAL.md [EXAMPLE_DIR]]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
doc=${1:-$root/docs/tutorial.md}
dir=${2:-$root/examples/tutorial}
[ -f "$doc" ] || { echo "check_tutorial: no such file: $doc" >&2; exit 1; }
[ -d "$dir" ] || { echo "check_tutorial: no such directory: $dir" >&2; exit 1; }
perl -e '
  my ($doc, $dir) = @ARGV;
  sub trim { my $s = shift; $s =~ s/^\s+|\s+$//g; return $s; }
  my %have;
  for my $f (glob("$dir/*")) {
    next unless -f $f;
    open(my $fh, "<", $f) or die "$f: $!\n";
    $have{trim($_)} = 1 while <$fh>;
  }
  open(my $fh, "<", $doc) or die "$doc: $!\n";
  my ($in, $checked, $snippets, @missing) = (0, 0, 0);
  while (my $line = <$fh>) {
    if (!$in && $line =~ /^```(c|cuda|cmake)\s*$/) { $in = 1; ++$snippets; next; }
    if ($in && $line =~ /^```\s*$/) { $in = 0; next; }
    next unless $in;
    my $t = trim($line);
    next if $t eq "";
    ++$checked;
    push @missing, "$.: $t" unless $have{$t};
  }
  if (@missing) {
    print STDERR "check_tutorial: lines of $doc not found in $dir:\n";
    print STDERR "  $_\n" for @missing;
    exit 1;
  }
  die "check_tutorial: no c, cuda or cmake snippet in $doc\n" unless $snippets;
  print "check_tutorial: $checked lines in $snippets snippets found in the program\n";
' "$doc" "$dir"
