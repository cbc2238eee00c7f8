"""Pipeline pieces without a cluster: job file schema, HEALPix index, catalog schemas and readers, sharding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest
import yaml

from spec_vetting.catalog.healpix import ang2pix_nest, healpix_or_none
from spec_vetting.catalog.listing import latest_run_id, list_runs
from spec_vetting.catalog.read import read_turns, read_verdicts
from spec_vetting.catalog.rows import empty_row, rows_to_table
from spec_vetting.catalog.schema import SCHEMA_VERSION, TURNS_SCHEMA, VERDICTS_SCHEMA
from spec_vetting.errors import ConfigError
from spec_vetting.pipeline.config import (
    JobConfig,
    apply_env_overrides,
    auto_shard_size,
    example_job_text,
    job_from_dict,
    load_job,
)
from spec_vetting.pipeline.plan import WorkItem, build_plan, make_shards, plan_digest
from spec_vetting.pipeline.store import RunStore, write_json_atomic, write_parquet_atomic

# --- job file --------------------------------------------------------------------------------------------------


def _fields(model) -> dict:
    out = {}
    for name, f in model.model_fields.items():
        ann = f.annotation
        out[name] = ann if isinstance(ann, type) and hasattr(ann, "model_fields") else None
    return out


def test_example_job_has_every_field_and_validates():
    data = yaml.safe_load(example_job_text())
    job = job_from_dict(data)
    assert job.engine.resolved_name == "rules" and job.budgets.max_turns == 8 and job.sampling.temperature == 0.0

    def check(model, section: dict, where: str):
        for name, sub in _fields(model).items():
            assert name in section, f"example_job.yaml lacks {where}{name}"
            if sub is not None:
                check(sub, section[name], f"{where}{name}.")

    check(JobConfig, data, "")


def test_every_field_is_documented():
    def walk(model):
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
            ann = f.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                walk(ann)

    walk(JobConfig)


def test_job_file_errors_name_the_file_and_field(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("candidates: [a.csv]\nout: cat\nengine: {name: rules, endpiont: x}\nshard_size: 0\n")
    with pytest.raises(ConfigError) as err:
        load_job(p)
    msg = str(err.value)
    assert str(p) in msg and "engine.endpiont" in msg and "shard_size" in msg
    p.write_text("candidates: [a.csv\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_job(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_job(tmp_path / "nope.yaml")
    p.write_text("out: cat\n")
    with pytest.raises(ConfigError, match="'candidates'"):
        load_job(p)
    with pytest.raises(ConfigError, match="unknown engine"):
        job_from_dict({"candidates": ["a"], "out": "o", "engine": {"name": "gpt"}})


def test_relative_paths_env_overrides_and_options(tmp_path):
    (tmp_path / "jobs").mkdir()
    p = tmp_path / "jobs" / "job.yaml"
    p.write_text("candidates: [list.csv, /abs/x.csv]\nout: ../cat\ntasks: [cv]\n")
    env = {"SPEC_VETTING_JOB__ENGINE__MODEL": "spec-o3", "SPEC_VETTING_JOB__SHARD_SIZE": "7",
           "SPEC_VETTING_JOB__ENGINE__ENDPOINTS": "[http://a/v1, http://b/v1]", "OTHER": "1"}
    job = load_job(p, {"tasks": ["wd", "wd"], "cluster.workers": 3}, environ=env)
    assert job.candidates == [str(tmp_path / "jobs" / "list.csv"), "/abs/x.csv"]
    assert job.out == str(tmp_path / "jobs" / "../cat")
    assert job.engine.model == "spec-o3" and job.shard_size == 7 and job.engine.resolved_name == "openai"
    assert job.tasks == ["wd"] and job.cluster.workers == 3
    assert apply_env_overrides({"a": 1}, {}) == {"a": 1}


def test_auto_shard_size_depends_on_pairs_and_engine_only():
    job = job_from_dict({"candidates": ["a"], "out": "o"})
    assert auto_shard_size(job, 10) == 4 and auto_shard_size(job, 3200) == 100 and auto_shard_size(job, 10**6) == 100
    http = job_from_dict({"candidates": ["a"], "out": "o", "engine": {"endpoints": ["http://a/v1", "http://b/v1"]},
                          "max_inflight_per_endpoint": 16})
    # an HTTP shard holds the whole in-flight cap (2 x 16 here), no more: small shards balance the workers' tails
    assert auto_shard_size(http, 10) == 32 and auto_shard_size(http, 10**6) == 100
    bench = job_from_dict({"candidates": ["a"], "out": "o", "engine": {"endpoints": ["http://a/v1", "http://b/v1"]},
                           "max_inflight_per_endpoint": 4})
    assert auto_shard_size(bench, 192) == 8  # 24 shards for 2 workers (3 shards of 64 left one idle)
    gateway = job_from_dict({"candidates": ["a"], "out": "o", "engine": {"gateway": "http://g/v1"},
                             "max_inflight_per_endpoint": 256})
    assert auto_shard_size(gateway, 10**6) == 256
    assert auto_shard_size(job_from_dict({"candidates": ["a"], "out": "o", "shard_size": 9}), 10) == 9


# --- HEALPix ---------------------------------------------------------------------------------------------------


def test_healpix_base_faces_and_poles():
    # nside 1: the 12 base faces; centres of the north (0-3), equatorial (4-7) and south (8-11) faces
    z = np.degrees(np.arcsin(2 / 3))
    ra = [45, 135, 225, 315, 0, 90, 180, 270, 45, 135, 225, 315]
    dec = [z] * 4 + [0] * 4 + [-z] * 4
    assert ang2pix_nest(1, ra, dec).tolist() == list(range(12))
    assert ang2pix_nest(64, [10.0, 10.0], [90.0, -90.0]).tolist() == [4095, 8 * 4096]
    assert ang2pix_nest(64, [360.0], [0.5]).tolist() == ang2pix_nest(64, [0.0], [0.5]).tolist()


def test_healpix_hierarchy_and_equal_areas():
    rng = np.random.default_rng(1)
    ra = rng.uniform(0, 360, 60000)
    dec = np.degrees(np.arcsin(rng.uniform(-1, 1, 60000)))
    p64 = ang2pix_nest(64, ra, dec)
    assert p64.min() >= 0 and p64.max() < 12 * 64 * 64
    # NESTED: the parent of a pixel is its index // 4
    assert np.array_equal(p64 // 4, ang2pix_nest(32, ra, dec))
    assert np.array_equal(p64 // 4**6, ang2pix_nest(1, ra, dec))
    counts = np.bincount(ang2pix_nest(2, ra, dec), minlength=48)
    expected = 60000 / 48
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))  # equal-area pixels


def test_healpix_missing_positions():
    assert healpix_or_none(None, 3.0) is None and healpix_or_none(10.0, float("nan")) is None
    assert ang2pix_nest(64, [np.nan, 10.0], [0.0, 100.0]).tolist() == [-1, -1]
    with pytest.raises(ValueError, match="power of two"):
        ang2pix_nest(3, 0, 0)


def test_healpix_column_is_the_order_6_parent_of_the_hats_index():
    """One implementation: the nside-64 column is the order-29 cell of cdshealpix (the library hats uses) 23 orders
    up, for positions all over the sphere."""
    from astropy import units as u
    from cdshealpix.nested import lonlat_to_healpix

    rng = np.random.default_rng(7)
    ra = rng.uniform(0, 360, 5000)
    dec = np.degrees(np.arcsin(rng.uniform(-1, 1, 5000)))
    want = np.asarray(lonlat_to_healpix(ra * u.deg, dec * u.deg, 29), dtype=np.int64) >> (2 * 23)
    assert np.array_equal(ang2pix_nest(64, ra, dec), want)
    assert [healpix_or_none(r, d) for r, d in zip(ra[:50], dec[:50], strict=True)] == want[:50].tolist()


# --- catalog schemas and readers -------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [VERDICTS_SCHEMA, TURNS_SCHEMA])
def test_every_column_is_described_and_versioned(schema):
    assert schema.metadata[b"spec_vetting.schema_version"] == SCHEMA_VERSION.encode()
    for f in schema:
        assert f.metadata and f.metadata.get(b"description"), f.name
    assert "task" not in schema.names and "run_date" not in schema.names  # hive partition columns


def test_agreed_columns_exist():
    agreed = ("run_id candidate_id verdict status fallback p_yes p_yes_source justification reason error_kind "
              "error_message engine engine_version model prompt_version renderer_version survey variant path target "
              "obsid plate mjd fiberid targetid ra dec redshift label n_turns n_tool_calls zoom_windows prompt_tokens "
              "completion_tokens cached_tokens elapsed_s healpix").split()
    assert set(agreed) <= set(VERDICTS_SCHEMA.names)
    assert set("run_id candidate_id turn assistant_text tool_call tool_response_text zoom_min zoom_max image_png "
               "prompt_tokens completion_tokens cached_tokens latency_s endpoint".split()) <= set(TURNS_SCHEMA.names)


def test_readers_on_an_empty_and_a_written_root(tmp_path):
    import hashlib

    from spec_vetting.pipeline.compact import compact_and_update

    assert read_verdicts(tmp_path).num_rows == 0 and "task" in read_verdicts(tmp_path).column_names
    assert latest_run_id(tmp_path) is None and list_runs(tmp_path) == []
    for run_id, date in (("r1", "2024-01-01"), ("r2", "2024-01-02")):
        store = RunStore(tmp_path, run_id, date)
        rows = [{**empty_row("verdicts"), "run_id": run_id, "candidate_id": f"c{i}", "verdict": "YES", "n_turns": 1}
                for i in range(3)]
        write_parquet_atomic(store.partition("verdicts", "cv") / store.part_name("s0"), rows_to_table(rows, "verdicts"))
        turns = [{**empty_row("turns"), "run_id": run_id, "candidate_id": "c0", "turn": -1, "image_png": b"\x89PNG"}]
        write_parquet_atomic(store.partition("turns", "cv") / store.part_name("s0"), rows_to_table(turns, "turns"))
        write_json_atomic(store.manifest_path, {"run_id": run_id, "run_date": date, "status": "finished",
                                                "started_at": date})
        # staged parts count once compacted (what a run does at its end)
        assert read_verdicts(tmp_path, run_id).num_rows == 0
        compact_and_update(tmp_path, run_id, date, {"s0"})
    # a temporary file of a crashed writer is invisible
    (tmp_path / "verdicts" / "2024-01-01" / "_tmp-x-part.parquet").write_bytes(b"junk")
    t = read_verdicts(tmp_path)
    assert t.num_rows == 6 and set(t.column("task").to_pylist()) == {"cv"}
    assert t.schema.field("verdict").type == pa.string()
    assert read_verdicts(tmp_path, "r2").column("run_date").to_pylist() == ["2024-01-02"] * 3
    # stored picture bytes move to pictures/ (by sha256); the turn keeps the reference
    [turn] = read_turns(tmp_path, "r1", candidate_ids=["c0"]).to_pylist()
    assert turn["image_png"] is None and turn["picture_sha256"] == hashlib.sha256(b"\x89PNG").hexdigest()
    assert read_turns(tmp_path, candidate_ids=["zz"]).num_rows == 0
    assert [r["run_id"] for r in list_runs(tmp_path)] == ["r1", "r2"] and latest_run_id(tmp_path) == "r2"
    # readable without this package: plain pyarrow, task and run_date inside the files
    import pyarrow.dataset as ds

    plain = ds.dataset(str(tmp_path / "verdicts"), format="parquet").to_table()
    assert plain.num_rows == 6 and set(plain.column("task").to_pylist()) == {"cv"}


# --- plan and shards -------------------------------------------------------------------------------------------


@dataclass
class C:
    candidate_id: str
    task: str | None = None
    path: str | None = None
    target: int | None = None


def _resolve(key):
    return {"cc": "carbon"}.get(key, key)


def test_plan_task_semantics_and_shard_ids_are_deterministic():
    cands = [C("a"), C("b", "cc"), C("c", "ss"), C("d", "cv")]
    plan = build_plan(cands, ["cv", "carbon", "cv"], _resolve)
    assert [i.key for i in plan.items] == [("a", "cv"), ("a", "carbon"), ("b", "carbon"), ("d", "cv")]
    assert plan.skipped_task_not_selected == 1 and plan.tasks == ["cv", "carbon"]
    only_rows = build_plan(cands[1:], [], _resolve)
    assert [i.key for i in only_rows.items] == [("b", "carbon"), ("c", "ss"), ("d", "cv")]
    s1, s2 = make_shards(plan.items, 3), make_shards(build_plan(cands, ["cv", "carbon"], _resolve).items, 3)
    assert [s.shard_id for s in s1] == [s.shard_id for s in s2] and [len(s.items) for s in s1] == [3, 1]
    assert s1[0].shard_id.startswith("s00000-")
    other = make_shards([WorkItem(C("zz"), "cv")] + plan.items[1:], 3)
    assert other[0].shard_id != s1[0].shard_id
    assert plan_digest(plan.items, {"x": 1}) != plan_digest(plan.items, {"x": 2})
    with pytest.raises(ConfigError):
        make_shards(plan.items, 0)


def test_plan_resolves_each_task_key_once():
    # resolving may parse the tasks file: once per distinct key, not once per candidate row
    asked = []

    def resolve(key):
        asked.append(key)
        return _resolve(key)

    cands = [C(f"r{i}", ("cc", "ss")[i % 2]) for i in range(50)] + [C("none")]
    plan = build_plan(cands, ["carbon", "ss"], resolve)
    assert len(plan.items) == 52
    assert sorted(asked) == ["carbon", "cc", "ss"]


# --- command-line options, configuration checks, summary -------------------------------------------------------


def _leaf_fields(model, prefix: str = "") -> set[str]:
    out = set()
    for name, f in model.model_fields.items():
        ann = f.annotation
        if isinstance(ann, type) and hasattr(ann, "model_fields"):
            out |= _leaf_fields(ann, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def test_every_job_field_is_a_run_option():
    from spec_vetting.cli.run import JOB_OPTIONS

    fields = [f for f, _ in JOB_OPTIONS]
    assert len(fields) == len(set(fields))
    assert set(fields) == _leaf_fields(JobConfig)


def test_options_alone_make_the_same_job_as_a_file(tmp_path, monkeypatch, no_job_env):
    from click.testing import CliRunner

    from spec_vetting.cli import run as run_cli

    seen = {}

    def fake_run_job(job, **kw):
        seen["job"] = job
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("spec_vetting.pipeline.runner.run_job", fake_run_job)
    args = ["--candidates", "a.csv", "--task", "cv", "--task", "wd", "--out", "cat", "--endpoint", "http://a/v1",
            "--engine-option", "max_retries=3", "--engine-option", "extra=[1, 2]", "--max-endpoint-retries", "5",
            "--memory-limit", "2GiB", "--temperature", "0.7", "--self-consistency-k", "3", "--threads",
            "--no-dashboard", "--run-date", "2024-02-03"]
    r = CliRunner().invoke(run_cli.run, args)
    assert r.exit_code == 2 and "stopped by the test" in r.output, r.output
    job = seen["job"]
    assert job.engine.options == {"max_retries": 3, "extra": [1, 2]} and job.budgets.max_endpoint_retries == 5
    assert job.cluster.memory_limit == "2GiB" and job.cluster.processes is False and job.tasks == ["cv", "wd"]
    assert job.sampling.self_consistency_k == 3 and str(job.run_date) == "2024-02-03"
    # a job file's engine options are merged key by key with --engine-option
    p = tmp_path / "job.yaml"
    p.write_text("candidates: [a.csv]\nout: cat\nengine: {name: local, model: m, options: {device: cuda, batch: 4}}\n")
    job = run_cli.build_job(str(p), {"engine__options": ("batch=8",)})
    assert job.engine.options == {"device": "cuda", "batch": 8}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        run_cli.build_job(str(p), {"engine__options": ("batch",)})


def test_self_consistency_needs_a_temperature():
    base = {"candidates": ["a"], "out": "o"}
    with pytest.raises(ConfigError, match="self_consistency_k = 3 needs sampling"):
        job_from_dict({**base, "sampling": {"self_consistency_k": 3}})
    job = job_from_dict({**base, "sampling": {"self_consistency_k": 3, "temperature": 0.7}})
    assert job.sampling.self_consistency_k == 3


def test_final_summary_has_counts_errors_tokens_cache_hits_and_throughput():
    from spec_vetting.cli.run import format_summary
    from spec_vetting.pipeline.execute import summarize
    from spec_vetting.pipeline.runner import RunOutcome

    markers = {
        "s0": {"n": 3, "verdicts": {"cv": {"YES": 2, "ERROR": 1}}, "errors": {"read_error": 1},
               "tokens": {"prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 400}, "inspection_s": 2.0},
        "s1": {"n": 2, "verdicts": {"cv": {"NO": 1}, "wd": {"UNDECIDED": 1}}, "errors": {},
               "tokens": {"prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 600}, "inspection_s": 1.0},
    }
    s = summarize(markers)
    assert s["n_verdicts"] == 5 and s["verdicts_by_task"]["cv"] == {"ERROR": 1, "NO": 1, "YES": 2}
    assert s["tokens"] == {"prompt": 2000, "completion": 100, "cached": 1000, "cache_hit_rate": 0.5}
    s.update(wall_s=2.5, inspections_this_attempt=5, throughput_per_s=2.0)
    text = format_summary(RunOutcome("r1", "2024-01-01", "/cat", "finished", True, s))
    assert "run r1 (finished, resumed)" in text and "YES 2, NO 1, ERROR 1" in text and "UNDECIDED 1" in text
    assert "errors: read_error 1" in text and "cached 1000 (cache hits 50%)" in text
    assert "5 inspections in 2.5 s (2.00/s this attempt)" in text and "catalog: /cat" in text


def test_unfinished_parts_of_a_run_are_removed_others_kept(tmp_path):
    store = RunStore(tmp_path, "r1", "2024-01-01")
    other = RunStore(tmp_path, "r0", "2024-01-01")
    rows = [{**empty_row("verdicts"), "run_id": "r1", "candidate_id": "c", "verdict": "YES"}]
    for st, shard in ((store, "s00000-a"), (store, "s00001-b"), (other, "s00001-b")):
        for table in ("verdicts", "turns"):
            write_parquet_atomic(st.partition(table, "cv") / st.part_name(shard),
                                 rows_to_table(rows if table == "verdicts" else [], table))
    assert store.remove_unfinished_parts({"s00000-a": {}}) == 2
    left = sorted(p.name for p in tmp_path.rglob("*.parquet"))
    assert left == sorted(["part-r1-s00000-a.parquet"] * 2 + ["part-r0-s00001-b.parquet"] * 2)
