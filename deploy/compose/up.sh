#!/usr/bin/env bash
# Start the 8 replicas with docker compose, wait until healthy, run spec-vet on JOB.yaml, leave replicas up.
#   deploy/compose/up.sh JOB.yaml [--dry-run]      (JOB.yaml is copied to $DATA_DIR/job.yaml)
# --dry-run prints the exact commands and checks nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
job="" dry_run=0
for a in "$@"; do
  case "$a" in
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,4p' "$0"; exit 0 ;;
    *) job="$a" ;;
  esac
done
[ -n "$job" ] || { echo "usage: up.sh JOB.yaml [--dry-run]" >&2; exit 2; }
data_dir="${DATA_DIR:-$here/data}"
cmds=(
  "docker build -t spec-vetting -f $here/Dockerfile $here/../.."
  "mkdir -p $data_dir && cp $job $data_dir/job.yaml"
  "docker compose -f $here/compose.yaml up -d --wait sglang-0 sglang-1 sglang-2 sglang-3 sglang-4 sglang-5 sglang-6 sglang-7"
  "docker compose -f $here/compose.yaml --profile run run --rm spec-vet"
)
# shellcheck source=SCRIPTDIR/../run_or_print.sh
. "$here/../run_or_print.sh"
run_or_print "$dry_run" "${cmds[@]}"
