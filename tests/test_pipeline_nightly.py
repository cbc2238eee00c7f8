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
