"""The command line as operators expect it: examples in every --help, path options that shells complete, task
keys completed, settings an engine ignores said aloud, training data that is model output, plan and logging that say
what they measured, Dask's own configuration honoured."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from test_eval_support import turn_rows, verdict_row, write_catalog

from spec_vetting.cli import main
from spec_vetting.io.candidate_cells import COLUMN_ALIASES

REPO = Path(__file__).resolve().parents[1]
SPEC_VET = [sys.executable, "-m", "spec_vetting"]


def _leaves(group=main, path=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, (*path, name))
        else:
            yield (*path, name), cmd


LEAVES = list(_leaves())


def test_all_commands_are_found():
    names = {" ".join(p) for p, _ in LEAVES}
    assert len(names) >= 18
    assert {"run", "export sft", "catalog schema", "tasks import-specvi", "bench specvi"} <= names


@pytest.mark.parametrize("path", [p for p, _ in LEAVES], ids=[" ".join(p) for p, _ in LEAVES])
def test_every_command_help_shows_examples(path):
    out = CliRunner().invoke(main, [*path, "--help"], prog_name="spec-vet").output
    examples = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("spec-vet " + " ".join(path))]
    assert examples, f"spec-vet {' '.join(path)} --help shows no example:\n{out}"


def test_run_help_lists_the_candidate_table_columns():
    out = CliRunner().invoke(main, ["run", "--help"]).output
    for field, aliases in COLUMN_ALIASES.items():
        for name in aliases:
            assert name in out, f"run --help does not name the candidate column {name!r} ({field})"


#: parameter names that hold a file or folder path
PATH_PARAMS = {"path", "root", "out", "out_dir", "out_file", "output", "tasks_file", "labels_file", "plots_dir",
               "save_images", "catalog", "redrock", "parquet", "folder", "job_file", "candidates",
               "cluster__scheduler_file"}


@pytest.mark.parametrize("path,cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_path_options_are_click_paths(path, cmd):
    for param in cmd.params:
        if param.name in PATH_PARAMS and (path, param.name) != (("plan",), "candidates"):  # plan: a count
            assert isinstance(param.type, click.Path), f"{' '.join(path)} {param.name}: {param.type!r}"


def _complete(words: str) -> list[str]:
    env = {"_SPEC_VET_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    res = CliRunner().invoke(main, [], prog_name="spec-vet", env=env)
    assert res.exit_code == 0, res.output
    return res.output.splitlines()


def test_task_option_completes_task_keys():
    assert _complete("spec-vet run --task c") == ["plain,cv", "plain,carbon"]
    assert "plain,wd" in _complete("spec-vet inspect x.fits --task w")
    assert _complete("spec-vet tasks show g") == ["plain,gm"]


def test_task_completion_reads_the_tasks_file_on_the_line(tmp_path):
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("tasks:\n  - key: be_star\n    class_name: Be Star\n    prompt: Is this a Be star?\n")
    assert "plain,be_star" in _complete(f"spec-vet run --tasks-file {tasks} --task b")


def test_path_options_complete_as_files():
    assert _complete("spec-vet run --out /tm") == ["dir,/tm"]
    assert _complete("spec-vet run --candidates ex") == ["file,ex"]


def test_the_commands_guide_documents_shell_completion():
    readme = (REPO / "docs" / "guide" / "commands.md").read_text()
    assert "_SPEC_VET_COMPLETE=bash_source" in readme and "zsh_source" in readme


# --- settings an engine does not use -----------------------------------------------------------------------------

def _gpu_job(tmp_path) -> Path:
    job = tmp_path / "gpu.yaml"
    job.write_text("candidates: [list.csv]\ntasks: [cv]\nout: cat\n"
                   "engine:\n  endpoints: [http://gpu01:30000/v1, http://gpu01:30001/v1]\n"
                   "sampling:\n  logprobs: true\n  top_logprobs: 5\n")
    return job


def test_rules_engine_with_a_gpu_job_file_warns_what_it_ignores(tmp_path, no_job_env):
    from spec_vetting.cli.run import build_job, check_ignored_settings, run

    opts = {p.name: None for p in run.params if "__" in (p.name or "") or p.name in ("candidates", "tasks", "out")}
    opts["engine__name"] = "rules"
    job = build_job(str(_gpu_job(tmp_path)), opts)
    lines = check_ignored_settings(job, opts)
    assert len(lines) == 1
    assert "engine rules does not use engine.endpoints, sampling.logprobs, sampling.top_logprobs" in lines[0]
    assert "ignored" in lines[0]
    # the openai engine the job asks for by default uses every one of them
    opts["engine__name"] = None
    assert check_ignored_settings(build_job(str(_gpu_job(tmp_path)), opts), opts) == []


def test_rules_engine_with_endpoint_or_logprobs_options_is_refused(tmp_path, no_job_env):
    for extra in (["--endpoint", "http://gpu01:30000/v1"], ["--logprobs"]):
        res = CliRunner().invoke(main, ["run", "--candidates", str(tmp_path / "x.csv"), "--out", str(tmp_path / "c"),
                                        "--engine", "rules", *extra])
        assert res.exit_code == 2, res.output
        assert f"{extra[0]}: not used by engine rules" in res.output
        assert not (tmp_path / "c").exists()  # refused before anything ran


# --- training data and capacity from a rules run -----------------------------------------------------------------

def _rules_catalog(tmp_path):
    v = [verdict_row("a", "cv", "YES", label="YES", engine="rules", engine_version="1.1", model=None,
                     completion_tokens=None, prompt_tokens=None, n_turns=5, p_yes=0.9, p_yes_source="rules_score"),
         verdict_row("b", "cv", "NO", label="NO", engine="rules", engine_version="1.1", model=None,
                     completion_tokens=None, prompt_tokens=None, n_turns=5)]
    t = [r for cid, ver in (("a", "YES"), ("b", "NO")) for r in turn_rows(cid, "cv", ver)]
    for row in v:
        from spec_vetting.inspect.tasks import get_task

        row["prompt_version"] = get_task("cv").version
    return write_catalog(tmp_path / "cat", v, t)


def test_export_sft_refuses_rules_traces_without_the_flag(tmp_path):
    root = _rules_catalog(tmp_path)
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "sft")])
    assert res.exit_code == 2
    assert "engine rules, which runs no model" in res.output and "--allow-non-model-traces" in res.output
    assert not (tmp_path / "sft" / "spec_vetting_sft.json").exists()
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "sft"),
                                    "--allow-non-model-traces"])
    assert res.exit_code == 0, res.output
    records = json.loads((tmp_path / "sft" / "spec_vetting_sft.json").read_text())
    assert len(records) == 2
    assert all(r["engine"] == "rules" and r["engine_version"] == "1.1" and r["model"] is None for r in records)


def test_export_sft_records_name_the_model_engine(tmp_path):
    from spec_vetting.inspect.tasks import get_task

    v = [verdict_row("a", "cv", "YES", label="YES", engine="openai", model="spec-o3-7b",
                     prompt_version=get_task("cv").version)]
    root = write_catalog(tmp_path / "cat", v, turn_rows("a", "cv", "YES"))
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "sft")])
    assert res.exit_code == 0, res.output
    (rec,) = json.loads((tmp_path / "sft" / "spec_vetting_sft.json").read_text())
    assert rec["engine"] == "openai" and rec["model"] == "spec-o3-7b"


def test_plan_from_a_rules_catalog_says_it_measured_no_model(tmp_path):
    root = _rules_catalog(tmp_path)
    res = CliRunner().invoke(main, ["plan", "--candidates", "1000", "--catalog", str(root)])
    assert res.exit_code == 0, res.output
    assert "engine rules (no model) measure no model" in res.output
    assert "workload from defaults" in res.output and "4.0 turns" in res.output  # not the rules engine's 5 turns
    out = json.loads(CliRunner().invoke(main, ["plan", "-n", "10", "--catalog", str(root), "--json"]).output)
    assert out["workload"]["source"] == "defaults" and "no model" in out["workload"]["note"]


# --- logging -----------------------------------------------------------------------------------------------------

def _spec_vet(args, tmp_path, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SPEC_VETTING_JOB__", "DASK_"))}
    full["PYTHONPATH"] = str(REPO)
    full.update(env)
    return subprocess.run(SPEC_VET + [str(a) for a in args], env=full, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)


def test_bad_log_level_is_a_usage_error(tmp_path):
    r = _spec_vet(["tasks", "list"], tmp_path, SPEC_VETTING_LOG="LOUD")
    assert r.returncode == 2
    assert "SPEC_VETTING_LOG='LOUD' is not a log level" in r.stderr and "DEBUG" in r.stderr
    assert "Traceback" not in r.stderr


def test_configure_logging_touches_the_package_logger_only():
    from spec_vetting.cli.logs import configure_logging

    root_level = logging.getLogger().level
    pkg = logging.getLogger("spec_vetting")
    saved = (pkg.level, list(pkg.handlers))
    try:
        assert configure_logging({"SPEC_VETTING_LOG": "debug"}) == logging.DEBUG
        configure_logging({"SPEC_VETTING_LOG": "debug"})  # idempotent: one handler
        assert sum(getattr(h, "_spec_vetting_cli", False) for h in pkg.handlers) == 1
        assert pkg.level == logging.DEBUG and logging.getLogger().level == root_level
        assert logging.getLogger("matplotlib.font_manager").getEffectiveLevel() > logging.DEBUG or root_level <= 10
    finally:
        pkg.setLevel(saved[0])
        pkg.handlers[:] = saved[1]


@pytest.mark.slow
def test_debug_logs_spec_vetting_only_and_forwards_worker_logs(tmp_path):
    r = _spec_vet(["make-examples", tmp_path / "ex", "--n", "2", "--seed", "1"], tmp_path)
    assert r.returncode == 0, r.stderr
    r = _spec_vet(["run", "--candidates", tmp_path / "ex" / "candidates.csv", "--task", "cv", "--out",
                   tmp_path / "cat", "--workers", "1", "--no-dashboard", "--no-progress"], tmp_path,
                  SPEC_VETTING_LOG="DEBUG")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert not [ln for ln in lines if "matplotlib" in ln or "PIL." in ln], r.stderr[:2000]
    assert any(" spec_vetting.pipeline.cluster: Dask LocalCluster" in ln for ln in lines), r.stderr
    # the shard ran in a worker process: its records came back through Client.forward_logging
    forwarded = [ln for ln in lines if "[worker tcp://" in ln and "spec_vetting.pipeline.shard" in ln]
    assert any("DEBUG" in ln and "pairs on engine rules" in ln for ln in forwarded), r.stderr
    assert any("INFO" in ln and "done in" in ln for ln in forwarded), r.stderr


# --- Dask's own configuration ------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_address_follows_dask_config():
    import dask

    from spec_vetting.pipeline.cluster import DASHBOARD_ADDRESS_KEY, dashboard_address

    assert dashboard_address() == ":0" and dashboard_address(False) is None
    with dask.config.set({DASHBOARD_ADDRESS_KEY: "127.0.0.1:8799"}):
        assert dashboard_address() == "127.0.0.1:8799"


def test_dask_env_variable_sets_the_local_cluster_dashboard(tmp_path):
    """DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__ADDRESS reaches the LocalCluster, DASK_DISTRIBUTED__DASHBOARD__LINK
    the printed link."""
    port = _free_port()
    code = (
        "from spec_vetting.pipeline.cluster import dask_client\n"
        "from spec_vetting.pipeline.config import ClusterConfig\n"
        "with dask_client(ClusterConfig(processes=False, workers=1), 1) as (c, n, _note):\n"
        "    print(c.dashboard_link)\n"
        "    print(c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.http_server.port))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env.update(PYTHONPATH=str(REPO), DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__ADDRESS=f"127.0.0.1:{port}",
               DASK_DISTRIBUTED__DASHBOARD__LINK="https://proxy.example/dask/{port}/status")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    link, served = r.stdout.split()
    assert link == f"https://proxy.example/dask/{port}/status" and int(served) == port


def test_scheduler_file_connects_like_dask(tmp_path):
    from distributed import LocalCluster

    from spec_vetting.pipeline.cluster import dask_client
    from spec_vetting.pipeline.config import ClusterConfig

    sched_file = tmp_path / "scheduler.json"
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                      scheduler_kwargs={"scheduler_file": str(sched_file)}) as cluster:
        assert json.loads(sched_file.read_text())["address"] == cluster.scheduler_address
        with dask_client(ClusterConfig(scheduler_file=str(sched_file)), 1) as (client, n, _note):
            assert client.scheduler.address == cluster.scheduler_address and n == 1
            assert client.submit(lambda: 41 + 1).result() == 42


def test_scheduler_file_option_and_job_field(tmp_path, no_job_env):
    from spec_vetting.cli.run import build_job
    from spec_vetting.errors import ConfigError
    from spec_vetting.pipeline.config import job_from_dict

    job = tmp_path / "job.yaml"
    job.write_text("candidates: [list.csv]\nout: cat\ncluster:\n  scheduler_file: sched.json\n")
    from spec_vetting.pipeline.config import load_job

    assert load_job(job).cluster.scheduler_file == str(tmp_path / "sched.json")  # relative to the job file
    assert load_job(job).cluster.remote
    with pytest.raises(ConfigError, match="not both"):
        job_from_dict({"candidates": ["x"], "out": "o",
                       "cluster": {"scheduler_file": "s.json", "scheduler_address": "tcp://h:8786"}})
    from spec_vetting.cli.run import run

    opts = {p.name: None for p in run.params if p.name not in ("job_file", "example", "fresh", "progress")}
    opts.update(candidates=("l.csv",), out="o", cluster__scheduler_file="/shared/s.json")
    assert build_job(None, opts).cluster.scheduler_file == "/shared/s.json"


def test_in_process_workers_are_not_forwarded_and_leave_the_level_alone():
    """A scheduler whose workers are threads of this process (tests, notebooks): forwarding would loop records
    back into the same loggers, and the level plugin would change this process's logger."""
    from distributed import Client, LocalCluster

    from spec_vetting.pipeline.cluster import forward_worker_logs

    pkg = logging.getLogger("spec_vetting")
    before = (pkg.level, list(pkg.handlers))
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
        assert forward_worker_logs(client, logging.DEBUG) is None
    assert (pkg.level, list(pkg.handlers)) == before
