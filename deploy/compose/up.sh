#!/usr/bin/env bash
# Start the 8 replicas with docker compose, wait until healthy, run spec-vet on JOB.yaml, leave replicas up.
#   deploy/compose/up.sh JOB.yaml [--server sglang|vllm] [--dry-run]      (JOB.yaml is copied to $DATA_DIR/job.yaml)
# --server vllm adds compose.vllm.yaml (the same replicas served by vLLM). --dry-run prints the exact commands and
# checks nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
job="" dry_run=0 server=sglang
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1; shift ;;
    --server) server="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) job="$1"; shift ;;
  esac
done
[ -n "$job" ] || { echo "usage: up.sh JOB.yaml [--server sglang|vllm] [--dry-run]" >&2; exit 2; }
case "$server" in
  sglang) files="-f $here/compose.yaml" ;;
  vllm) files="-f $here/compose.yaml -f $here/compose.vllm.yaml" ;;
  *) echo "up.sh: --server must be sglang or vllm, not '$server'" >&2; exit 2 ;;
esac
data_dir="${DATA_DIR:-$here/data}"
cmds=(
  "docker build -t spec-vetting -f $here/Dockerfile $here/../.."
  "mkdir -p $data_dir && cp $job $data_dir/job.yaml"
  "docker compose $files up -d --wait replica-0 replica-1 replica-2 replica-3 replica-4 replica-5 replica-6 replica-7"
  "docker compose $files --profile run run --rm spec-vet"
)
# shellcheck source=SCRIPTDIR/../run_or_print.sh
. "$here/../run_or_print.sh"
run_or_print "$dry_run" "${cmds[@]}"
