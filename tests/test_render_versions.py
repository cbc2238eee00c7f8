"""Pictures of runs drawn by an earlier renderer version: re-rendered and hash-checked where the versions agree,
refused with the reason where they cannot agree; and a plotting stack other than the trained one stops commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spec_vetting.catalog.pictures import PictureMismatchError, _mismatch_reason, render_picture
from spec_vetting.errors import PlottingEnvironmentError
from spec_vetting.render import RENDERER_VERSION, SAME_PICTURES_EXCEPT, check_matplotlib_version, render_spectrum

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def example_file(tmp_path_factory):
    from spec_vetting.synthetic.examples import write_examples

    folder = tmp_path_factory.mktemp("examples")
    rows = write_examples(folder, n=4, seed=3)
    path = Path(rows[0]["path"])
    return path if path.is_absolute() else folder / path


def _turn(version, window=(6500.0, 6620.0)):
    return {"renderer_version": version, "zoom_min": window[0], "zoom_max": window[1], "turn": 0,
            "picture_title": "Spectrum"}


def test_a_picture_of_the_previous_version_is_drawn_again(example_file):
    from spec_vetting.io import read_spectrum

    previous = "spec-o3-mpl3.10.5-r3"
    assert previous in SAME_PICTURES_EXCEPT and previous != RENDERER_VERSION
    verdict = {"candidate_id": "c", "path": str(example_file), "target": None, "redshift": None}
    png = render_picture(verdict, _turn(previous))
    spectrum = read_spectrum(example_file)
    assert png == render_spectrum(spectrum.wavelength, spectrum.flux, (6500.0, 6620.0))


def test_a_picture_of_an_unrelated_version_is_refused(example_file):
    verdict = {"candidate_id": "c", "path": str(example_file), "target": None, "redshift": None}
    with pytest.raises(PictureMismatchError, match="renderer spec-o3-mpl3.11-r2.*store_pictures"):
        render_picture(verdict, _turn("spec-o3-mpl3.11-r2"))


def test_a_hash_mismatch_of_the_previous_version_says_it_cannot_be_drawn():
    text = _mismatch_reason("c", "cv", 2, "a" * 64, "b" * 64, "spec-o3-mpl3.10.5-r3")
    assert "no major x tick" in text and "cannot draw" in text and RENDERER_VERSION in text
    assert "different renderer dependencies" in _mismatch_reason("c", "cv", 2, "a", "b", RENDERER_VERSION)


def test_another_freetype_is_refused_naming_both():
    check_matplotlib_version("3.10.5", ("2.6.1", "local"))
    with pytest.raises(PlottingEnvironmentError, match=r"2\.6\.1, local build.*FreeType 2\.13\.2 \(system build\)"):
        check_matplotlib_version("3.10.5", ("2.13.2", "system"))


@pytest.fixture(scope="module")
def wrong_matplotlib(tmp_path_factory) -> dict:
    """An environment whose matplotlib says it is 3.11.2 (a sitecustomize module changes the version it reports)."""
    folder = tmp_path_factory.mktemp("wrong_mpl")
    (folder / "sitecustomize.py").write_text("import matplotlib\nmatplotlib.__version__ = '3.11.2'\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.parametrize("command", ["render", "inspect", "run"])
def test_a_wrong_matplotlib_stops_the_command_in_one_line(command, wrong_matplotlib, example_file, tmp_path):
    args = {"render": ["render", str(example_file), "-o", str(tmp_path / "x.png")],
            "inspect": ["inspect", str(example_file), "--task", "cv"],
            "run": ["run", "--candidates", str(example_file.parent / "candidates.csv"), "--task", "cv",
                    "--engine", "rules", "--out", str(tmp_path / "out")]}[command]
    proc = subprocess.run([sys.executable, "-m", "spec_vetting", *args], capture_output=True, text=True,
                          env=wrong_matplotlib, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "matplotlib 3.11.2 is installed" in lines[0] and "3.10.5" in lines[0], proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "x.png").exists()


def test_the_zoom_tool_never_tells_the_model_about_a_broken_install():
    from spec_vetting.inspect.zoom import ZoomTool

    def broken(*args, **kwargs):
        raise PlottingEnvironmentError("matplotlib 3.11.2 is installed")

    tool = ZoomTool(np.linspace(4000, 8000, 100), np.ones(100), renderer=broken)
    with pytest.raises(PlottingEnvironmentError):
        tool.call({"wavelength_range": [5000, 6000]})
