# shellcheck shell=bash
# Sourced by sglang/launch.sh and vllm/launch.sh: start N single-GPU replicas of Spec-o3 on one node (one per GPU),
# wait until each answers /health, print the job-file lines that use them, and stop them all on Ctrl-C / SIGTERM.
#
# Qwen2.5-VL-7B has 28 attention heads, so tensor parallel 8 is impossible: one replica per GPU is the layout.
# Every turn of one inspection must reach the same replica (the prefix cache is per replica): spec-vet hashes the
# candidate id to an endpoint.
#
# The sourcing launcher sets SERVER (its name, for messages and logs) and defines:
#   replica_cmd I       print the command line of replica I (uses the variables parsed below)
#   server_check        exit with a message when the server package is missing or too old (not run by --dry-run)
#   gateway_cmd         (optional) print the command of a sticky router in front of the replicas
# then calls replicas_main "$@".

replicas_usage() {
  cat <<USAGE
Usage: $(basename "$0") --gpus N --model PATH [options]

  --gpus N                 number of replicas, one per GPU (GPU ids 0..N-1, or --gpu-ids)
  --model PATH             local model folder (e.g. a download of Maxwell-Jia/spec-o3-7b)
  --gpu-ids LIST           comma-separated GPU ids (default 0..N-1)
  --port-base P            first port (default 30000); replica i listens on P+i
  --host H                 bind address (default 0.0.0.0)
  --served-name NAME       model name the servers report (default spec-o3-7b)
  --chat-template FILE     default: deploy/chat_template.jinja
  --context-length N       default 34816 (training: prompt 2048 + response 32768 tokens, tool tokens included)
  --mem-fraction F         GPU memory fraction (default 0.85)
  --image-max-pixels N     largest image after resizing (default 1003520; renders are ~0.4 Mpx so never shrunk)
  --max-images N           pictures per conversation the server accepts (default 9: the full view + 8 zooms)
  --gateway PORT           also start a router on PORT with manual (sticky) routing (SGLang's router)
  --log-dir DIR            per-replica logs (default ./${SERVER}-logs)
  --health-timeout S       seconds to wait for /health (default 900)
  --dry-run                print the commands and exit (checks nothing: no model path, GPU or $SERVER check)
  -h, --help               this help
USAGE
}

# shellcheck disable=SC2034  # the variables set here are read by the sourcing launcher's replica_cmd
replicas_parse() {
  gpus="" model="" gpu_ids="" port_base=30000 host=0.0.0.0 served_name=spec-o3-7b
  chat_template="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/chat_template.jinja" context_length=34816
  mem_fraction=0.85 image_max_pixels=1003520 max_images=9 gateway="" log_dir="./${SERVER}-logs"
  health_timeout=900 dry_run=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --gpus) gpus="$2"; shift 2 ;;
      --model) model="$2"; shift 2 ;;
      --gpu-ids) gpu_ids="$2"; shift 2 ;;
      --port-base) port_base="$2"; shift 2 ;;
      --host) host="$2"; shift 2 ;;
      --served-name) served_name="$2"; shift 2 ;;
      --chat-template) chat_template="$2"; shift 2 ;;
      --context-length) context_length="$2"; shift 2 ;;
      --mem-fraction) mem_fraction="$2"; shift 2 ;;
      --image-max-pixels) image_max_pixels="$2"; shift 2 ;;
      --max-images) max_images="$2"; shift 2 ;;
      --gateway) gateway="$2"; shift 2 ;;
      --log-dir) log_dir="$2"; shift 2 ;;
      --health-timeout) health_timeout="$2"; shift 2 ;;
      --dry-run) dry_run=1; shift ;;
      -h|--help) replicas_usage; exit 0 ;;
      *) echo "launch.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
  if [ -z "$gpus" ] || [ -z "$model" ]; then
    echo "launch.sh: --gpus and --model are required (see --help)" >&2
    exit 2
  fi
  case "$gpus" in ''|*[!0-9]*) echo "launch.sh: --gpus must be a positive integer, got '$gpus'" >&2; exit 2 ;; esac
  if [ "$gpus" -lt 1 ]; then echo "launch.sh: --gpus must be at least 1" >&2; exit 2; fi
  if [ -n "$gateway" ] && ! declare -F gateway_cmd >/dev/null; then
    echo "launch.sh: --gateway needs SGLang's router; with $SERVER list the replicas as endpoints instead" >&2
    exit 2
  fi
  if [ -n "$gpu_ids" ]; then
    IFS=, read -r -a ids <<<"$gpu_ids"
    if [ "${#ids[@]}" -ne "$gpus" ]; then
      echo "launch.sh: --gpu-ids lists ${#ids[@]} GPUs but --gpus is $gpus" >&2; exit 2
    fi
  else
    ids=()
    for ((i = 0; i < gpus; i++)); do ids+=("$i"); done
  fi
}

replica_urls() {  # the replicas as the gateway reaches them
  local i
  for ((i = 0; i < gpus; i++)); do printf 'http://127.0.0.1:%s ' "$((port_base + i))"; done
}

job_lines() {
  local fqdn i
  fqdn="$(hostname -f 2>/dev/null || echo localhost)"
  echo "# job-file lines (spec-vet run JOB.yaml) for these $SERVER replicas:"
  echo "engine:"
  echo "  name: openai"
  echo "  model: $served_name"
  if [ -n "$gateway" ]; then
    echo "  gateway: http://$fqdn:$gateway/v1   # sticky by candidate id (X-SMG-Routing-Key)"
  else
    echo "  endpoints:"
    for ((i = 0; i < gpus; i++)); do
      echo "    - http://$fqdn:$((port_base + i))/v1"
    done
  fi
  echo "max_inflight_per_endpoint: 32   # concurrent inspections per replica (whole cluster)"
}

wait_health() {  # $1 = url
  local deadline=$((SECONDS + health_timeout))
  until curl -fsS -o /dev/null "$1/health"; do
    if [ "$SECONDS" -ge "$deadline" ]; then echo "launch.sh: $1 not healthy after ${health_timeout}s (see $log_dir)" >&2; return 1; fi
    sleep 5
  done
  echo "healthy: $1" >&2
}

replicas_main() {
  replicas_parse "$@"
  if [ "$dry_run" = 1 ]; then
    for ((i = 0; i < gpus; i++)); do replica_cmd "$i"; done
    if [ -n "$gateway" ]; then gateway_cmd; fi
    job_lines
    exit 0
  fi
  command -v python3 >/dev/null || { echo "launch.sh: python3 not found" >&2; exit 1; }
  server_check
  [ -d "$model" ] || { echo "launch.sh: model folder '$model' does not exist" >&2; exit 1; }
  [ -f "$chat_template" ] || { echo "launch.sh: chat template '$chat_template' not found" >&2; exit 1; }
  mkdir -p "$log_dir"

  pids=()
  # shellcheck disable=SC2317  # called through trap
  stop_all() {
    trap - INT TERM EXIT
    if [ "${#pids[@]}" -gt 0 ]; then
      echo "stopping ${#pids[@]} process(es)..." >&2
      kill "${pids[@]}" 2>/dev/null || true
      wait "${pids[@]}" 2>/dev/null || true
    fi
  }
  trap stop_all INT TERM EXIT

  local cmd
  for ((i = 0; i < gpus; i++)); do
    cmd="$(replica_cmd "$i")"
    echo "+ $cmd" >&2
    bash -c "exec $cmd" >"$log_dir/replica-$i.log" 2>&1 &
    pids+=("$!")
  done
  for ((i = 0; i < gpus; i++)); do wait_health "http://127.0.0.1:$((port_base + i))"; done

  if [ -n "$gateway" ]; then
    cmd="$(gateway_cmd)"
    echo "+ $cmd" >&2
    bash -c "exec $cmd" >"$log_dir/gateway.log" 2>&1 &
    pids+=("$!")
    wait_health "http://127.0.0.1:$gateway"
  fi

  job_lines
  echo "all replicas up; Ctrl-C stops them" >&2
  wait -n "${pids[@]}" || true
  echo "launch.sh: a server exited; stopping the others (see $log_dir)" >&2
  exit 1
}
