"""One spelling of --run (alias --run-id) in every command, an unknown run refused with exit 2 before anything is
written (no rerun fixes it), exit 2 for inputs no rerun can fix, and one candidate id for a DESI target in `inspect`
and `run`."""

from __future__ import annotations

import csv
import json

import click
import pytest
from click.testing import CliRunner
from test_eval_support import turn_rows, verdict_row, write_catalog

from spec_vetting.cli import COMMANDS, main


@pytest.fixture()
def root(tmp_path):
    v = [verdict_row("c1", "cv", "YES", label="YES", p_yes=0.9), verdict_row("c2", "cv", "NO", label="NO")]
    return write_catalog(tmp_path / "cat", v, turn_rows("c1", "cv") + turn_rows("c2", "cv", "NO"))


def _all_commands():
    """(path, click command) of every command and subcommand of spec-vet."""
    ctx = click.Context(main)
    out = []
    for name in COMMANDS:
        cmd = main.get_command(ctx, name)
        out.append((name, cmd))
        if isinstance(cmd, click.Group):
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
    return out


def test_every_run_option_is_spelled_run_with_run_id_as_alias():
    seen = []
    for path, cmd in _all_commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and ("--run" in p.opts or "--run-id" in p.opts):
                assert p.opts[:2] == ["--run", "--run-id"], (path, p.opts)
                seen.append(path)
    # every command that takes a run (the export of the catalog and its pictures included)
    assert {"eval", "report", "review-queue", "review import", "export sft", "export verl", "catalog export",
            "catalog picture", "plan", "run"} <= set(seen)


def _decisions(tmp_path):
    f = tmp_path / "d.csv"
    with open(f, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, ["candidate_id", "task", "decision"])
        w.writeheader()
        w.writerow({"candidate_id": "c1", "task": "cv", "decision": "agree"})
    return f


@pytest.mark.parametrize("flag", ["--run", "--run-id"])
def test_an_unknown_run_is_refused_with_exit_2_by_every_command(root, tmp_path, flag):
    out = tmp_path / "out"
    commands = {
        "eval": ["eval", str(root)],
        "report": ["report", str(root), "-o", str(out)],
        "review-queue": ["review-queue", str(root)],
        "review import": ["review", "import", str(root), str(_decisions(tmp_path))],
        "export sft": ["export", "sft", str(root), "-o", str(out)],
        "export verl": ["export", "verl", str(root), "-o", str(out)],
        "catalog export": ["catalog", "export", str(root), "--format", "csv", "-o", str(out)],
        "catalog picture": ["catalog", "picture", str(root), "c1", "cv", "-1", "-o", str(out)],
        "plan": ["plan", "-n", "10", "--catalog", str(root)],
    }
    for name, argv in commands.items():
        res = CliRunner().invoke(main, [*argv, flag, "nosuch"])
        assert res.exit_code == 2, (name, res.output)
        assert "'nosuch'" in res.output and "catalog runs" in res.output, (name, res.output)
        assert not out.exists(), name  # refused before anything is written


def test_catalog_export_by_run(root, tmp_path):
    for flag in ("--run", "--run-id"):
        out = tmp_path / f"{flag}.csv"
        res = CliRunner().invoke(main, ["catalog", "export", str(root), "--format", "csv", "-o", str(out),
                                        flag, "run-1"])
        assert res.exit_code == 0, res.output
        with open(out, newline="") as fh:
            assert sorted(r["candidate_id"] for r in csv.DictReader(fh)) == ["c1", "c2"]


def test_catalog_picture_of_an_unknown_candidate_exits_2(root, tmp_path):
    res = CliRunner().invoke(main, ["catalog", "picture", str(root), "nobody", "cv", "-1", "-o",
                                    str(tmp_path / "p.png")])
    assert res.exit_code == 2 and "nobody" in res.output, res.output
    res = CliRunner().invoke(main, ["catalog", "picture", str(root), "c1", "cv", "7", "-o", str(tmp_path / "p.png")])
    assert res.exit_code == 2 and "no turn 7" in res.output, res.output
    res = CliRunner().invoke(main, ["catalog", "picture", str(root), "c1", "cv", "-1", "-o", str(tmp_path / "p.png")])
    assert res.exit_code == 0 and (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG", res.output


def test_review_import_of_an_unknown_candidate_exits_2(root, tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("candidate_id,task,decision\nnobody,cv,agree\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["review", "import", str(root), str(f)])
    assert res.exit_code == 2 and "nobody" in res.output and "nothing imported" in res.output, res.output


@pytest.fixture(scope="module")
def desi(tmp_path_factory):
    from spec_vetting.synthetic.desi import write_desi_coadd
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import native_grid

    d = tmp_path_factory.mktemp("desi")
    grid = native_grid("desi-coadd")
    path = d / "coadd-sv3-dark-7.fits"
    tids = write_desi_coadd([make_spectrum("cv", seed=4, wavelength=grid),
                             make_spectrum("wd_da", seed=5, wavelength=grid)], path)
    return path, tids


@pytest.mark.parametrize("command", ["render", "inspect"])
def test_a_multi_target_file_without_target_exits_2(desi, tmp_path, command):
    path, tids = desi
    argv = [command, str(path), "-o", str(tmp_path / "x.png")] if command == "render" else \
        [command, str(path), "--task", "cv"]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 2, res.output
    assert "--target" in res.output and str(tids[0]) in res.output


def test_inspect_and_run_name_a_desi_target_the_same_way(desi, tmp_path):
    from spec_vetting.io.candidates import load_candidates

    path, tids = desi
    run_ids = {c.target: c.candidate_id for c in load_candidates(path)}
    res = CliRunner().invoke(main, ["inspect", str(path), "--task", "cv", "--target", str(tids[1]), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)["candidate_id"]
    assert got == run_ids[tids[1]] == f"coadd-sv3-dark-7-{tids[1]}"


def test_the_command_table_spells_run_and_lists_the_hats_export():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "commands.md").read_text(encoding="utf-8")
    table = [ln for ln in readme.splitlines() if ln.startswith("| `spec-vet ")]
    assert any("catalog export ROOT --format hats -o DIR" in ln for ln in table)
    assert not any("--run-id" in ln for ln in table)  # one spelling in the table; the alias is said once in prose
    assert any(ln.startswith("| `spec-vet catalog schema verdicts\\|turns`") for ln in table)
