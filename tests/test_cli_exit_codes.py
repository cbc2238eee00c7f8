"""The one exit-code rule (docs/guide/exit-codes.md), command by command, and every output path option run with a
missing parent folder (created) and with a path that cannot be written (one line, exit 2, nothing written).

The catalog here is written by a real `spec-vet run` of the rules engine over `make-examples` files, so the commands
read what a user's catalog holds (pictures re-render from the spectrum files, labels come from the list).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from spec_vetting.cli import COMMANDS, main

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _invoke(argv: list[str]):
    return CliRunner().invoke(main, [str(a) for a in argv])


def _no_traceback(res) -> None:
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output, res.output


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """(examples folder, catalog root, one candidate id and its spectrum file) of a small real run."""
    base = tmp_path_factory.mktemp("exit-codes")
    ex = base / "ex"
    res = _invoke(["make-examples", ex, "--n", "6", "--seed", "3"])
    assert res.exit_code == 0, res.output
    cat = base / "cat"
    res = _invoke(["run", "--candidates", ex / "candidates.csv", "--task", "cv", "--task", "carbon",
                   "--task", "ss", "--task", "gm", "--task", "wd", "--engine", "rules", "--out", cat,
                   "--threads", "--workers", "1", "--no-progress", "--no-dashboard"])
    assert res.exit_code == 0, res.output
    import csv

    with open(ex / "candidates.csv", newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if not r["target"])
    return ex, cat, row["candidate_id"], ex / row["path"], row["task"]


def _output_commands(work) -> dict[str, tuple[list, str]]:
    """command -> (argv with OUT where the output path goes, "file" or "folder")."""
    ex, cat, cid, fits, task = work
    out = {f"catalog export {fmt}": (["catalog", "export", cat, "--format", fmt, "-o", "OUT"],
                                     "folder" if fmt == "hats" else "file")
           for fmt in ("fits", "votable", "ecsv", "csv", "parquet", "hats")}
    out.update({
        "render": (["render", fits, "-o", "OUT"], "file"),
        "catalog picture": (["catalog", "picture", cat, cid, task, "-1", "-o", "OUT"], "file"),
        "report": (["report", cat, "-o", "OUT"], "folder"),
        "eval --plots": (["eval", cat, "--plots", "OUT"], "folder"),
        "export sft": (["export", "sft", cat, "-o", "OUT", "--allow-non-model-traces"], "folder"),
        "export verl": (["export", "verl", cat, "-o", "OUT"], "file"),
        "tasks import-specvi": (["tasks", "import-specvi", ex / "specvi-synthetic.parquet", "-o", "OUT"], "file"),
        "inspect --save-images": (["inspect", fits, "--task", task, "--save-images", "OUT"], "folder"),
        "make-examples": (["make-examples", "OUT", "--n", "1"], "folder"),
        "run --out": (["run", "--candidates", ex / "candidates.csv", "--task", task, "--engine", "rules", "--out",
                       "OUT", "--threads", "--workers", "1", "--no-progress", "--no-dashboard"], "folder"),
        "bench specvi --plots": (["bench", "specvi", ex, "--pattern", "specvi-*.parquet", "--in-process",
                                  "--plots", "OUT"], "folder"),
    })
    return out


#: the options and arguments that name something a command writes (an output path); a new one must be added to
#: _output_commands
OUTPUT_PARAMS = {"output", "out_dir", "out_file", "plots_dir", "save_images", "out"}


def _all_commands():
    ctx = click.Context(main)
    for name in COMMANDS:
        cmd = main.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from ((f"{name} {sub}", c) for sub, c in cmd.commands.items())
        else:
            yield name, cmd


def test_every_output_path_option_is_in_the_table(work):
    found = {path for path, cmd in _all_commands() for p in cmd.params if p.name in OUTPUT_PARAMS}
    tested = {name.split(" -")[0].removesuffix(" fits").removesuffix(" votable").removesuffix(" ecsv")
              .removesuffix(" csv").removesuffix(" parquet").removesuffix(" hats")
              for name in _output_commands(work)}
    # bench specvi's --out is a catalog root, checked by the pipeline as run's --out is (see the run case)
    assert found <= tested | {"bench specvi"}, found - tested


def _argv(argv: list, out: Path) -> list:
    return [out if a == "OUT" else a for a in argv]


@pytest.mark.parametrize("name", [
    "catalog export fits", "catalog export votable", "catalog export ecsv", "catalog export csv",
    "catalog export parquet", "catalog export hats", "render", "catalog picture", "report", "eval --plots",
    "export sft", "export verl", "tasks import-specvi", "inspect --save-images", "make-examples", "run --out",
    "bench specvi --plots"])
def test_an_output_path_under_a_file_is_one_line_exit_2_and_writes_nothing(work, tmp_path, name):
    argv, _ = _output_commands(work)[name]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "sub" / "out"
    before = sorted(p.name for p in tmp_path.iterdir())
    res = _invoke(_argv(argv, out))
    assert res.exit_code == 2, (name, res.output)
    _no_traceback(res)
    error = [line for line in res.stderr.splitlines() if line.startswith("error")]
    assert len(error) == 1 and str(blocker) in error[0] and "not a folder" in error[0], (name, res.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == before and blocker.read_text() == "not a folder"


@pytest.mark.parametrize("name", [
    "catalog export fits", "catalog export votable", "catalog export ecsv", "catalog export csv",
    "catalog export parquet", "catalog export hats", "render", "catalog picture", "report", "eval --plots",
    "export sft", "export verl", "tasks import-specvi", "inspect --save-images", "make-examples"])
def test_missing_parent_folders_of_an_output_path_are_created(work, tmp_path, name):
    argv, kind = _output_commands(work)[name]
    out = tmp_path / "new" / "deeper" / ("out" if kind == "folder" else "out.x")
    res = _invoke(_argv(argv, out))
    assert res.exit_code == 0, (name, res.output)
    assert out.is_dir() if kind == "folder" else out.is_file(), name
    assert (any(out.iterdir()) if kind == "folder" else out.stat().st_size > 0), name


@pytest.mark.skipif(AS_ROOT, reason="root writes into a read-only folder: the test needs an ordinary user")
@pytest.mark.parametrize("name", ["catalog export csv", "catalog export hats", "render", "report", "eval --plots",
                                  "export sft", "export verl", "catalog picture", "run --out"])
def test_an_unwritable_output_folder_is_one_line_exit_2(work, tmp_path, name):
    argv, _ = _output_commands(work)[name]
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        res = _invoke(_argv(argv, ro / "out"))
    finally:
        ro.chmod(0o700)
    assert res.exit_code == 2, (name, res.output)
    _no_traceback(res)
    assert str(ro) in res.stderr and "writ" in res.stderr, res.stderr
    assert list(ro.iterdir()) == []


# --- exit codes, command by command ---------------------------------------------------------------------------


def _silent_server():
    """A server that accepts connections and never answers (a hung endpoint); closed by the caller."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def test_reading_commands_exit_2_for_what_the_catalog_does_not_hold(work, tmp_path):
    _, cat, cid, _, task = work
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        "catalog summary, not a root": ["catalog", "summary", empty],
        "catalog export, not a root": ["catalog", "export", empty, "--format", "csv", "-o", tmp_path / "x.csv"],
        "eval, not a root": ["eval", empty],
        "report, not a root": ["report", empty, "-o", tmp_path / "r"],
        "export verl, not a root": ["export", "verl", empty, "-o", tmp_path / "v.parquet"],
        "review-queue, not a root": ["review-queue", empty],
        "eval, unknown run": ["eval", cat, "--run", "nosuch"],
        "report, unknown task": ["report", cat, "-o", tmp_path / "r", "--task", "nosuchtask"],
        "catalog picture, unknown candidate": ["catalog", "picture", cat, "nosuch", task, "-1", "-o",
                                               tmp_path / "p.png"],
        "catalog picture, unknown turn": ["catalog", "picture", cat, cid, task, "99", "-o", tmp_path / "p.png"],
    }
    for name, argv in cases.items():
        res = _invoke(argv)
        assert res.exit_code == 2, (name, res.output)
        _no_traceback(res)
        assert res.stderr.strip().startswith("error:") or "Error:" in res.stderr, (name, res.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # refused before anything is written


def test_a_label_file_no_rerun_fixes_is_exit_2(work, tmp_path):
    _, cat, *_ = work
    bad = tmp_path / "labels.csv"
    bad.write_text("candidate_id,label\nx,perhaps\n")
    res = _invoke(["eval", cat, "--labels", bad])
    assert res.exit_code == 2 and "row 1" in res.output and "perhaps" in res.output, res.output


def test_a_refused_run_writes_nothing(work, tmp_path):
    ex, *_ = work
    out = tmp_path / "cat"
    res = _invoke(["run", "--candidates", ex / "candidates.csv", "--task", "cv", "--endpoint", "not-a-url",
                   "--out", out])
    assert res.exit_code == 2 and "not-a-url" in res.stderr, res.output
    assert not out.exists()


def test_a_run_whose_engine_never_starts_writes_nothing_and_says_run_again(work, tmp_path):
    """A dead endpoint before the run has an id: nothing to resume, nothing written; the message names the
    endpoint and the seconds it waited (not `ReadTimeout: .`)."""
    ex, *_ = work
    server = _silent_server()
    port = server.getsockname()[1]
    out = tmp_path / "new" / "cat"
    try:
        res = _invoke(["run", "--candidates", ex / "candidates.csv", "--task", "cv", "--endpoint",
                       f"http://127.0.0.1:{port}/v1", "--out", out])
    finally:
        server.close()
    assert res.exit_code == 1, res.output
    _no_traceback(res)
    line = res.stderr.strip().splitlines()[-1]
    assert f"127.0.0.1:{port}" in line and "reply within 5 s" in line, line
    assert "ReadTimeout: ." not in line and "resume" not in line and "run the same command again" in line, line
    assert not (tmp_path / "new").exists()


def test_an_existing_root_another_run_holds_is_exit_1(work, tmp_path):
    from spec_vetting.pipeline.lock import RootLock

    ex, *_ = work
    out = tmp_path / "cat"
    out.mkdir()
    with RootLock(out):
        res = _invoke(["run", "--candidates", ex / "candidates.csv", "--task", "cv", "--engine", "rules", "--out",
                       out, "--threads", "--workers", "1", "--no-progress"])
    assert res.exit_code == 1 and "another `spec-vet run`" in res.stderr, res.output


@pytest.mark.skipif(AS_ROOT, reason="root writes into a read-only folder: the test needs an ordinary user")
def test_a_read_only_existing_root_is_exit_2_not_resume(work, tmp_path):
    ex, cat, *_ = work
    ro = tmp_path / "cat"
    shutil.copytree(cat, ro)
    for p in [ro, *ro.rglob("*")]:
        if p.is_dir():
            p.chmod(0o500)
    try:
        res = _invoke(["run", "--candidates", ex / "candidates.csv", "--task", "cv", "--engine", "rules", "--out",
                       ro, "--threads", "--workers", "1", "--no-progress", "--fresh"])
    finally:
        for p in [ro, *ro.rglob("*")]:
            if p.is_dir():
                p.chmod(0o700)
    assert res.exit_code == 2 and "resume" not in res.stderr and str(ro) in res.stderr, res.output


def test_an_os_error_no_command_caught_is_one_line(work, monkeypatch, tmp_path):
    """The last net: an OSError from deep inside a command (here a full disk while `render` writes) is a line with
    the path, exit 1 (a rerun may pass once space is freed), not a traceback."""
    import errno

    fits = work[3]
    calls = threading.Event()

    def full(self, data):
        calls.set()
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    res = _invoke(["render", fits, "-o", tmp_path / "x.png"])
    assert calls.is_set()
    assert res.exit_code == 1 and "No space left on device" in res.stderr and "x.png" in res.stderr, res.output
    _no_traceback(res)


def test_review_import_of_a_file_without_the_export_columns_is_exit_2_even_without_rows(work, tmp_path):
    _, cat, *_ = work
    other = tmp_path / "notes.txt"
    other.write_text("just a line of text\n")
    res = _invoke(["review", "import", cat, other])
    assert res.exit_code == 2 and "needs candidate_id and task columns" in res.stderr, res.output
    assert not (cat / "_review").exists()


def test_a_spectrum_file_no_rerun_fixes_is_exit_2_for_info_render_and_inspect(work, tmp_path):
    _, _, _, fits, task = work
    text = tmp_path / "notes.fits"
    text.write_text("not a FITS file\n")
    cases = {
        "info, not FITS": ["info", text],
        "render, not FITS": ["render", text, "-o", tmp_path / "x.png"],
        "inspect, not FITS": ["inspect", text, "--task", task],
        "render, a window with no data": ["render", fits, "--range", "100", "200", "-o", tmp_path / "x.png"],
        "render, a target in a single-spectrum file": ["render", fits, "--target", "3", "-o", tmp_path / "x.png"],
    }
    for name, argv in cases.items():
        res = _invoke(argv)
        assert res.exit_code == 2, (name, res.output)
        _no_traceback(res)
        assert res.stderr.startswith("error: ") and str(argv[1]) in res.stderr, (name, res.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.fits"]


def test_endpoints_check_of_a_malformed_url_is_exit_2_before_any_server_is_asked():
    server = _silent_server()  # would hang the check for seconds if it were asked
    try:
        res = _invoke(["endpoints", "check", f"http://127.0.0.1:{server.getsockname()[1]}/v1", "gpu01:30000"])
    finally:
        server.close()
    assert res.exit_code == 2 and "'gpu01:30000'" in res.stderr and "http(s) URL" in res.stderr, res.output
    _no_traceback(res)


@pytest.mark.parametrize("fmt", ["csv", "hats"])
def test_an_export_refused_for_its_selection_leaves_no_folder_behind(work, tmp_path, fmt):
    _, cat, *_ = work
    out = tmp_path / "new" / "deeper" / ("x" if fmt == "hats" else "x.csv")
    res = _invoke(["catalog", "export", cat, "--format", fmt, "-o", out, "--where", "no_such_column = 1"])
    assert res.exit_code == 2 and "no_such_column" in res.stderr, res.output
    _no_traceback(res)
    assert list(tmp_path.iterdir()) == []
