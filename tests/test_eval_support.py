"""Helpers shared by the evaluation, report and export tests: a small catalog in the pipeline's agreed layout.

ROOT/verdicts/run_date=YYYY-MM-DD/task=T/part-0.parquet and ROOT/turns/run_date=.../task=.../part-0.parquet, hive
partitioned, with the agreed column names. Written with pyarrow directly so these tests do not depend on the
pipeline; ``spec_vetting.catalog`` readers read the same layout.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

XSS_IMG = '<img src=x onerror="document.body.setAttribute(\'data-xss\',\'img\')">'
XSS_SCRIPT = "</script><script>document.body.setAttribute('data-xss','script')</script><!--"


def png(width=40, height=30, color=(0, 0, 255)) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, format="PNG")
    return buf.getvalue()


def verdict_row(candidate_id, task, verdict, *, label=None, p_yes=None, status="well_formed", run_id="run-1",
                run_date="2026-01-01", **extra):
    row = {
        "run_id": run_id, "run_date": run_date, "candidate_id": candidate_id, "task": task, "verdict": verdict,
        "status": status, "fallback": None, "p_yes": p_yes, "p_yes_source": "logprobs" if p_yes is not None else None,
        "justification": f"justification of {candidate_id}", "reason": None, "error_kind": None,
        "error_message": None, "engine": "scripted", "engine_version": "0", "model": "test-model",
        "prompt_version": "1", "renderer_version": "1", "survey": "lamost", "variant": "lamost-lrs-image",
        "path": None, "target": None, "obsid": 1000, "plate": None, "mjd": None, "fiberid": 7, "targetid": None,
        "ra": 10.0, "dec": 20.0, "redshift": 0.0, "label": label, "n_turns": 2, "n_tool_calls": 1,
        "zoom_windows": json.dumps([[6500.0, 6600.0]]), "prompt_tokens": 100, "completion_tokens": 20,
        "cached_tokens": 0, "elapsed_s": 0.5, "healpix": 1234,
    }
    row.update(extra)
    return row


def turn_rows(candidate_id, task, verdict="YES", *, run_id="run-1", run_date="2026-01-01", first_text=None,
              image=None):
    image = image or png()
    answer = f"<think>looked</think>\n<answer>\\boxed{{{verdict}}} because</answer>"
    base = {"run_id": run_id, "run_date": run_date, "candidate_id": candidate_id, "task": task,
            "prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0, "latency_s": 0.1, "endpoint": "e0"}
    return [
        {**base, "turn": -1, "assistant_text": None, "tool_call": None, "tool_response_text": None,
         "zoom_min": None, "zoom_max": None, "image_png": png(60, 40, (0, 128, 0))},
        {**base, "turn": 0,
         "assistant_text": first_text or '<think>zoom</think>\n<tool_call>\n{"name": "spectral_visualization_tool", '
                                         '"arguments": {"wavelength_range": [6500, 6600]}}\n</tool_call>',
         "tool_call": json.dumps({"name": "spectral_visualization_tool",
                                  "arguments": {"wavelength_range": [6500, 6600]}}),
         "tool_response_text": "Generated spectral visualization focused on wavelength range (6500, 6600) Å.",
         "zoom_min": 6500.0, "zoom_max": 6600.0, "image_png": image},
        {**base, "turn": 1, "assistant_text": answer, "tool_call": None, "tool_response_text": None,
         "zoom_min": None, "zoom_max": None, "image_png": None},
    ]


def write_catalog(root: Path, verdicts: list[dict], turns: list[dict] | None = None) -> Path:
    """Write rows in the hive layout, one part file per (run_date, task, run_id)."""
    root = Path(root)
    for table_name, rows in (("verdicts", verdicts), ("turns", turns or [])):
        groups: dict[tuple, list[dict]] = {}
        for row in rows:
            groups.setdefault((row["run_date"], row["task"], row["run_id"]), []).append(row)
        for (run_date, task, run_id), group in groups.items():
            folder = root / table_name / f"run_date={run_date}" / f"task={task}"
            folder.mkdir(parents=True, exist_ok=True)
            stripped = [{k: v for k, v in r.items() if k not in ("run_date", "task")} for r in group]
            pq.write_table(pa.Table.from_pylist(stripped), folder / f"part-{run_id}.parquet")
    # run manifests and the LATEST pointer, as the pipeline writes them (ROOT/_runs/<run_id>/manifest.json)
    runs = sorted({(r["run_date"], r["run_id"]) for r in verdicts})
    for run_date, run_id in runs:
        folder = root / "_runs" / run_id
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"run_id": run_id, "run_date": run_date, "status": "finished", "started_at": f"{run_date}T00:00:00Z"}
        (folder / "manifest.json").write_text(json.dumps(manifest))
    if runs:
        (root / "_runs" / "LATEST").write_text(runs[-1][1])
    return root
