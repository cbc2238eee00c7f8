#!/usr/bin/env bash
# Install torch's CPU build into a virtualenv, the way PyTorch documents it for CPU-only machines
# (https://pytorch.org/get-started/locally/):
#     pip install torch==VERSION --index-url https://download.pytorch.org/whl/cpu
# when that index answers within TORCH_INDEX_TIMEOUT seconds (default 5); when it does not (an offline machine, a
# closed network), at once a plain `pip install torch==VERSION`: a wheel pip's own configuration finds (find-links,
# a local index) or PyPI, whose Linux x86_64 wheel is the CUDA build.
#
#   tools/install-torch.sh PYTHON [VERSION] [--dry-run]
#
# --dry-run probes the index and prints the pip command it would run. Environment: TORCH_INDEX_URL (default the
# CPU index above), TORCH_INDEX_TIMEOUT (seconds).
set -euo pipefail

dry_run=0
args=()
for a in "$@"; do
  case "$a" in
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
if [ "${#args[@]}" -lt 1 ]; then
  echo "usage: install-torch.sh PYTHON [VERSION] [--dry-run]" >&2
  exit 2
fi
py=${args[0]}
version=${args[1]:-2.13.0}
index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
wait_s=${TORCH_INDEX_TIMEOUT:-5}

# One GET of the index's torch page. urllib's timeout covers connect and read, not a name lookup that hangs, so
# timeout(1) bounds the whole probe where it exists.
probe=("$py" -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=float(sys.argv[2])).close()' "$index" "$wait_s")
if command -v timeout >/dev/null 2>&1; then
  probe=(timeout "$((${wait_s%.*} + 2))" "${probe[@]}")
fi

run() {
  if [ "$dry_run" = 1 ]; then printf '%q ' "$@"; echo; else echo "+ $*" >&2; "$@"; fi
}

if "${probe[@]}" >/dev/null 2>&1; then
  echo "install-torch: $index answers: installing the CPU build of torch $version from it" >&2
  if run "$py" -m pip install --index-url "$index" --timeout "$wait_s" "torch==$version"; then
    exit 0
  fi
  echo "install-torch: installing from $index failed; falling back to pip's default indexes" >&2
else
  echo "install-torch: $index did not answer within ${wait_s}s: plain 'pip install torch==$version'" \
       "(a local wheel if pip is configured with one; on Linux x86_64 PyPI's wheel is the CUDA build)" >&2
fi
run "$py" -m pip install "torch==$version"
