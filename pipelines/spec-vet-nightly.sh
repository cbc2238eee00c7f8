#!/usr/bin/env bash
# Nightly wrapper around `spec-vet run` for cron or systemd.
#
#   spec-vet-nightly.sh JOB.yaml [extra spec-vet run options...]
#
# - one instance per job at a time (flock on a lock file; a second start exits 75 at once);
# - everything goes to a dated log file under $SPEC_VETTING_LOG_DIR (default ~/.local/state/spec-vetting);
# - a failure also goes to stderr (the FAILED line and the last $SPEC_VETTING_TAIL_LINES [40] lines of the log), so
#   cron mails it to MAILTO and systemd puts it in the journal (and starts the OnFailure= unit); a night that
#   succeeds prints nothing under cron (no mail), and its START/SUCCESS lines under systemd (JOURNAL_STREAM set);
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

# under systemd, stdout is the journal: START/SUCCESS lines go there too; under cron any output is a mail
note() {
  echo "$1" >>"$log_file"
  if [ -n "${JOURNAL_STREAM:-}" ]; then echo "$1"; fi
}

note "$(date -u +%FT%TZ) START $name: $spec_vet run $job --incremental --no-progress $*"
set +e
"$spec_vet" run "$job" --incremental --no-progress "$@" >>"$log_file" 2>&1
rc=$?
set -e
case $rc in
  0) note "$(date -u +%FT%TZ) SUCCESS $name"; exit 0 ;;
  2) line="$(date -u +%FT%TZ) FAILED $name: usage or configuration error (exit 2); fix the job file" ;;
  130|143) line="$(date -u +%FT%TZ) INTERRUPTED $name: exit $rc (SIGINT/SIGTERM); what is done is kept, the next start resumes" ;;
  *) line="$(date -u +%FT%TZ) FAILED $name: exit $rc; what is done is kept, the next start resumes" ;;
esac
echo "$line" >>"$log_file"
{
  echo "$line"
  echo "last lines of $log_file:"
  tail -n "${SPEC_VETTING_TAIL_LINES:-40}" "$log_file"
} >&2
exit "$rc"
