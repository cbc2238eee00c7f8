#!/usr/bin/env bash
# Start N single-GPU vLLM replicas of Spec-o3 on one node; see ../replicas.sh for what every launcher does.
#
# The flags are the ones the test suite runs vLLM with (tests/test_real_server*.py, on the CPU build):
# --chat-template-content-format openai passes message parts to the template as parts (vLLM's `string` mode joins
# text parts with newlines and puts images first, which moves the picture out of <tool_response>);
# --enable-prompt-tokens-details reports cached_tokens; prefix caching keeps each inspection's earlier turns;
# --limit-mm-per-prompt admits the full view and 8 zooms; --generation-config vllm keeps the checkpoint's
# generation_config.json (Qwen ships repetition_penalty 1.05, top_k 1) out of decoding: spec-vet pins every sampling
# field on every request anyway, as training's rollouts had them. There is no sticky gateway for vLLM here: list the
# replicas as endpoints (spec-vet hashes each candidate to one).
set -euo pipefail
SERVER=vllm
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=../replicas.sh
. "$here/../replicas.sh"

server_check() {
  python3 -c 'import vllm' 2>/dev/null || {
    echo "launch.sh: vllm is not installed in this python (pip install vllm)" >&2
    exit 1
  }
}

replica_cmd() {  # $1 = replica index
  local i="$1" port=$((port_base + $1))
  printf 'CUDA_VISIBLE_DEVICES=%s python3 -m vllm.entrypoints.openai.api_server --model %q --served-model-name %q' \
    "${ids[$i]}" "$model" "$served_name"
  printf ' --host %q --port %s --tensor-parallel-size 1 --chat-template %q --max-model-len %s' \
    "$host" "$port" "$chat_template" "$context_length"
  printf ' --gpu-memory-utilization %s --enable-prefix-caching --enable-prompt-tokens-details' "$mem_fraction"
  printf ' --chat-template-content-format openai --generation-config vllm'
  printf " --limit-mm-per-prompt '{\"image\": %s, \"video\": 0}'" "$max_images"
  printf " --mm-processor-kwargs '{\"max_pixels\": %s}'\n" "$image_max_pixels"
}

replicas_main "$@"
