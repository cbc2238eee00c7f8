"""The run manifest as pipeline/manifest.py builds it: a new run, a resumed attempt, a failed and a finished end."""

from __future__ import annotations

from types import SimpleNamespace

from spec_vetting.catalog.schema import MANIFEST_SCHEMA
from spec_vetting.pipeline.config import job_from_dict
from spec_vetting.pipeline.manifest import finish_manifest, plan_counts, start_manifest
from spec_vetting.pipeline.plan import Plan, WorkItem

IDENTITY = SimpleNamespace(engine="scripted", engine_version="1", model="m", model_info={"x": 1})
TASK = SimpleNamespace(class_name="cataclysmic variable", version="v1", prompt="Is it a CV?")


def _summary(n=2):
    return {"n_verdicts": n, "verdicts_by_task": {"cv": {"YES": n}}, "errors_by_kind": {},
            "tokens": {"prompt": 10, "completion": 2, "cached": 0, "cache_hit_rate": 0.0}, "inspection_s": 1.5}


def _start(tmp_path, previous=None):
    (tmp_path / "list.csv").write_text("path\na.fits\n")
    job = job_from_dict({"candidates": [str(tmp_path / "list.csv")], "out": str(tmp_path / "cat")})
    plan = Plan(items=[WorkItem(candidate=SimpleNamespace(candidate_id=f"c{i}"), task="cv") for i in range(2)],
                tasks=["cv"])
    counts = plan_counts(plan, n_candidates=2, n_pairs=2, n_shards=1, shard_size=2, skipped_incremental=0)
    return start_manifest(previous, run_id="r1", run_date="2024-01-01", digest="d", job=job, identity=IDENTITY,
                          tasks={"cv": TASK}, renderer_version="rv", counts=counts, pending_shards=1)


def test_new_run_then_failed_then_resumed_and_finished(tmp_path):
    m = _start(tmp_path)
    assert (m["status"], m["schema"], m["plan_digest"], m["finished_at"]) == ("running", MANIFEST_SCHEMA, "d", None)
    assert m["counts"] == {"candidates": 2, "pairs_planned": 2, "pairs_by_task": {"cv": 2},
                           "skipped_task_not_selected": 0, "skipped_incremental": 0, "pairs": 2, "shards": 1,
                           "shard_size": 2}
    assert m["tasks"] == {"cv": {"class_name": "cataclysmic variable", "prompt_version": "v1", "prompt": "Is it a CV?"}}
    assert m["engine"] == {"engine": "scripted", "engine_version": "1", "model": "m", "model_info": {"x": 1}}
    assert m["inputs"][0]["kind"] == "file" and len(m["attempts"]) == 1

    finish_manifest(m, _summary(1), wall_s=2.0, inspections=1, failures=[f"shard {i}" for i in range(60)])
    assert m["status"] == "failed" and len(m["failures"]) == 50 and "timings" not in m
    assert m["counts"]["verdicts"] == 1 and m["attempts"][0]["wall_s"] == 2.0

    m["inputs"][0]["sha256"] = "kept from the first attempt"
    again = _start(tmp_path, previous=m)
    assert again["started_at"] == m["started_at"] and again["inputs"] == m["inputs"]
    assert len(again["attempts"]) == 2 and again["status"] == "running"
    finish_manifest(again, _summary(2), wall_s=3.0, inspections=1, failures=[])
    assert again["status"] == "finished" and again["finished_at"] and again["counts"]["verdicts"] == 2
    assert again["timings"] == {"wall_s_last_attempt": 3.0, "wall_s_all_attempts": 5.0, "inspection_s": 1.5}
