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
SCRIPTS = ["replicas.sh", "sglang/launch.sh", "vllm/launch.sh", "slurm/spec-vet.sbatch", "k8s/apply.sh",
           "compose/up.sh", "run_or_print.sh", "../pipelines/spec-vet-nightly.sh", "../tools/install-torch.sh"]


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


def test_the_gateway_keeps_all_of_a_candidates_tasks_on_one_replica():
    """SGLang's router pins requests by key under `manual` (its own key-to-worker map, no per-key in-flight cap)
    and `consistent_hashing`; both read the X-SMG-Routing-Key header, which the HTTP engine sets to the candidate id
    on every request of every task. `--routing-key-override` (alias `--sticky-sessions`) would cap a key at 2
    requests in flight and place the next one again: a candidate's later tasks, sent together once its first reply
    is back (pipeline/warm_prefix.py), could then land on a replica without its picture cached."""
    from spec_vetting.engines.http.wire import ROUTING_KEY_HEADER

    lines = dry("sglang/launch.sh", "--gpus", "4", "--model", "m", "--gateway", "29000", "--dry-run")
    (router,) = [shlex.split(ln) for ln in lines if "sglang_router" in ln]
    assert router[router.index("--policy") + 1] in ("manual", "consistent_hashing")
    assert not {"--routing-key-override", "--sticky-sessions", "--routing-key-headers"} & set(router)
    assert ROUTING_KEY_HEADER.lower() == "x-smg-routing-key"


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
        # the checkpoint's generation_config.json never sets decoding defaults
        assert argv[argv.index("--generation-config") + 1] == "vllm"
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

    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    env.update(GPUS="4", MODEL="/m/spec-o3")
    lines = dry("slurm/spec-vet.sbatch", "job.yaml", "--dry-run", env=env)
    assert "launch.sh" in lines[0] and "--gpus 4" in lines[0]
    cluster, run = shlex.split(lines[1].rstrip("&")), shlex.split(lines[2])
    assert cluster[1].endswith("dask_cluster.py")
    assert "spec-vet run job.yaml" in lines[2] and run.count("--endpoint") == 4
    # Dask's scheduler file, not a home-made address file: the scheduler writes it, spec-vet reads it
    sched = cluster[cluster.index("--scheduler-file") + 1]
    assert sched.endswith(".json") and run[run.index("--scheduler-file") + 1] == sched
    assert "--scheduler" not in run and "cat" not in run
    # the site's jobqueue.yaml decides cores, memory, partition and walltime unless they are given
    assert not {"--cores", "--memory", "--queue", "--walltime"} & set(cluster)
    env.update(DASK_CORES="16", DASK_QUEUE="short")
    cluster = shlex.split(dry("slurm/spec-vet.sbatch", "job.yaml", "--dry-run", env=env)[1].rstrip("&"))
    assert cluster[cluster.index("--cores") + 1] == "16" and cluster[cluster.index("--queue") + 1] == "short"
    assert "--memory" not in cluster


def _dask_cluster_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dask_cluster", DEPLOY / "slurm" / "dask_cluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_slurm_cluster_passes_only_what_was_given_and_writes_a_scheduler_file(tmp_path):
    mod = _dask_cluster_module()
    args = mod.parser().parse_args(["--scheduler-file", str(tmp_path / "s.json")])
    kwargs = mod.cluster_kwargs(args, {"dashboard_address": ":8790"})
    # nothing that jobqueue.yaml sets is overridden; the site's scheduler options are kept
    assert kwargs == {"scheduler_options": {"dashboard_address": ":8790", "scheduler_file": str(tmp_path / "s.json")}}
    args = mod.parser().parse_args(["--scheduler-file", "s.json", "--cores", "8", "--memory", "32GB"])
    assert mod.cluster_kwargs(args) == {"cores": 8, "memory": "32GB", "processes": 2,
                                        "scheduler_options": {"scheduler_file": "s.json"}}
    assert "address-file" not in (DEPLOY / "slurm" / "dask_cluster.py").read_text()


def test_a_dask_scheduler_file_is_what_spec_vet_connects_with(tmp_path):
    """The file Dask's Scheduler(scheduler_file=...) writes (as SLURMCluster's scheduler_options make it do) is the
    one `spec-vet run --scheduler-file` reads."""
    from distributed import LocalCluster

    from spec_vetting.pipeline.cluster import dask_client
    from spec_vetting.pipeline.config import ClusterConfig

    path = tmp_path / "scheduler.json"
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                      scheduler_kwargs={"scheduler_file": str(path)}) as cluster:
        with dask_client(ClusterConfig(scheduler_file=str(path)), 1) as (client, _n, _note):
            assert client.scheduler.address == cluster.scheduler_address


def test_k8s_and_compose_dry_runs_and_yaml():
    assert any("kubectl" in ln and ln.endswith("/sglang.yaml") for ln in dry("k8s/apply.sh", "job.yaml", "--dry-run"))
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
    assert sum(1 for name in compose["services"] if name.startswith("replica-")) == 8


def _compose_validator():
    """A validator of the Compose specification's JSON schema (the copy vendored in check-jsonschema), with the one
    rule its text states but the schema leaves out: a device reservation gives ``count`` or ``device_ids``, never
    both ("count and device_ids fields are exclusive. Compose returns an error if both are specified", the Compose
    file deploy reference)."""
    import copy
    import json
    from importlib.resources import files

    import jsonschema

    text = files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text("utf-8")
    schema = copy.deepcopy(json.loads(text))
    schema["$defs"]["devices"]["items"]["not"] = {"required": ["count", "device_ids"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("name", ["compose.yaml", "compose.vllm.yaml"])
def test_compose_files_follow_the_compose_specification(name):
    validator = _compose_validator()
    doc = yaml.safe_load((DEPLOY / "compose" / name).read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert not errors, errors
    if name == "compose.yaml":  # each replica reserves its own GPU by id
        ids = [s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
               for n, s in sorted(doc["services"].items()) if n.startswith("replica-")]
        assert ids == [[str(i)] for i in range(8)]


def test_the_compose_check_refuses_count_beside_device_ids():
    bad = {"services": {"r": {"image": "x", "deploy": {"resources": {"reservations": {"devices": [
        {"driver": "nvidia", "count": 1, "device_ids": ["0"], "capabilities": ["gpu"]}]}}}}}}
    assert not _compose_validator().is_valid(bad)
    bad["services"]["r"]["deploy"]["resources"]["reservations"]["devices"][0].pop("count")
    assert _compose_validator().is_valid(bad)


def _flag_map(argv: list[str]) -> dict[str, str | None]:
    """``--key value`` / ``--key=value`` / ``--flag`` arguments as a mapping."""
    flags, i = {}, 0
    while i < len(argv):
        key, _, inline = argv[i].partition("=")
        if inline:
            flags[key], i = inline, i + 1
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[key], i = argv[i + 1], i + 2
        else:
            flags[key], i = None, i + 1
    return flags


#: what a deployment sets its own way: where it listens and where the template file sits
_LOCAL_FLAGS = ("--host", "--port", "--chat-template")


def _server_flags(argv: list[str]) -> dict[str, str | None]:
    return {k: v for k, v in _flag_map(argv).items() if k not in _LOCAL_FLAGS}


def test_every_sglang_deployment_ignores_the_checkpoints_sampling_defaults():
    """--sampling-defaults openai (SGLang's equivalent of vLLM's --generation-config vllm) in every SGLang start."""
    line = next(ln for ln in dry("sglang/launch.sh", "--gpus", "1", "--model", "/m", "--dry-run")
                if "sglang.launch_server" in ln)
    argv = shlex.split(line)
    assert argv[argv.index("--sampling-defaults") + 1] == "openai"
    sts = next(d for d in yaml.safe_load_all((DEPLOY / "k8s/sglang.yaml").read_text()) if d["kind"] == "StatefulSet")
    assert "--sampling-defaults=openai" in sts["spec"]["template"]["spec"]["containers"][0]["args"]
    compose = yaml.safe_load((DEPLOY / "compose/compose.yaml").read_text())
    command = shlex.split(compose["x-replica"]["command"])
    assert command[command.index("--sampling-defaults") + 1] == "openai"


def test_every_deployment_starts_either_server_with_the_launchers_flags():
    line = next(ln for ln in dry("vllm/launch.sh", "--gpus", "1", "--model", "/models/spec-o3-7b", "--dry-run")
                if "vllm.entrypoints" in ln)
    want = _server_flags(shlex.split(line)[4:])  # after CUDA_VISIBLE_DEVICES=0 python3 -m vllm...api_server
    # Kubernetes: --server vllm applies vllm.yaml, with the same StatefulSet and Service names as sglang.yaml
    lines = dry("k8s/apply.sh", "job.yaml", "--server", "vllm", "--dry-run")
    assert any("apply" in ln and ln.endswith("/vllm.yaml") for ln in lines)
    bad = subprocess.run(["bash", str(DEPLOY / "k8s/apply.sh"), "job.yaml", "--server", "tgi", "--dry-run"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    docs = {name: list(yaml.safe_load_all((DEPLOY / f"k8s/{name}.yaml").read_text())) for name in ("sglang", "vllm")}
    names = {k: sorted((d["kind"], d["metadata"]["name"]) for d in v) for k, v in docs.items()}
    assert names["sglang"] == names["vllm"]
    sts = next(d for d in docs["vllm"] if d["kind"] == "StatefulSet")
    assert _server_flags(sts["spec"]["template"]["spec"]["containers"][0]["args"]) == want
    # compose: the override swaps the server of the same replicas
    lines = dry("compose/up.sh", "job.yaml", "--server", "vllm", "--dry-run")
    assert all("compose.vllm.yaml" in ln for ln in lines if ln.startswith("docker compose"))
    base = yaml.safe_load((DEPLOY / "compose/compose.yaml").read_text())
    override = yaml.safe_load((DEPLOY / "compose/compose.vllm.yaml").read_text())
    assert set(override["services"]) == {n for n in base["services"] if n.startswith("replica-")}
    assert _server_flags(shlex.split(override["x-vllm"]["command"])) == want
    # SLURM: SERVER picks the launcher
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    first = dry("slurm/spec-vet.sbatch", "job.yaml", "--dry-run", env={**env, "SERVER": "vllm"})[0]
    assert "deploy/vllm/launch.sh" in first
    bad = subprocess.run(["bash", str(DEPLOY / "slurm/spec-vet.sbatch"), "job.yaml", "--dry-run"],
                         env={**env, "SERVER": "tgi"}, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "SERVER must be sglang or vllm" in bad.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
def test_scripts_are_shellcheck_clean():
    res = subprocess.run(["shellcheck", "-x", *[str(DEPLOY / s) for s in SCRIPTS]], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout


# --- Kubernetes: structural checks in the spirit of kubeconform / yamllint (no such tool on this machine) ------------

class _UniqueKeyLoader(yaml.SafeLoader):
    """yamllint's key-duplicates rule: a repeated key in a mapping is an error, not a silent override."""


def _construct_mapping(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    dupes = {k for k in keys if keys.count(k) > 1}
    if dupes:
        raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {sorted(dupes)}", node.start_mark)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

K8S = DEPLOY / "k8s"


def _k8s_docs() -> list[tuple[str, dict]]:
    out = []
    for f in sorted(K8S.glob("*.yaml")):
        text = f.read_text()
        for n, line in enumerate(text.splitlines(), 1):
            assert "\t" not in line, f"{f.name}:{n}: tab"
            assert line == line.rstrip(), f"{f.name}:{n}: trailing spaces"
        out += [(f.name, d) for d in yaml.load_all(text, Loader=_UniqueKeyLoader) if d]
    return out


def _walk(node, key):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _walk(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v, key)


def _pod_spec(doc: dict) -> dict:
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    if doc["kind"] in ("Job", "StatefulSet", "Deployment"):
        return doc["spec"]["template"]["spec"]
    raise KeyError(doc["kind"])


def test_k8s_manifests_are_well_formed():
    docs = _k8s_docs()
    for name, d in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(d), name
        assert d["metadata"].get("name"), name
        for c in _walk(d, "containers"):
            for container in c:
                assert container.get("name") and container.get("image"), (name, container)
    # sglang.yaml and vllm.yaml are alternatives (apply.sh --server applies one): unique within what is applied
    for server, other in (("sglang.yaml", "vllm.yaml"), ("vllm.yaml", "sglang.yaml")):
        names = [(d["kind"], d["metadata"]["name"]) for f, d in docs if f != other]
        assert len(names) == len(set(names)), (server, names)
    sts = next(d for _, d in docs if d["kind"] == "StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_every_mounted_volume_claim_is_defined_and_every_config_map_is_created():
    docs = _k8s_docs()
    defined = {d["metadata"]["name"] for _, d in docs if d["kind"] == "PersistentVolumeClaim"}
    claimed = {v["claimName"] for _, d in docs for v in _walk(d, "persistentVolumeClaim")}
    assert claimed and claimed <= defined, f"mounted but never defined: {sorted(claimed - defined)}"
    data = next(d for _, d in docs if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == "spec-vet-data")
    assert "ReadWriteMany" in data["spec"]["accessModes"]  # the run's pod and every Dask worker mount it
    apply = (K8S / "apply.sh").read_text()
    for cm in {v["name"] for _, d in docs for v in _walk(d, "configMap")}:
        assert f"create configmap {cm} " in apply, cm
    lines = dry("k8s/apply.sh", "job.yaml", "--dry-run")
    assert "storage.yaml" in lines[0]  # the claims exist before anything mounts them


@pytest.mark.parametrize("kind", ["Job", "CronJob"])
def test_exit_2_fails_the_job_at_once_and_exit_1_is_retried(kind):
    (doc,) = [d for _, d in _k8s_docs() if d["kind"] == kind]
    job_spec = doc["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else doc["spec"]
    pod = _pod_spec(doc)
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert job_spec["backoffLimit"] >= 1  # exit 1: a new pod resumes the run
    rules = job_spec["podFailurePolicy"]["rules"]
    fail = [r for r in rules if r["action"] == "FailJob" and "onExitCodes" in r]
    assert len(fail) == 1
    codes = fail[0]["onExitCodes"]
    assert codes["operator"] == "In" and codes["values"] == [2]
    assert codes["containerName"] in {c["name"] for c in pod["containers"]}
    assert any(r["action"] == "Ignore" and r.get("onPodConditions") for r in rules)  # evictions do not count
    command = pod["containers"][0]["command"]
    assert command[:3] == ["spec-vet", "run", "/config/job.yaml"]


def test_nightly_cronjob():
    (cron,) = [d for _, d in _k8s_docs() if d["kind"] == "CronJob"]
    fields = cron["spec"]["schedule"].split()
    assert len(fields) == 5 and cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert "--incremental" in _pod_spec(cron)["containers"][0]["command"]
    lines = dry("k8s/apply.sh", "job.yaml", "--nightly", "--dry-run")
    assert any(ln.endswith("cronjob.yaml") for ln in lines) and not any(ln.endswith("/job.yaml") for ln in lines)
