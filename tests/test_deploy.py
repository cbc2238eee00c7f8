"""deploy/: dry runs print the exact commands, manifests are valid YAML, scripts are shellcheck-clean."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from spec_vetting.pipeline.config import job_from_dict

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SCRIPTS = ["replicas.sh", "sglang/launch.sh", "vllm/launch.sh", "slurm/spec-vet.sbatch", "k8s/apply.sh", "compose/up.sh", "run_or_print.sh"]


def dry(script: str, *args: str, env: dict | None = None) -> list[str]:
    out = subprocess.run(
        ["bash", str(DEPLOY / script), *args], capture_output=True, text=True, check=True, timeout=30, env=env
    )
    return out.stdout.splitlines()


def test_launch_dry_run_prints_one_command_per_replica_with_port_and_template():
    lines = dry("sglang/launch.sh", "--gpus", "8", "--model", "/nonexistent/model", "--port-base", "31000", "--dry-run")
    launches = [ln for ln in lines if "sglang.launch_server" in ln]
    assert len(launches) == 8
    for i, line in enumerate(launches):
        argv = shlex.split(line)
        assert argv[0] == f"CUDA_VISIBLE_DEVICES={i}"
        assert argv[argv.index("--port") + 1] == str(31000 + i)
        template = Path(argv[argv.index("--chat-template") + 1])
        assert template == (DEPLOY / "chat_template.jinja").resolve()
        assert argv[argv.index("--tp-size") + 1] == "1"
        assert argv[argv.index("--model-path") + 1] == "/nonexistent/model"
        assert "--enable-metrics" in argv and "--enable-cache-report" in argv
        assert yaml.safe_load(argv[argv.index("--mm-process-config") + 1])["image"]["max_pixels"] >= 792 * 472
    # the job-file lines that follow are a valid part of a job file and name every replica
    job = yaml.safe_load("\n".join(ln for ln in lines if not ln.startswith("CUDA_VISIBLE_DEVICES")))
    assert len(job["engine"]["endpoints"]) == 8
    assert all(e.endswith("/v1") for e in job["engine"]["endpoints"])
    config = job_from_dict({**job, "candidates": ["list.csv"], "tasks": ["cv"], "out": "catalog"})
    assert config.engine.resolved_name == "openai" and config.max_inflight_per_endpoint == 32


def test_launch_gateway_uses_manual_routing():
    lines = dry("sglang/launch.sh", "--gpus", "2", "--model", "m", "--gateway", "29000", "--dry-run")
    router = [ln for ln in lines if "sglang_router" in ln]
    assert len(router) == 1 and "--policy manual" in router[0]
    job = yaml.safe_load("\n".join(ln for ln in lines if not ln.startswith(("CUDA_VISIBLE_DEVICES", "python3"))))
    config = job_from_dict({**job, "candidates": ["list.csv"], "tasks": ["cv"], "out": "catalog"})
    assert config.engine.gateway.endswith(":29000/v1")
    assert "http://127.0.0.1:30000" in router[0] and "http://127.0.0.1:30001" in router[0]


def test_vllm_launch_dry_run_has_the_flags_the_tests_run_vllm_with():
    lines = dry("vllm/launch.sh", "--gpus", "2", "--model", "/nonexistent/model", "--dry-run")
    launches = [ln for ln in lines if "vllm.entrypoints.openai.api_server" in ln]
    assert len(launches) == 2
    for i, line in enumerate(launches):
        argv = shlex.split(line)
        assert argv[0] == f"CUDA_VISIBLE_DEVICES={i}"
        assert argv[argv.index("--port") + 1] == str(30000 + i)
        assert argv[argv.index("--model") + 1] == "/nonexistent/model"
        assert Path(argv[argv.index("--chat-template") + 1]) == (DEPLOY / "chat_template.jinja").resolve()
        # parts passed to the template as parts: the picture stays inside <tool_response>
        assert argv[argv.index("--chat-template-content-format") + 1] == "openai"
        assert "--enable-prefix-caching" in argv and "--enable-prompt-tokens-details" in argv
        # the full view and 8 zooms (protocol: 8 assistant turns)
        assert yaml.safe_load(argv[argv.index("--limit-mm-per-prompt") + 1])["image"] == 9
        assert yaml.safe_load(argv[argv.index("--mm-processor-kwargs") + 1])["max_pixels"] >= 792 * 472
    job = yaml.safe_load("\n".join(ln for ln in lines if not ln.startswith("CUDA_VISIBLE_DEVICES")))
    assert len(job["engine"]["endpoints"]) == 2


def test_vllm_launch_refuses_a_gateway_it_cannot_start():
    res = subprocess.run(["bash", str(DEPLOY / "vllm/launch.sh"), "--gpus", "2", "--model", "m", "--gateway", "29000",
                          "--dry-run"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "endpoints" in res.stderr


@pytest.mark.parametrize("version, flag_dropped", [("0.5.5", True), ("0.5.6", False), ("0.10.1", False)])
def test_sglang_launch_drops_mm_process_config_before_0_5_6(tmp_path, version, flag_dropped):
    # a python3 on PATH whose sglang reports ``version``; the launch then stops at the missing model folder
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(f"#!/bin/sh\necho {version}\n")
    (fake / "python3").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    res = subprocess.run(["bash", str(DEPLOY / "sglang/launch.sh"), "--gpus", "1", "--model", str(tmp_path / "none")],
                         capture_output=True, text=True, timeout=30, env=env)
    assert res.returncode == 1 and "does not exist" in res.stderr
    assert ("has no --mm-process-config" in res.stderr) == flag_dropped


def test_server_images_are_pinned_to_a_release_with_mm_process_config():
    for manifest in ("k8s/sglang.yaml", "compose/compose.yaml"):
        text = (DEPLOY / manifest).read_text()
        tags = [ln.split("lmsysorg/sglang:")[1].split()[0] for ln in text.splitlines() if "lmsysorg/sglang:" in ln]
        assert tags and all(t != "latest" for t in tags), manifest
        for tag in tags:
            version = tuple(int(x) for x in tag.lstrip("v").split("-")[0].split(".")[:3])
            assert version >= (0, 5, 6), f"{manifest}: {tag} predates --mm-process-config"


def test_launch_rejects_bad_usage():
    res = subprocess.run(["bash", str(DEPLOY / "sglang/launch.sh"), "--gpus", "x", "--model", "m"], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 2 and "positive integer" in res.stderr
    res = subprocess.run(["bash", str(DEPLOY / "sglang/launch.sh"), "--dry-run"], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 2 and "--gpus and --model are required" in res.stderr


def test_slurm_dry_run_starts_replicas_cluster_and_run(tmp_path):
    import os

    env = dict(os.environ, GPUS="4", MODEL="/m/spec-o3")
    lines = dry("slurm/spec-vet.sbatch", "job.yaml", "--dry-run", env=env)
    assert "launch.sh" in lines[0] and "--gpus 4" in lines[0]
    assert "dask_cluster.py" in lines[1]
    assert "spec-vet run job.yaml" in lines[2] and lines[2].count("--endpoint") == 4 and "--scheduler" in lines[2]


def test_k8s_and_compose_dry_runs_and_yaml():
    assert any("kubectl" in ln and "sglang.yaml" in ln for ln in dry("k8s/apply.sh", "job.yaml", "--dry-run"))
    assert any("docker compose" in ln for ln in dry("compose/up.sh", "job.yaml", "--dry-run"))
    docs = [d for f in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    kinds = {d["kind"] for d in docs}
    assert {"Service", "StatefulSet", "DaskCluster", "Job"} <= kinds
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert any(a.startswith("--chat-template=") for a in container["args"])
    compose = yaml.safe_load((DEPLOY / "compose/compose.yaml").read_text())
    assert sum(1 for name in compose["services"] if name.startswith("sglang-")) == 8


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
def test_scripts_are_shellcheck_clean():
    res = subprocess.run(["shellcheck", "-x", *[str(DEPLOY / s) for s in SCRIPTS]], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout
