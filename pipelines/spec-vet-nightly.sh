#!/usr/bin/env bash
# Nightly wrapper around `spec-vet run` for cron or systemd.
#
#   spec-vet-nightly.sh JOB.yaml [extra spec-vet run options...]
#
# - one instance per job at a time (flock on a lock file; a second start exits 75 at once);
# - everything goes to a dated log file under $SPEC_VETTING_LOG_DIR (default ~/.local/state/spec-vetting);
# - incremental mode: pairs vetted on earlier nights are skipped; an unfinished run of the same inputs is resumed;
# - exit code: 0 finished (unreadable spectra are ERROR rows, not failures) or nothing to vet (empty folder),
#   1 the run could not finish (rerun) or its ERROR fraction is above max_error_rate, 2 usage or configuration
#   error, 75 another instance is running, 130/143 interrupted by SIGINT/SIGTERM (the next start resumes).
#
# Environment: SPEC_VET (the spec-vet command, default: spec-vet on PATH), SPEC_VETTING_LOG_DIR,
# SPEC_VETTING_API_KEY (or the variable the job's engine.api_key_env names).
set -euo pipefail

if [ "$#" -lt 1 ]; then
  echo "usage: $0 JOB.yaml [spec-vet run options...]" >&2
  exit 2
fi
job=$1
shift
if [ ! -r "$job" ]; then
  echo "$0: cannot read job file $job" >&2
  exit 2
fi

spec_vet=${SPEC_VET:-spec-vet}
log_dir=${SPEC_VETTING_LOG_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/spec-vetting}
mkdir -p "$log_dir"
name=$(basename "$job" .yaml)
log_file="$log_dir/$name-$(date +%Y%m%d).log"
lock_file="$log_dir/$name.lock"

exec 9>"$lock_file"
if ! flock -n 9; then
  echo "$(date -u +%FT%TZ) $name: another nightly run holds $lock_file; not starting" | tee -a "$log_file" >&2
  exit 75
fi

echo "$(date -u +%FT%TZ) START $name: $spec_vet run $job --incremental --no-progress $*" >>"$log_file"
set +e
"$spec_vet" run "$job" --incremental --no-progress "$@" >>"$log_file" 2>&1
rc=$?
set -e
case $rc in
  0) echo "$(date -u +%FT%TZ) SUCCESS $name" >>"$log_file" ;;
  2) echo "$(date -u +%FT%TZ) FAILED $name: usage or configuration error (exit 2); fix the job file" >>"$log_file" ;;
  130|143) echo "$(date -u +%FT%TZ) INTERRUPTED $name: exit $rc (SIGINT/SIGTERM); what is done is kept, the next start resumes" >>"$log_file" ;;
  *) echo "$(date -u +%FT%TZ) FAILED $name: exit $rc; what is done is kept, the next start resumes" >>"$log_file" ;;
esac
exit "$rc"
