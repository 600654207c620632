# bash completion for ddp-launch (installed to share/bash-completion/completions/ddp-launch).
# Flags come from `ddp-launch --help` itself, so this never falls behind the program; values
# are completed for the flags that take a fixed set, files for configs and the program.
_ddp_launch_flags() {
  "$1" --help 2>/dev/null | grep -oE '(^|[ ,])--[a-z][a-z0-9_-]*' | sed 's/^[ ,]//' | sort -u
}

# The flags that take no value: in --help, their names are not followed by a TYPE in capitals.
_ddp_launch_switches() {
  "$1" --help 2>/dev/null | awk '/^  -/ { if ($2 !~ /^[A-Z][A-Z_=.]*$/) { n = split($1, names, ","); for (i = 1; i <= n; i++) print names[i] } }'
}

_ddp_launch() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=
  [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
  COMPREPLY=()
  # After the program (the first word that is not a flag or a flag's value), complete files only.
  local i word expecting=0 switches
  switches=" $(_ddp_launch_switches "${COMP_WORDS[0]}" | tr '\n' ' ') "
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [ "$word" = -- ]; then COMPREPLY=($(compgen -f -- "$cur")); return; fi
    case $word in
      --*=*) expecting=0 ;;
      -*) if [[ $switches == *" $word "* ]]; then expecting=0; else expecting=1; fi ;;
      *) if [ $expecting = 1 ]; then expecting=0; else COMPREPLY=($(compgen -f -- "$cur")); return; fi ;;
    esac
  done
  case $prev in
    --rdzv-backend|--rdzv_backend) COMPREPLY=($(compgen -W "static tcp c10d file multicast etcd etcd-v2 etcd-v3" -- "$cur")); return ;;
    --nproc-per-node|--nproc_per_node) COMPREPLY=($(compgen -W "auto gpu cpu 1 2 4 8" -- "$cur")); return ;;
    --cpu-bind|--cpu_bind) COMPREPLY=($(compgen -W "none cores numa" -- "$cur")); return ;;
    -r|--redirects|-t|--tee) COMPREPLY=($(compgen -W "0 1 2 3" -- "$cur")); return ;;
    --config|--log-dir|--log_dir) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_ddp_launch_flags "${COMP_WORDS[0]}")" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _ddp_launch ddp-launch
