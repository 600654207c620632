#!/usr/bin/env bash
# The bash completion of ddp-launch (scripts/completion/ddp-launch.bash), run as bash runs it:
# flags from --help, values of the flags with a fixed set, files after the program.
# usage: completion_test.sh <ddp-launch> <completion script>
set -euo pipefail
launch=$1
# shellcheck source=/dev/null
source "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
touch train.py data.bin

complete_line() {  # words... : COMPREPLY for the last word
  COMP_WORDS=("$launch" "$@")
  COMP_CWORD=$#
  _ddp_launch
  printf '%s\n' "${COMPREPLY[@]}"
}
expect() {  # what, needle, haystack
  grep -qx -- "$2" <<< "$3" || { echo "FAIL: $1: '$2' not offered; got: $(echo $3)"; exit 1; }
}
refuse() {
  if grep -qx -- "$2" <<< "$3"; then echo "FAIL: $1: '$2' offered"; exit 1; fi
}

out=$(complete_line --npr)
expect "a flag from its prefix" --nproc-per-node "$out"
refuse "only matching flags" --nnodes "$out"
expect "every flag of --help" --rdzv-backend "$(complete_line --rdzv)"
expect "rendezvous backends" multicast "$(complete_line --rdzv-backend m)"
expect "nproc values" auto "$(complete_line --nproc-per-node a)"
expect "cpu binding" numa "$(complete_line --cpu-bind n)"
expect "the program" train.py "$(complete_line --nnodes 1 tr)"
expect "after a switch, the program" train.py "$(complete_line --standalone tr)"
out=$(complete_line --standalone train.py --)
refuse "the program's own flags are not ours" --nproc-per-node "$out"
expect "the program's arguments are files" data.bin "$(complete_line ./train.py d)"
echo "completion: ok"
