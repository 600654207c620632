#!/usr/bin/env bash
# docs/environment.md is what `ddp-launch --print-settings --markdown` prints from the table in
# common/settings.h; this fails when they differ.
# usage: settings_doc_test.sh <ddp-launch> <docs/environment.md>
set -euo pipefail
launch=$1
doc=$2
if ! diff -u "$doc" <(env -i "$launch" --print-settings --markdown); then
  echo "FAIL: $doc differs from the settings table; regenerate it:" >&2
  echo "  build/bin/ddp-launch --print-settings --markdown > docs/environment.md" >&2
  exit 1
fi
# The table with the values in effect names a value that is set.
table=$(env -i DDP_TCP_SOCKET_ALGO=ring "$launch" --print-settings)
grep -q 'DDP_TCP_SOCKET_ALGO .*= ring' <<<"$table" ||
  { echo "FAIL: --print-settings does not show DDP_TCP_SOCKET_ALGO=ring" >&2; exit 1; }
echo "settings doc: ok"
