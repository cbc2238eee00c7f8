"""Where a run's files go under a catalog root, and how they are written so a crash never leaves half a file.

Shards write under ``_runs/<run_id>/parts/`` (one file per shard and task; :mod:`.compact` merges the parts of
finished shards into the catalog's few large files). Every file is written under a temporary name starting with
``_`` in its final folder (Parquet readers skip such names) and renamed into place, which is atomic on one
filesystem. Part file names are a function of (run_id, shard_id), so a shard that is run again (after a crash, or
twice by Dask) replaces its own files instead of adding rows. A shard counts as done only when its marker exists,
and the marker is written after its part files.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog.schema import LATEST_FILE, MANIFEST_FILE, PARTS_DIR, RUNS_DIR, text_lengths


class RunStore:
    """The paths of one run under one root."""

    def __init__(self, root: str | os.PathLike, run_id: str, run_date: str):
        self.root = Path(root)
        self.run_id = run_id
        self.run_date = run_date

    @property
    def run_dir(self) -> Path:
        return self.root / RUNS_DIR / self.run_id

    @property
    def manifest_path(self) -> Path:
        return self.run_dir / MANIFEST_FILE

    @property
    def log_path(self) -> Path:
        return self.run_dir / "run.log"

    @property
    def shards_dir(self) -> Path:
        return self.run_dir / "shards"

    def marker(self, shard_id: str) -> Path:
        return self.shards_dir / f"{shard_id}.done"

    @property
    def parts_dir(self) -> Path:
        """Where the run's shards write (staging; compacted into ROOT/<table>/ at the end of each attempt)."""
        return self.run_dir / PARTS_DIR

    def date_dir(self, table: str) -> Path:
        """The run's staged files of ``table`` (verdicts or turns), one folder per task below."""
        return self.parts_dir / table

    def partition(self, table: str, task: str) -> Path:
        return self.date_dir(table) / f"task={task}"

    def part_name(self, shard_id: str) -> str:
        return f"part-{self.run_id}-{shard_id}.parquet"

    def done_markers(self) -> dict[str, dict]:
        """shard_id -> marker content, for every finished shard."""
        out = {}
        if not self.shards_dir.is_dir():
            return out
        for p in self.shards_dir.glob("*.done"):
            try:
                out[p.stem] = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # unreadable marker: the shard runs again and rewrites it
        return out

    @property
    def incremental_skips_path(self) -> Path:
        return self.run_dir / "incremental_skipped.parquet"

    def write_incremental_skips(self, keys: set[tuple[str, str]]) -> None:
        """The (candidate_id, task) pairs incremental mode skipped on the first attempt: a resumed attempt reuses
        them, so runs written in between cannot change which pairs (and so which shards) this run has."""
        ordered = sorted(keys)
        table = pa.table(
            {"candidate_id": pa.array([k[0] for k in ordered], pa.string()),
             "task": pa.array([k[1] for k in ordered], pa.string())}
        )
        write_parquet_atomic(self.incremental_skips_path, table)

    def read_incremental_skips(self) -> set[tuple[str, str]] | None:
        if not self.incremental_skips_path.is_file():
            return None
        t = pq.read_table(self.incremental_skips_path)
        return set(zip(t.column("candidate_id").to_pylist(), t.column("task").to_pylist(), strict=True))

    def remove_unfinished_parts(self, done: set[str] | dict) -> int:
        """Delete this run's part files of shards without a done marker (a crash between a shard's part files and
        its marker). A pending shard rewrites them anyway; one that is no longer planned must not leave rows."""
        n = 0
        prefix = f"part-{self.run_id}-"
        for table in ("verdicts", "turns"):
            base = self.date_dir(table)
            if not base.is_dir():
                continue
            for p in base.glob(f"task=*/{prefix}*.parquet"):
                if p.name[len(prefix):-len(".parquet")] not in done:
                    p.unlink(missing_ok=True)
                    n += 1
        return n

    def remove_parts(self) -> None:
        """Drop the staged shard files of a finished, compacted run."""
        shutil.rmtree(self.parts_dir, ignore_errors=True)

    def remove_temporaries(self) -> int:
        """Delete temporary files a killed run left behind (only this run's). Returns how many."""
        n = 0
        for table in ("verdicts", "turns"):
            base = self.date_dir(table)
            if base.is_dir():
                for p in base.glob(f"task=*/_tmp-*-part-{self.run_id}-*"):
                    p.unlink(missing_ok=True)
                    n += 1
        for p in self.run_dir.glob("**/_tmp-*"):
            p.unlink(missing_ok=True)
            n += 1
        return n


def _tmp_name(final: Path) -> Path:
    return final.with_name(f"_tmp-{uuid.uuid4().hex[:8]}-{final.name}")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())


def mark_failed_in_place(path: Path) -> bool:
    """Turn a manifest's ``"status": "running"`` into ``"status": "failed" `` by overwriting those bytes where they
    are (same length, so no new disk block is needed): what is left when a full disk refuses the manifest's
    rewrite, so that it is never left saying running. False when the file does not say running."""
    running, failed = b'"status": "running"', b'"status": "failed" '
    try:
        with open(path, "r+b") as fh:
            at = fh.read().find(running)
            if at < 0:
                return False
            fh.seek(at)
            fh.write(failed)
            fh.flush()
            os.fsync(fh.fileno())
        return True
    except OSError:
        return False


def write_parquet_atomic(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    # PNG bytes are already compressed: no dictionary for the image column, zstd for the text
    no_dict = [c for c in ("image_png",) if c in table.column_names]
    # the longest text per column, for the compacted file's astropy metadata (read from this footer, not the data)
    lengths = text_lengths(table.drop_columns(no_dict))
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           **{f"table::len::{k}": str(v) for k, v in lengths.items()}})
    pq.write_table(
        table,
        tmp,
        compression="zstd",
        use_dictionary=[c for c in table.column_names if c not in no_dict],
        write_statistics=True,
    )
    os.replace(tmp, path)


def write_latest_pointer(root: Path, run_id: str) -> None:
    write_bytes_atomic(Path(root) / RUNS_DIR / LATEST_FILE, (run_id + "\n").encode())
