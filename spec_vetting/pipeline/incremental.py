"""The incremental skip: which candidate-task pairs the catalog already holds a verdict for, from the same model and
prompt (and which errors are permanent, so not worth retrying while the file is unchanged)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..types import EngineIdentity
from .shard import task_for
from .store import RunStore

log = logging.getLogger(__name__)


def _identity_key(engine: str | None, engine_version: str | None, model: str | None) -> tuple:
    # the rules engine has no model: its version is what makes its verdicts comparable
    return (engine, model if model is not None else engine_version)


#: ERROR kinds that another try cannot change while the file stays as it is (a layout no reader knows, or one that
#: is refused, like LAMOST MRS): an incremental run does not retry them every night, unless the file changed
PERMANENT_ERROR_KINDS = frozenset({"unsupported_format"})


def _unchanged_since(path: str | None, started_at) -> bool:
    """True when ``path`` exists and was last modified before ``started_at`` (the earlier inspection's start)."""
    if not path or started_at is None:
        return False
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return mtime < started_at.timestamp()


def _permanent_errors(root: Path, identity: EngineIdentity, exclude_run: str | None,
                      wanted: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Which of ``wanted`` ended, with this engine and model, in a permanent ERROR (:data:`PERMANENT_ERROR_KINDS`)
    whose file has not been modified since: another try would give the same error, so it is not retried.

    Read from the current view, not the history: a pair's current row is an ERROR exactly when it never got an
    answer, and it is the latest such ERROR (a later error of another kind means the file reads differently now)."""
    import pyarrow.compute as pc

    from ..catalog.read import dataset

    current = dataset(root, "current")
    if current is None or not wanted:
        return set()
    flt = (_identity_filter(identity) & (pc.field("verdict") == "ERROR")
           & pc.field("error_kind").isin(sorted(PERMANENT_ERROR_KINDS))
           & pc.field("candidate_id").isin(sorted({w[0] for w in wanted})))
    if exclude_run is not None:
        flt = flt & (pc.field("run_id") != exclude_run)
    rows = current.to_table(columns=["candidate_id", "task", "prompt_version", "path", "started_at"], filter=flt)
    return {key for r in rows.to_pylist()
            if (key := (r["candidate_id"], r["task"], r["prompt_version"])) in wanted
            and _unchanged_since(r["path"], r["started_at"])}


def _identity_filter(identity: EngineIdentity):
    import pyarrow.compute as pc

    flt = pc.field("engine") == identity.engine
    if identity.model is not None:
        return flt & (pc.field("model") == identity.model)
    return flt & pc.field("model").is_null() & (pc.field("engine_version") == identity.engine_version)


def already_vetted(
    root: Path, identity: EngineIdentity, exclude_run: str | None, wanted: set[tuple[str, str, str]]
) -> set[tuple[str, str, str]]:
    """Which of ``wanted`` (candidate_id, task, prompt_version) were vetted (verdict not ERROR) by this engine and
    model in earlier runs. Reads key columns only: the current view first, then, for the few pairs whose current
    row came from another model or prompt, the history (filtered by candidate id)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..catalog.read import dataset

    if not wanted:
        return set()
    keys = ["candidate_id", "task", "prompt_version"]
    w = pa.table({k: pa.array([t[i] for t in wanted], pa.string()) for i, k in enumerate(keys)})
    ok = _identity_filter(identity) & (pc.field("verdict") != "ERROR")
    if exclude_run is not None:
        ok = ok & (pc.field("run_id") != exclude_run)
    found: list[pa.Table] = []
    rest = w
    current = dataset(root, "current")
    if current is not None:
        in_list = pc.field("candidate_id").isin(pc.unique(w.column("candidate_id")))
        cur = current.to_table(columns=keys, filter=in_list & ok)
        found.append(w.join(cur.group_by(keys).aggregate([]), keys, join_type="inner"))
        # pairs whose current row is an answer of another model or prompt: an earlier run may have vetted them with
        # this one (a pair whose current row is an ERROR never got an answer from any run: not in the history)
        answered = current.to_table(columns=["candidate_id", "task"], filter=in_list & (pc.field("verdict") != "ERROR"))
        rest = (w.join(found[0], keys, join_type="left anti")
                .join(answered, ["candidate_id", "task"], join_type="left semi"))
    verdicts = dataset(root, "verdicts")
    if verdicts is not None and rest.num_rows:
        in_rest = pc.field("candidate_id").isin(pc.unique(rest.column("candidate_id")))
        hist = verdicts.to_table(columns=keys, filter=in_rest & ok)
        found.append(rest.join(hist.group_by(keys).aggregate([]), keys, join_type="inner"))
    done: set[tuple[str, str, str]] = set()
    for t in found:
        done.update(zip(*(t.column(k).to_pylist() for k in keys), strict=True))
    done.update(_permanent_errors(root, identity, exclude_run, wanted))
    return done


def skip_vetted(job, root: Path, store: RunStore, identity, items, previous, task_cache: dict) -> tuple[list, int]:
    """An incremental run's pairs still to inspect, and how many it skips as vetted already with this model and
    prompt version. The skipped set is recorded with the run on its first attempt; a resumed attempt reads it back."""
    skips = store.read_incremental_skips() if previous else None
    if skips is None:
        asked = {(*i.key, task_for(i, job.tasks_file, task_cache).version) for i in items}
        vetted = already_vetted(root, identity, exclude_run=store.run_id, wanted=asked)
        skips = {
            i.key for i in items
            if (*i.key, task_for(i, job.tasks_file, task_cache).version) in vetted
        }
        store.write_incremental_skips(skips)
    keep = [i for i in items if i.key not in skips]
    return keep, len(items) - len(keep)
