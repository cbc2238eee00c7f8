# shellcheck shell=bash
# Sourced by the deploy scripts. run_or_print DRY_RUN CMD...: run each command in order (echoing it to stderr),
# or, with DRY_RUN=1, print the exact commands and run nothing.
run_or_print() {
  local dry="$1" c
  shift
  for c in "$@"; do
    if [ "$dry" = 1 ]; then echo "$c"; else echo "+ $c" >&2; bash -c "$c"; fi
  done
}
