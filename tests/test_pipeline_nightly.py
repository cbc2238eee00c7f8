"""pipelines/: the shipped job files validate, the cron wrapper locks, logs and passes exit codes through."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from spec_vetting.pipeline.config import load_job

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"
WRAPPER = PIPELINES / "spec-vet-nightly.sh"


@pytest.mark.parametrize("name", sorted(p.name for p in PIPELINES.glob("*.yaml")))
def test_shipped_job_files_validate(name):
    job = load_job(PIPELINES / name, environ={})
    assert job.candidates and job.out


def test_nightly_job_is_incremental():
    assert load_job(PIPELINES / "lamost-nightly.yaml", environ={}).incremental


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_wrapper_is_shellcheck_clean():
    r = subprocess.run(["shellcheck", str(WRAPPER)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def _fake_spec_vet(tmp_path: Path, rc: int) -> Path:
    fake = tmp_path / "fake-spec-vet"
    fake.write_text(f'#!/usr/bin/env bash\necho "args: $*"\nexit {rc}\n')
    fake.chmod(0o755)
    return fake


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
@pytest.mark.parametrize("rc", [0, 1, 2])
def test_wrapper_logs_and_passes_the_exit_code(tmp_path, rc):
    job = tmp_path / "night.yaml"
    job.write_text("candidates: [x]\nout: y\n")
    env = {**os.environ, "SPEC_VET": str(_fake_spec_vet(tmp_path, rc)), "SPEC_VETTING_LOG_DIR": str(tmp_path / "logs")}
    r = subprocess.run([str(WRAPPER), str(job), "--workers", "2"], env=env, capture_output=True, text=True)
    assert r.returncode == rc
    [log] = (tmp_path / "logs").glob("night-*.log")
    text = log.read_text()
    assert f"args: run {job} --incremental --no-progress --workers 2" in text
    assert " START night" in text
    assert (" SUCCESS night" in text) == (rc == 0) and ("FAILED" in text) == (rc != 0)


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
def test_wrapper_refuses_a_second_instance_and_usage(tmp_path):
    job = tmp_path / "night.yaml"
    job.write_text("candidates: [x]\nout: y\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {**os.environ, "SPEC_VET": str(_fake_spec_vet(tmp_path, 0)), "SPEC_VETTING_LOG_DIR": str(logs)}
    with open(logs / "night.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        r = subprocess.run([str(WRAPPER), str(job)], env=env, capture_output=True, text=True)
    assert r.returncode == 75 and "another nightly run" in r.stderr
    r = subprocess.run([str(WRAPPER)], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
    r = subprocess.run([str(WRAPPER), str(tmp_path / "none.yaml")], env=env, capture_output=True, text=True)
    assert r.returncode == 2


def _night(tmp_path, rc, **env_extra):
    job = tmp_path / "night.yaml"
    job.write_text("candidates: [x]\nout: y\n")
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_STREAM", "INVOCATION_ID")}
    env.update(SPEC_VET=str(_fake_spec_vet(tmp_path, rc)), SPEC_VETTING_LOG_DIR=str(tmp_path / "logs"), **env_extra)
    return subprocess.run([str(WRAPPER), str(job)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
@pytest.mark.parametrize("rc,why", [(1, "the next start resumes"), (2, "configuration error")])
def test_failures_reach_cron_mail_and_the_journal(tmp_path, rc, why):
    """cron mails what a job prints and journald keeps a unit's stderr: a failure must be printed, not only logged."""
    r = _night(tmp_path, rc)
    assert r.returncode == rc
    assert "FAILED night" in r.stderr and why in r.stderr
    assert "last lines of" in r.stderr and "args: run" in r.stderr  # the end of the run's own output
    assert r.stdout == ""


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
def test_a_good_night_prints_nothing_under_cron_and_its_lines_under_systemd(tmp_path):
    r = _night(tmp_path, 0)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""  # cron sends no mail
    r = _night(tmp_path, 0, JOURNAL_STREAM="8:12345")
    assert " START night" in r.stdout and " SUCCESS night" in r.stdout and r.stderr == ""


def _unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file as section -> key -> values (keys may repeat)."""
    out: dict[str, dict[str, list[str]]] = {}
    section = None
    for line in (PIPELINES / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = out.setdefault(line.strip("[]"), {})
            continue
        key, sep, value = line.partition("=")
        assert sep and section is not None, f"{name}: not key=value inside a section: {line!r}"
        section.setdefault(key.strip(), []).append(value.strip())
    return out


def test_systemd_service_has_on_failure_and_the_linger_note():
    service = _unit("spec-vet-nightly.service")
    [on_failure] = service["Unit"]["OnFailure"]
    assert on_failure == "spec-vet-notify@%n.service"
    assert (PIPELINES / "spec-vet-notify@.service").is_file()
    notify = _unit("spec-vet-notify@.service")
    assert notify["Service"]["Type"] == ["oneshot"]
    command = notify["Service"]["ExecStart"][0]
    assert "journalctl --user -u" in command and "mail -s" in command and "logger -p user.err" in command
    assert service["Service"]["StandardError"] == ["journal"]
    assert "75" in service["Service"]["SuccessExitStatus"][0].split()  # another instance is not a failure
    assert "1" not in service["Service"]["SuccessExitStatus"][0].split()
    text = (PIPELINES / "spec-vet-nightly.service").read_text()
    assert "loginctl enable-linger" in text
    readme = (PIPELINES.parent / "docs" / "guide" / "nightly.md").read_text()
    assert "loginctl enable-linger" in readme and "OnFailure=" in readme and "MAILTO" in readme
    assert any(line.startswith("MAILTO=") for line in (PIPELINES / "crontab.example").read_text().splitlines())


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_units_verify(tmp_path):
    for name in ("spec-vet-nightly.service", "spec-vet-nightly.timer", "spec-vet-notify@.service"):
        shutil.copy(PIPELINES / name, tmp_path / name)
    shutil.copy(PIPELINES / "spec-vet-notify@.service", tmp_path / "spec-vet-notify@spec-vet-nightly.service.service")
    r = subprocess.run(["systemd-analyze", "verify", "spec-vet-nightly.service", "spec-vet-nightly.timer",
                        "spec-vet-notify@spec-vet-nightly.service.service"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60, env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"})
    # the ExecStart path is the user's checkout (%h/spec-vetting), absent here: that complaint is expected
    problems = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and "is not executable" not in ln]
    assert not problems, problems
