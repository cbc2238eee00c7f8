"""`spec-vet render`: a survey file to the picture the model sees (rest frame from the file unless --redshift)."""

from __future__ import annotations

import io

import numpy as np
from click.testing import CliRunner
from PIL import Image

from spec_vetting.cli import main
from spec_vetting.render import image_tokens

LAMOST_DR10 = "lamost/pylasp_3703110.fits"  # reference case real_lamost_dr10_K7, z = -5.617e-05


def _rgb(src) -> np.ndarray:
    with Image.open(src) as im:
        return np.asarray(im.convert("RGB"), dtype=np.int16)


def test_render_matches_the_reference_picture(real_dir, reference_dir, tmp_path):
    out = tmp_path / "ha.png"
    result = CliRunner().invoke(
        main,
        [
            "render",
            str(real_dir / LAMOST_DR10),
            "--range",
            "6500",
            "6620",
            "--title",
            "Spectrum: 3703110.fits",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    ref = _rgb(reference_dir / "renders_mpl3105" / "real_lamost_dr10_K7__6500-6620.png")
    height, width = ref.shape[:2]
    assert f"{width}x{height} px, {image_tokens(width, height)} image tokens" in result.output
    got = _rgb(out)
    assert got.shape == ref.shape
    assert np.array_equal(got, ref)


def test_redshift_option_moves_the_rest_frame(real_dir, tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    runner = CliRunner()
    path = str(real_dir / LAMOST_DR10)
    assert runner.invoke(main, ["render", path, "--range", "6500", "6620", "-o", str(a)]).exit_code == 0
    result = runner.invoke(main, ["render", path, "--range", "6500", "6620", "--redshift", "0.01", "-o", str(b)])
    assert result.exit_code == 0, result.output
    assert "z=0.01" in result.output
    assert not np.array_equal(_rgb(io.BytesIO(a.read_bytes())), _rgb(io.BytesIO(b.read_bytes())))


def test_empty_window_and_bad_files_exit_2_with_a_message(real_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "x.png"
    result = runner.invoke(main, ["render", str(real_dir / LAMOST_DR10), "--range", "1000", "1100", "-o", str(out)])
    assert result.exit_code == 2  # inputs no rerun fixes
    assert "No data points in specified wavelength range" in result.output and LAMOST_DR10 in result.output
    assert not out.exists()
    junk = tmp_path / "junk.fits"
    junk.write_bytes(b"not a fits file")
    result = runner.invoke(main, ["render", str(junk), "-o", str(out)])
    assert result.exit_code == 2
    assert "junk.fits" in result.output


def test_reversed_range_is_a_usage_error(real_dir, tmp_path):
    result = CliRunner().invoke(
        main, ["render", str(real_dir / LAMOST_DR10), "--range", "6620", "6500", "-o", str(tmp_path / "x.png")]
    )
    assert result.exit_code == 2
    assert "MIN must be smaller than MAX" in result.output
