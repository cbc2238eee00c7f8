"""Training-data export: LLaMA-Factory ShareGPT records (SFT) and SpecVI-Bench-like rows for verl."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_eval_support import png, turn_rows, verdict_row, write_catalog

from spec_vetting.analysis.training_data import export_sft, export_verl, verl_rows
from spec_vetting.catalog.run_data import read_run
from spec_vetting.cli import main
from spec_vetting.errors import SpectrumReadError
from spec_vetting.inspect.tasks import get_task
from spec_vetting.protocol import SYSTEM_TEXT
from spec_vetting.spectrum import Spectrum, SpectrumMeta

ZOOM_PNG = png(44, 33, (255, 0, 0))


def _catalog(tmp_path):
    builtin = {task: get_task(task).version for task in ("cv", "wd")}
    v = [
        verdict_row("right", "cv", "YES", label="YES", path="/data/spec-1.fits", redshift=0.001),
        verdict_row("wrong", "cv", "NO", label="YES", path="/data/spec-2.fits"),
        verdict_row("reviewed", "wd", "NO", path="/data/spec-3.fits", target="7"),
        verdict_row("recovered", "wd", "YES", label="YES", status="recovered", path=None),
        verdict_row("nolabel", "wd", "YES", path="/data/gone.fits"),
    ]
    for row in v:
        row["prompt_version"] = builtin[row["task"]]
    t = [r for cid, task, ver in [("right", "cv", "YES"), ("wrong", "cv", "NO"), ("reviewed", "wd", "NO"),
                                 ("recovered", "wd", "YES"), ("nolabel", "wd", "YES")]
         for r in turn_rows(cid, task, ver, image=ZOOM_PNG)]
    return write_catalog(tmp_path / "cat", v, t)


def _review_csv(tmp_path):
    path = tmp_path / "review.csv"
    path.write_text("candidate_id,task,verdict,decision,label,comment,reviewer\n"
                    "reviewed,wd,NO,agree,,,ann\nwrong,cv,NO,unsure,,,ann\n")
    return path


def test_sft_records_are_confirmed_trajectories_in_sharegpt(tmp_path):
    from spec_vetting.catalog.labels import read_label_file

    out = tmp_path / "sft"
    summary = export_sft(read_run(_catalog(tmp_path)), out, labels=read_label_file(_review_csv(tmp_path)))
    records = json.loads((out / "spec_vetting_sft.json").read_text())
    assert [r["candidate_id"] for r in records] == ["right", "reviewed"]  # label- or reviewer-confirmed only
    assert summary.written == 2
    assert summary.skipped == {
        "verdict not confirmed by the label": 1,
        "answer format recovered, not well formed (--include-recovered to keep)": 1,
        "no label or reviewer decision": 1,
    }
    rec = records[0]
    conv = rec["conversations"]
    assert [t["from"] for t in conv] == ["system", "human", "gpt", "human", "gpt"]
    assert conv[0]["value"] == SYSTEM_TEXT
    assert conv[1]["value"] == "<image>\n" + get_task("cv").prompt
    assert conv[2]["value"].startswith("<think>zoom</think>\n<tool_call>")
    assert conv[3]["value"] == ("<tool_response>\n<image>Generated spectral visualization focused on wavelength "
                                "range (6500, 6600) Å.\n</tool_response>")
    assert conv[4]["value"].endswith("</answer>")
    n_tokens = sum(t["value"].count("<image>") for t in conv)
    assert n_tokens == len(rec["images"]) == 2
    assert rec["images"] == ["images/lf_cv_0_0.png", "images/lf_cv_0_1.png"]
    assert (out / rec["images"][1]).read_bytes() == ZOOM_PNG
    assert rec["ground_truth"] == "YES" and rec["total_iterations"] == 2 and rec["total_tool_calls"] == 1
    info = json.loads((out / "dataset_info.json").read_text())["spec_vetting_sft"]
    assert info["file_name"] == "spec_vetting_sft.json" and info["formatting"] == "sharegpt"
    assert info["columns"] == {"messages": "conversations", "images": "images"}
    assert info["tags"]["user_tag"] == "human" and info["tags"]["assistant_tag"] == "gpt"


def test_sft_include_recovered_and_cli(tmp_path):
    root = _catalog(tmp_path)
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "o"), "--include-recovered"])
    assert res.exit_code == 0, res.output
    ids = [r["candidate_id"] for r in json.loads((tmp_path / "o" / "spec_vetting_sft.json").read_text())]
    assert ids == ["right", "recovered"]
    assert "2 records written" in res.output


def fake_reader(path, target=None):
    if "gone" in str(path) or "spec-2" in str(path):
        raise SpectrumReadError(path, "file not found", hint="was it moved?")
    wave = np.linspace(3700.0, 9100.0, 3909)
    flux = np.where(wave > 8000, np.nan, 1.0 + 0.1 * np.sin(wave / 50))  # non-finite values are kept as they are
    meta = SpectrumMeta(survey="lamost", variant="lamost-lrs-image", path=str(path), ids={"target": target})
    return Spectrum(wave, flux, np.ones_like(wave), np.zeros(wave.size, bool), "", meta)


def test_verl_rows_like_specvi_bench(tmp_path):
    from spec_vetting.catalog.labels import read_label_file

    out = tmp_path / "rl.parquet"
    summary = export_verl(read_run(_catalog(tmp_path)), out, labels=read_label_file(_review_csv(tmp_path)),
                          read_spectrum=fake_reader)
    rows = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["candidate_id"] for r in rows] == ["right", "reviewed"]
    assert summary.skipped == {"no spectrum file to re-read (inline candidate)": 1,
                               "spectrum file no longer readable "
                               "(a relative path resolves against the current folder)": 1,
                               "no label or reviewer decision": 1}
    row = rows[0]
    assert row["data_source"] == "cv"
    # verl's template appends the tools block to the system message's own text (the agent loop passes tools=):
    # the row holds the sentence alone, or training would show the block twice
    assert row["prompt"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert SYSTEM_TEXT.startswith(row["prompt"][0]["content"] + "\n\n# Tools")
    assert row["prompt"][1]["content"] == "<image>\n" + get_task("cv").prompt
    assert row["reward_model"] == {"style": "rule", "ground_truth": "YES"}
    assert row["images"][0]["bytes"][:4] == b"\x89PNG"
    kw = row["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]
    assert len(kw["wavelength"]) == len(kw["flux"]) == 3909  # the whole array, no pixel dropped
    assert np.isnan(kw["flux"][-1])
    assert kw["redshift"] == pytest.approx(0.001)
    assert row["extra_info"]["name"] == "spec-1.fits"
    assert rows[1]["reward_model"]["ground_truth"] == "NO"  # from the reviewer's agree on a NO verdict


def test_verl_reads_the_target_as_int(tmp_path):
    seen = []

    def reader(path, target=None):
        seen.append(target)
        return fake_reader(path, target)

    export_verl(read_run(_catalog(tmp_path)), tmp_path / "x.parquet",
                labels={("reviewed", "wd"): "NO"}, read_spectrum=reader)
    assert 7 in seen  # the catalog stores DESI TARGETIDs as text; the reader gets the integer back


def test_specvi_rows_get_their_own_prompt_and_inline_arrays_back(tmp_path):
    from test_bench_specvi import write_specvi_file

    from spec_vetting.io.candidates import load_candidates

    source = tmp_path / "test_cv.parquet"
    write_specvi_file(source, "cv", ["YES", "NO"])
    cands = load_candidates(source)
    asked = get_task("cv").with_prompt(cands[0].prompt)
    assert asked.version != get_task("cv").version
    v = [verdict_row(str(c.candidate_id), "cv", c.label, label=c.label, path=str(source), prompt_version=asked.version)
         for c in cands]
    v[1]["prompt_version"] = "some-other-prompt"  # cannot be rebuilt exactly: skipped, not exported wrong
    t = [r for c in cands for r in turn_rows(str(c.candidate_id), "cv", c.label)]
    data = read_run(write_catalog(tmp_path / "cat", v, t))
    summary = export_sft(data, tmp_path / "sft")
    rec = json.loads((tmp_path / "sft" / "spec_vetting_sft.json").read_text())
    assert summary.written == 1 and rec[0]["conversations"][1]["value"] == "<image>\n" + asked.prompt
    rows, summary = verl_rows(data)
    assert len(rows) == 1 and rows[0]["prompt"][1]["content"] == "<image>\n" + asked.prompt
    kw = rows[0]["extra_info"]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]
    assert len(kw["flux"]) == 3909 and kw["flux"] == pytest.approx(list(cands[0].inline.flux))


TASKS_YAML = """tasks:
  - key: hotstar
    class_name: O/B-type star
    prompt: "Analyze the provided spectrum to determine if it is an **O/B-type star**.\\n- He II 4686 absorption"
"""


def _custom_task_catalog(tmp_path, recorded_tasks_file):
    """A run of a task defined only in a tasks file; the manifest records that file like `spec-vet run` does."""
    tasks_file = tmp_path / "tasks.yaml"
    tasks_file.write_text(TASKS_YAML)
    task = get_task("hotstar", tasks_file)
    v = [verdict_row("hot-1", "hotstar", "YES", label="YES", path="/data/spec-1.fits", prompt_version=task.version)]
    root = write_catalog(tmp_path / "cat", v, turn_rows("hot-1", "hotstar", "YES"))
    manifest = root / "_runs" / "run-1" / "manifest.json"
    m = json.loads(manifest.read_text())
    m["job"] = {"tasks_file": str(recorded_tasks_file or "")}
    manifest.write_text(json.dumps(m))
    return root, tasks_file, task


def test_tasks_of_the_runs_tasks_file_get_their_prompt_back(tmp_path):
    root, tasks_file, task = _custom_task_catalog(tmp_path, None)
    data = read_run(root)
    summary = export_sft(data, tmp_path / "no-file")
    assert summary.written == 0 and list(summary.skipped) == [
        "task not defined here (a task of the run's tasks file: pass --tasks-file; tasks file used: none)"]
    summary = export_sft(data, tmp_path / "sft", tasks_file=tasks_file)
    rec = json.loads((tmp_path / "sft" / "spec_vetting_sft.json").read_text())
    assert summary.written == 1 and rec[0]["conversations"][1]["value"] == "<image>\n" + task.prompt
    rows, _ = verl_rows(data, tasks_file=tasks_file, read_spectrum=fake_reader)
    assert rows[0]["data_source"] == "hotstar" and rows[0]["prompt"][1]["content"] == "<image>\n" + task.prompt
    # the file edited since the run: its prompt no longer hashes to the recorded version, so nothing is exported
    tasks_file.write_text(TASKS_YAML.replace("He II 4686", "He I 4471"))
    summary = export_sft(data, tmp_path / "edited", tasks_file=tasks_file)
    assert summary.written == 0 and "prompt text not recoverable" in next(iter(summary.skipped))


def test_prompt_recorded_in_the_manifest_survives_a_lost_or_edited_tasks_file(tmp_path):
    root, tasks_file, task = _custom_task_catalog(tmp_path, None)
    manifest = root / "_runs" / "run-1" / "manifest.json"
    m = json.loads(manifest.read_text())
    m["tasks"] = {"hotstar": {"class_name": task.class_name, "prompt_version": task.version, "prompt": task.prompt}}
    manifest.write_text(json.dumps(m))
    tasks_file.unlink()  # gone: the manifest's copy serves
    summary = export_sft(read_run(root), tmp_path / "sft")
    rec = json.loads((tmp_path / "sft" / "spec_vetting_sft.json").read_text())
    assert summary.written == 1 and rec[0]["conversations"][1]["value"] == "<image>\n" + task.prompt
    tasks_file.write_text(TASKS_YAML.replace("He II 4686", "He I 4471"))  # edited: the manifest's copy serves
    rows, _ = verl_rows(read_run(root), tasks_file=tasks_file, read_spectrum=fake_reader)
    assert rows[0]["prompt"][1]["content"] == "<image>\n" + task.prompt
    m["tasks"]["hotstar"]["prompt_version"] = "user-000000000000"  # a copy of another version is never used
    manifest.write_text(json.dumps(m))
    assert export_sft(read_run(root), tmp_path / "other").written == 0


def test_cli_export_uses_the_tasks_file_recorded_in_the_manifest(tmp_path):
    root, tasks_file, _ = _custom_task_catalog(tmp_path, tmp_path / "tasks.yaml")
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "1 records written" in res.output


def test_cli_export_tasks_file_problems_are_clear(tmp_path):
    root, tasks_file, _ = _custom_task_catalog(tmp_path, tmp_path / "moved" / "tasks.yaml")
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "o")])
    assert res.exit_code == 0 and "0 records written" in res.output
    assert "moved/tasks.yaml, which is not found from here" in res.output and "--tasks-file" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks: [\n")
    res = CliRunner().invoke(main, ["export", "verl", str(root), "-o", str(tmp_path / "x.parquet"),
                                    "--tasks-file", str(bad)])
    assert res.exit_code == 2 and "bad.yaml" in res.output and "Traceback" not in res.output


def test_task_of_each_key_is_looked_up_once(monkeypatch):
    # get_task parses the tasks file on every call: an export of many rows must not repeat it per row
    import spec_vetting.analysis.training_data as export_module

    calls = []

    def counting_get_task(key, tasks_file=None):
        calls.append(key)
        return get_task(key, tasks_file)

    monkeypatch.setattr(export_module, "get_task", counting_get_task)
    sources = export_module._Sources()
    version = get_task("cv").version
    rows = [{"task": t, "candidate_id": f"c{i}", "prompt_version": version if t == "cv" else None}
            for i, t in enumerate(["cv", "cv", "cv", "nope", "nope"])]
    results = [sources.task(r) for r in rows]
    assert [r.key for r in results[:3]] == ["cv"] * 3
    assert all(isinstance(r, str) and "task not defined here" in r for r in results[3:])
    assert sorted(calls) == ["cv", "nope"]
