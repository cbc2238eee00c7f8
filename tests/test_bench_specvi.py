"""`spec-vet bench specvi`: a small file in the SpecVI-Bench format, run end to end with the rules engine."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_eval_support import png

from spec_vetting.cli import main
from spec_vetting.protocol import SYSTEM_TEXT


def write_specvi_file(path, task, labels, seed=0, images=None):
    """Rows as protocol section 7 describes SpecVI-Bench (written by hand, independent of the readers)."""
    rng = np.random.default_rng(seed)
    wave = np.linspace(3700.0, 9100.0, 3909)
    rows = []
    for i, label in enumerate(labels):
        flux = 100 + rng.normal(0, 2, wave.size)
        if label == "YES":  # a strong H-alpha emission line
            flux += 300 * np.exp(-0.5 * ((wave - 6563) / 8) ** 2)
        rows.append({
            "images": [{"bytes": png() if images is None else images[i], "path": None}],
            "data_source": task,
            "prompt": [{"role": "system", "content": SYSTEM_TEXT},
                       {"role": "user", "content": "<image>Analyze the provided spectrum to determine if it is a "
                                                   "**Cataclysmic Variables (CV)**.\n- broad Balmer emission"}],
            "reward_model": {"ground_truth": label, "style": "rule"},
            "agent_name": "tool_agent",
            "extra_info": {"index": i, "name": f"spec-5600{i}-X_sp01-00{i}.fits.gz", "tools_kwargs": {
                "spectral_visualization_tool": {"create_kwargs": {
                    "wavelength": wave.tolist(), "flux": flux.tolist(), "redshift": None}}}},
        })
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_folder_without_parquet_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(main, ["bench", "specvi", str(tmp_path)])
    assert res.exit_code == 2 and "no file matches" in res.output


@pytest.mark.slow
def test_bench_runs_the_pipeline_and_evaluates(tmp_path):
    pytest.importorskip("spec_vetting.io.candidates", reason="candidate loader (SpecVI-Bench parquet) not built yet")
    data = tmp_path / "specvi"
    data.mkdir()
    write_specvi_file(data / "test_cv.parquet", "cv", ["YES", "NO"])
    res = CliRunner().invoke(main, ["bench", "specvi", str(data), "--engine", "rules", "--in-process",
                                    "--workers", "1", "--out", str(tmp_path / "cat"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    cv = out["per_task"]["cv"]
    assert cv["n"] == 2  # every row evaluated against reward_model.ground_truth
    assert 0.0 <= cv["f1"] <= 1.0 and out["macro_f1"] == pytest.approx(cv["f1"])
    assert out["unlabelled"] == 0
    # the file is the test split: this run is comparable with the published table, and says what it ran
    assert out["table1_comparable"] is True and out["data"] == {"SpecVI-Bench test_cv.parquet": 2}
    assert list(out["engines"]) == ["rules"]
    # each row was asked with the prompt of the file, not the built-in one
    from spec_vetting.catalog.run_data import read_run
    from spec_vetting.inspect.tasks import get_task
    from spec_vetting.io.candidates import load_candidates

    asked = get_task("cv").with_prompt(load_candidates(data / "test_cv.parquet")[0].prompt).version
    assert {r["prompt_version"] for r in read_run(tmp_path / "cat", with_turns=False).verdicts} == {asked}


@pytest.mark.slow
def test_first_picture_is_the_rows_own_image_unless_rerender(tmp_path):
    from spec_vetting.catalog.run_data import read_run
    from spec_vetting.synthetic.specvi import full_view_png

    data = tmp_path / "specvi"
    data.mkdir()
    images = [png(40, 30, (255, 0, 0)), b"GIF89a, not a PNG", png(50, 30, (0, 255, 0))]
    write_specvi_file(data / "test_cv.parquet", "cv", ["YES", "NO", "NO"], images=images)
    spectra = pq.read_table(data / "test_cv.parquet").column("extra_info").to_pylist()
    seen = {}
    for mode, flag in (("own", []), ("drawn", ["--rerender"])):
        res = CliRunner().invoke(main, ["bench", "specvi", str(data), "--engine", "rules", "--in-process",
                                        "--workers", "1", "--out", str(tmp_path / mode), "--json", *flag])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output[res.output.index("{"):])
        run = read_run(tmp_path / mode)
        seen[mode] = {r["candidate_id"]: r for r in run.verdicts}, run, out
    own, run, out = seen["own"]
    names = [f"spec-5600{i}-X_sp01-00{i}" for i in range(3)]
    for i in (0, 2):  # the row's own bytes, untouched, are the first picture the engine was given
        assert run.initial_image(names[i], "cv") == images[i]
        assert own[names[i]]["initial_image_source"] == "specvi" and own[names[i]]["verdict"] in ("YES", "NO")
    bad = own[names[1]]  # a picture that is not a PNG: an ERROR row naming file and row, the others go on
    assert bad["verdict"] == "ERROR" and bad["error_kind"] == "image_error"
    assert "test_cv.parquet, row 2: images[0].bytes is not a PNG" in bad["error_message"]
    assert bad["initial_image_source"] is None and run.initial_image(names[1], "cv") is None
    assert out["first_pictures"] == {"none": 1, "specvi": 2}
    manifest = json.loads(next((tmp_path / "own" / "_runs").glob("*/manifest.json")).read_text())
    assert manifest["first_pictures"] == {"specvi_planned": 3, "rendered_planned": 0}
    assert manifest["job"]["specvi_rerender"] is False

    drawn, run, out = seen["drawn"]
    for i, name in enumerate(names):  # --rerender: every row drawn by the renderer, as before
        create = spectra[i]["tools_kwargs"]["spectral_visualization_tool"]["create_kwargs"]
        assert run.initial_image(name, "cv") == full_view_png(create["wavelength"], create["flux"])
        assert drawn[name]["initial_image_source"] == "rendered" and drawn[name]["verdict"] in ("YES", "NO")
    assert out["first_pictures"] == {"rendered": 3}
    manifest = json.loads(next((tmp_path / "drawn" / "_runs").glob("*/manifest.json")).read_text())
    assert manifest["first_pictures"] == {"specvi_planned": 0, "rendered_planned": 3}
