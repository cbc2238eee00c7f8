#!/usr/bin/env bash
# Start N single-GPU SGLang replicas of Spec-o3 on one node; see ../replicas.sh for what every launcher does.
# With --gateway PORT an sglang router in `manual` policy sits in front and routes on the X-SMG-Routing-Key header,
# which spec-vet sets to the candidate id: every turn of every task of a candidate goes to one replica, whose prefix
# cache holds the candidate's picture (`manual` has no per-key in-flight cap, unlike --routing-key-override; see
# notes/pipeline.md, "Prefix cache").
#
# --mm-process-config (the image size limit) exists from SGLang 0.5.6 on: an older SGLang gets no such flag and
# keeps the checkpoint's own limit, which the renders (about 0.4 Mpx) are far below. --dry-run prints the commands
# for SGLang >= 0.5.6 and checks nothing. --sampling-defaults openai keeps the checkpoint's generation_config.json
# (Qwen ships repetition_penalty 1.05, top_k 1) out of decoding; spec-vet pins every sampling field on every request
# anyway, as training's rollouts had them.
set -euo pipefail
SERVER=sglang
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=../replicas.sh
. "$here/../replicas.sh"

SGLANG_MM_CONFIG_SINCE=0.5.6
mm_flag=1

server_check() {
  local version
  version="$(python3 -c 'import sglang; print(sglang.__version__)' 2>/dev/null)" || {
    echo "launch.sh: sglang is not installed in this python (pip install 'sglang[all]>=$SGLANG_MM_CONFIG_SINCE')" >&2
    exit 1
  }
  if [ "$(printf '%s\n%s\n' "$SGLANG_MM_CONFIG_SINCE" "$version" | sort -V | head -n 1)" != "$SGLANG_MM_CONFIG_SINCE" ]; then
    echo "launch.sh: sglang $version has no --mm-process-config (added in $SGLANG_MM_CONFIG_SINCE): starting without it" >&2
    mm_flag=0
  fi
}

replica_cmd() {  # $1 = replica index
  local i="$1" port=$((port_base + $1))
  printf 'CUDA_VISIBLE_DEVICES=%s python3 -m sglang.launch_server --model-path %q --served-model-name %q' \
    "${ids[$i]}" "$model" "$served_name"
  printf ' --host %q --port %s --tp-size 1 --chat-template %q --context-length %s' \
    "$host" "$port" "$chat_template" "$context_length"
  printf ' --mem-fraction-static %s --enable-metrics --enable-cache-report --sampling-defaults openai' "$mem_fraction"
  if [ "$mm_flag" = 1 ]; then
    printf " --mm-process-config '{\"image\": {\"max_pixels\": %s}}'" "$image_max_pixels"
  fi
  printf '\n'
}

gateway_cmd() {
  local urls
  urls="$(replica_urls)"
  printf 'python3 -m sglang_router.launch_router --host %q --port %s --policy manual --worker-urls %s\n' \
    "$host" "$gateway" "${urls% }"
}

replicas_main "$@"
