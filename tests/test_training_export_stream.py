"""The training export walks a run a slice at a time: the records file is what json.dumps writes for the whole
list, slices of SLICE_ROWS verdicts are loaded one after another, and the records are those a reading of the
catalog rows says they should be (each confirmed verdict once, in task and candidate order, its own pictures)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_eval_support import png, turn_rows, verdict_row, write_catalog

from spec_vetting.analysis import training_data as export_module
from spec_vetting.cli import main
from spec_vetting.inspect.tasks import get_task
from spec_vetting.spectrum import Spectrum, SpectrumMeta


@pytest.mark.parametrize("items", [[], [{"a": 1}], [{"a": "x\ny", "b": ["é", {"c": None}]}, {"d": 2.5}, [1, 2]]])
def test_json_array_file_writes_what_json_dumps_writes(tmp_path, items):
    path = tmp_path / "a.json"
    out = export_module._JsonArrayFile(path)
    for item in items:
        out.add(item)
    out.close()
    assert path.read_text(encoding="utf-8") == json.dumps(items, ensure_ascii=False, indent=1)
    assert not (tmp_path / "a.json.tmp").exists()


def _catalog(tmp_path, n=23):
    versions = {t: get_task(t).version for t in ("cv", "wd")}
    verdicts, turns, expect = [], [], []
    for i in range(n):
        task = "cv" if i % 2 else "wd"
        verdict = "YES" if i % 3 else "NO"
        label = None if i % 5 == 0 else ("YES" if i % 4 else "NO")
        cid = f"c{(i * 7) % n:03d}"
        verdicts.append(verdict_row(cid, task, verdict, label=label, path=f"/data/{cid}.fits",
                                    prompt_version=versions[task]))
        turns += turn_rows(cid, task, verdict, image=png(30 + i, 20, (i, 0, 0)))
        if label == verdict:
            expect.append((task, cid, 30 + i))
    return write_catalog(tmp_path / "cat", verdicts, turns), sorted(expect)


def _reader(path, target=None):
    import numpy as np

    wave = np.linspace(3700.0, 9000.0, 50)
    return Spectrum(wave, np.ones_like(wave), np.ones_like(wave), np.zeros(50, bool), "",
                    SpectrumMeta(survey="lamost", variant="lamost-lrs-image", path=str(path), ids={}))


def test_sft_export_streams_slices_and_keeps_every_confirmed_trajectory(tmp_path, monkeypatch):
    from PIL import Image

    root, expect = _catalog(tmp_path)
    monkeypatch.setattr(export_module, "SLICE_ROWS", 4)
    asked = []
    real = export_module.walk_run

    def spy(*a, **k):
        for pairs, data in real(*a, **k):
            asked.append(len(data.verdicts))
            yield pairs, data

    monkeypatch.setattr(export_module, "walk_run", spy)
    res = CliRunner().invoke(main, ["export", "sft", str(root), "-o", str(tmp_path / "sft"),
                                    "--allow-non-model-traces"])
    assert res.exit_code == 0, res.output
    labelled = 23 - len(range(0, 23, 5))
    assert asked == [4] * (labelled // 4) + [labelled % 4]
    records = json.loads((tmp_path / "sft" / "spec_vetting_sft.json").read_text(encoding="utf-8"))
    assert [(r["task"], r["candidate_id"]) for r in records] == [(t, c) for t, c, _ in expect]
    assert [r["sample_index"] for r in records] == list(range(len(records)))
    for record, (_, _, width) in zip(records, expect, strict=True):
        zoom = Image.open(tmp_path / "sft" / record["images"][1])
        assert zoom.size == (width, 20)  # the pair's own zoom picture, not a neighbour's
    assert f"{len(records)} records written" in res.output


def test_verl_export_streams_into_one_parquet_file(tmp_path, monkeypatch):
    root, expect = _catalog(tmp_path)
    monkeypatch.setattr(export_module, "SLICE_ROWS", 3)
    slices = export_module.slices_from_catalog(root)
    summary = export_module.export_verl(slices, tmp_path / "rl.parquet", read_spectrum=_reader)
    table = pq.read_table(tmp_path / "rl.parquet")
    assert table.schema == export_module.VERL_SCHEMA
    rows = table.to_pylist()
    labelled = 23 - len(range(0, 23, 5))
    assert summary.written == len(rows) == labelled  # every labelled row, confirmed or not
    assert [r["extra_info"]["index"] for r in rows] == list(range(labelled))
    assert summary.skipped == {"no label or reviewer decision": 23 - labelled}


def test_walk_run_gives_each_slice_its_rows_and_turns(tmp_path):
    import pyarrow as pa

    from spec_vetting.catalog.run_data import read_run
    from spec_vetting.catalog.walk import walk_data, walk_run

    root, _ = _catalog(tmp_path, n=17)
    whole = read_run(root, pictures=False)
    pairs = sorted({(v["task"], v["candidate_id"]) for v in whole.verdicts} | {("cv", "missing"), ("zz", "c001")})
    keys = pa.table({"candidate_id": [c for _, c in pairs], "task": [t for t, _ in pairs],
                     "label": ["NO"] * len(pairs)})
    walked = list(walk_run(root, whole.run_id, keys, 5, replace=("label",)))
    in_memory = list(walk_data(whole, keys, 5, replace=("label",)))
    assert [p for p, _ in walked] == [p for p, _ in in_memory] == [
        [(c, t) for t, c in pairs[i:i + 5]] for i in range(0, len(pairs), 5)]
    for (slice_pairs, a), (_, b) in zip(walked, in_memory, strict=True):
        assert [(r["candidate_id"], r["task"]) for r in a.verdicts] == [p for p in slice_pairs if p in
                                                                        {(v["candidate_id"], v["task"]) for v in
                                                                         whole.verdicts}]
        assert all(r["label"] == "NO" for r in a.verdicts)
        assert [(r["candidate_id"], r["verdict"]) for r in a.verdicts] == [(r["candidate_id"], r["verdict"])
                                                                           for r in b.verdicts]
        for r in a.verdicts:
            key = (r["candidate_id"], r["task"])
            assert [t["turn"] for t in a.turns[key]] == [-1, 0, 1]
            assert [t["image_png"] for t in a.turns[key]] == [t["image_png"] for t in whole.turns[key]]
        assert set(a.turns) == {(r["candidate_id"], r["task"]) for r in a.verdicts}
    with pytest.raises(ValueError, match="sorted"):
        list(walk_run(root, whole.run_id, keys.take([1, 0]), 5))
