"""SpecVI-Bench parquet rows: written in the published layout, read back as candidates with inline spectra."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spec_vetting.errors import CandidateListError
from spec_vetting.io.candidates import load_candidates
from spec_vetting.io.specvi import is_specvi_parquet, read_specvi_rows
from spec_vetting.synthetic.specvi import write_specvi_parquet
from spec_vetting.synthetic.synthetic import make_spectrum


def _rows():
    a = make_spectrum("carbon", seed=1)
    b = make_spectrum("qso", seed=2)
    return [
        {"task": "cc", "label": "YES", "wavelength": a.wavelength, "flux": a.flux, "redshift": None,
         "name": "spec-56414-HD161547N531412F01_sp07-098.fits.gz", "index": 17, "prompt": "Is it **Carbon**?"},
        {"task": "cv", "label": "NO", "wavelength": b.wavelength, "flux": b.flux, "redshift": 0.8, "index": 3},
    ]  # fmt: skip


def test_round_trip_as_candidates(tmp_path):
    path = write_specvi_parquet(tmp_path / "test_cc.parquet", _rows())
    assert is_specvi_parquet(path)
    schema = pq.read_schema(path)
    assert {"data_source", "prompt", "images", "reward_model", "extra_info", "agent_name"} <= set(schema.names)
    c1, c2 = load_candidates(path)
    assert (c1.candidate_id, c1.task, c1.label) == ("spec-56414-HD161547N531412F01_sp07-098", "carbon", "YES")
    assert c1.prompt == "Is it **Carbon**?"  # the text after the <image> placeholder
    assert (c2.candidate_id, c2.task, c2.label) == ("specvi-cv-3", "cv", "NO")
    assert c2.prompt.startswith("Analyze the provided spectrum to determine if it is a **Cataclysmic")
    s1 = c1.load_spectrum()
    assert s1.meta.redshift == 0.0  # null redshift means 0
    assert s1.meta.variant == "specvi-inline" and s1.meta.survey == "lamost"
    assert s1.meta.ids == {"lmjd": 56414, "planid": "HD161547N531412F01", "spid": 7, "fiberid": 98}
    assert np.array_equal(s1.flux, _rows()[0]["flux"]) and np.array_equal(s1.wavelength, _rows()[0]["wavelength"])
    assert np.all(s1.ivar > 0) and np.isfinite(s1.ivar).all()
    assert c2.load_spectrum().meta.redshift == pytest.approx(0.8)


def test_json_text_extra_info_and_nan_flux(tmp_path):
    w = np.linspace(3700, 9000, 50)
    f = np.ones(50)
    f[5] = np.nan
    extra = {"index": 0, "name": None, "tools_kwargs": {"spectral_visualization_tool": {
        "create_kwargs": {"wavelength": w.tolist(), "flux": [None if np.isnan(x) else x for x in f], "redshift": 0.1}}}}
    table = pa.table({
        "data_source": ["wd"],
        "prompt": [json.dumps([{"role": "user", "content": "<image>\nIs it a WD?"}])],
        "reward_model": [{"ground_truth": "yes"}],
        "extra_info": [json.dumps(extra)],
    })  # fmt: skip
    pq.write_table(table, tmp_path / "t.parquet")
    (c,) = load_candidates(tmp_path / "t.parquet")
    assert (c.task, c.label, c.prompt, c.candidate_id) == ("wd", "YES", "Is it a WD?", "specvi-wd-0")
    s = c.load_spectrum()
    assert s.mask[5] and s.ivar[5] == 0 and s.meta.redshift == pytest.approx(0.1)


def test_bad_ground_truth_names_the_row(tmp_path):
    rows = _rows()
    rows[1]["label"] = "MAYBE"
    path = write_specvi_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(CandidateListError, match=r"row 2: reward_model.ground_truth is 'MAYBE'"):
        read_specvi_rows(path)


def test_plain_parquet_is_not_specvi(tmp_path):
    pq.write_table(pa.table({"path": ["a.fits"]}), tmp_path / "plain.parquet")
    assert not is_specvi_parquet(tmp_path / "plain.parquet")
    with pytest.raises(CandidateListError, match="missing SpecVI-Bench column"):
        read_specvi_rows(tmp_path / "plain.parquet")


# --- the row's own full view (`images`) ------------------------------------------------------------------------


def test_image_is_read_per_row_only_when_asked(tmp_path, monkeypatch):
    from test_eval_support import png

    from spec_vetting.io import specvi
    from spec_vetting.synthetic.specvi import full_view_png

    rows = _rows()
    rows[0]["image"] = png(40, 30, (255, 0, 0))
    path = write_specvi_parquet(tmp_path / "test_cc.parquet", rows)
    cell = pq.read_table(path, columns=["images"]).column("images").to_pylist()
    assert cell[0] == [{"bytes": rows[0]["image"], "path": None}]  # the published layout: list of {bytes, path}
    reads = []
    monkeypatch.setattr(specvi, "_images_of_group", lambda *a: reads.append(a) or (_ for _ in ()).throw(AssertionError))
    c1, c2 = load_candidates(path)  # listing reads no picture
    assert not reads and (c1.image_row, c2.image_row) == (0, 1)
    monkeypatch.undo()
    assert c1.load_initial_image() == rows[0]["image"]
    assert c2.load_initial_image() == full_view_png(rows[1]["wavelength"], rows[1]["flux"], 0.8)  # drawn by default


def test_without_images_there_is_nothing_to_show(tmp_path):
    path = write_specvi_parquet(tmp_path / "t.parquet", _rows(), draw_images=False)
    assert [c.load_initial_image() for c in load_candidates(path)] == [None, None]  # empty cells: drawn later
    table = pq.read_table(path).drop_columns(["images"])
    pq.write_table(table, tmp_path / "no_images.parquet")
    assert [c.image_row for c in load_candidates(tmp_path / "no_images.parquet")] == [None, None]


def test_a_picture_that_is_not_a_png_names_file_and_row(tmp_path):
    from spec_vetting.errors import ImageReadError
    from spec_vetting.io.specvi import read_specvi_image

    rows = _rows()
    rows[1]["image"] = b"GIF89a not a png"
    path = write_specvi_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(ImageReadError, match=r"bad\.parquet, row 2: images\[0\]\.bytes is not a PNG") as err:
        load_candidates(path)[1].load_initial_image()
    assert err.value.kind == "image_error"
    rows[1]["image"] = rows[0].get("image") or b"\x89PNG\r\n\x1a\n" + b"\0" * 20  # signature, then garbage
    write_specvi_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(ImageReadError, match="row 2: images.0..bytes is a damaged PNG"):
        read_specvi_image(tmp_path / "bad.parquet", 1)
    with pytest.raises(ImageReadError, match="row 9: cannot read the images cell"):
        read_specvi_image(tmp_path / "bad.parquet", 8)
