#!/usr/bin/env bash
# Every environment variable is read through the table in common/settings_table.h: no getenv in the
# libraries and tools (but the table and ddp-launch's pass-through of its workers' environment),
# and no DDP_* name spelled as a string of its own ("DDP_X", "DDP_X=", "DDP_X='") outside the table.
# usage: settings_spelled_once_test.sh <source dir>
set -euo pipefail
cd "$1"
dirs=(common rendezvous comm ddp launcher cli bench examples)
fail=0
# Lines of C/C++ sources matching a pattern once their // comments are cut off: file:line:text.
code_matching() {
  find "${dirs[@]}" -name '*.cc' -o -name '*.h' -o -name '*.c' | sort |
    xargs perl -ne 'my $c = $_; $c =~ s{//.*$}{}; print "$ARGV:$.:$_" if $c =~ /'"$1"'/; close ARGV if eof'
}
if hits=$(code_matching '\bgetenv\b' | grep -vE '^(common/settings\.cc|launcher/worker_env\.cc):'); then
  echo "getenv outside common/settings.cc and launcher/worker_env.cc:" >&2
  echo "$hits" >&2
  fail=1
fi
if hits=$(code_matching '"DDP_[A-Z0-9_]+["=\x27]' | grep -vE '^common/settings(_table)?\.(h|cc):|#error'); then
  echo "DDP_* variable names spelled outside common/settings_table.h (use settings::kName.name):" >&2
  echo "$hits" >&2
  fail=1
fi
[ "$fail" = 0 ] && echo "settings spelled once: ok"
exit "$fail"
