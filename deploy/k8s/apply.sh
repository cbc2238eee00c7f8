#!/usr/bin/env bash
# Apply the Kubernetes manifests: volumes, the replicas (+ chat template ConfigMap), the Dask cluster, the run.
#   deploy/k8s/apply.sh JOB.yaml [--namespace NS] [--server sglang|vllm] [--nightly] [--dry-run]
# --nightly: the CronJob (cronjob.yaml, 02:30 every night) instead of a one-off Job. --dry-run prints the exact
# kubectl commands and checks nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
job="" ns=default dry_run=0 run_manifest=job.yaml server=sglang
while [ $# -gt 0 ]; do
  case "$1" in
    --namespace) ns="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --nightly) run_manifest=cronjob.yaml; shift ;;
    --server) server="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    -*) echo "apply.sh: unknown option '$1'" >&2; exit 2 ;;
    *) job="$1"; shift ;;
  esac
done
[ -n "$job" ] || { echo "usage: apply.sh JOB.yaml [--namespace NS] [--server sglang|vllm] [--nightly] [--dry-run]" >&2; exit 2; }
case "$server" in
  sglang|vllm) ;;
  *) echo "apply.sh: --server must be sglang or vllm, not '$server'" >&2; exit 2 ;;
esac

cmds=(
  "kubectl -n $ns apply -f $here/storage.yaml"
  "kubectl -n $ns create configmap spec-o3-chat-template --from-file=chat_template.jinja=$here/../chat_template.jinja --dry-run=client -o yaml | kubectl -n $ns apply -f -"
  "kubectl -n $ns apply -f $here/$server.yaml"
  "kubectl -n $ns rollout status statefulset/spec-o3 --timeout=30m"
  "kubectl -n $ns apply -f $here/dask.yaml"
  "kubectl -n $ns create configmap spec-vet-job --from-file=job.yaml=$job --dry-run=client -o yaml | kubectl -n $ns apply -f -"
  "kubectl -n $ns apply -f $here/$run_manifest"
)
# shellcheck source=SCRIPTDIR/../run_or_print.sh
. "$here/../run_or_print.sh"
run_or_print "$dry_run" "${cmds[@]}"
