"""The plan of a run: candidate-task pairs, cut into shards with deterministic ids.

The same inputs always give the same pairs in the same order and so the same shard ids; that is what lets a resumed
run find which shards are done (their markers) and rewrite an unfinished shard's files under the same names.

Task semantics (documented for users in the job file): a candidate row with its own task runs that task only, and
only if the run's task list is empty or names it (aliases count, e.g. ``cc`` = ``carbon``); a row without a task
runs every task of the run's list.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class WorkItem:
    """One inspection to run: a candidate (as loaded from the list) and a canonical task key."""

    candidate: Any  # spec_vetting.io.candidate.Candidate
    task: str

    @property
    def key(self) -> tuple[str, str]:
        return (str(self.candidate.candidate_id), self.task)


@dataclass
class Shard:
    shard_id: str
    items: list[WorkItem]


@dataclass
class Plan:
    items: list[WorkItem]
    skipped_task_not_selected: int = 0
    tasks: list[str] = field(default_factory=list)

    def counts_by_task(self) -> dict[str, int]:
        return dict(sorted(Counter(i.task for i in self.items).items()))


def build_plan(candidates: list, run_tasks: list[str], resolve_task) -> Plan:
    """Expand candidates into work items.

    ``resolve_task(key) -> canonical key`` raises :class:`ConfigError` for unknown tasks; it is asked once per
    distinct key (with a tasks file it parses that file, too slow to repeat for every candidate row). Duplicated
    (candidate_id, task) pairs are a configuration error: the catalog promises one row per pair and run.
    """
    resolve_task = functools.cache(resolve_task)
    wanted = [resolve_task(t) for t in run_tasks]
    wanted = list(dict.fromkeys(wanted))
    items: list[WorkItem] = []
    skipped = 0
    missing_task: list[str] = []
    for cand in candidates:
        own = getattr(cand, "task", None)
        if own:
            try:
                key = resolve_task(own)
            except ConfigError as exc:  # a typo in the list, not on the command line: say where it is
                where = cand.source or f"candidate {cand.candidate_id}"
                raise ConfigError(f"{where}, task column: {exc}; or fix the task in that row") from exc
            if wanted and key not in wanted:
                skipped += 1
                continue
            items.append(WorkItem(cand, key))
        elif wanted:
            items.extend(WorkItem(cand, t) for t in wanted)
        else:
            missing_task.append(str(cand.candidate_id))
    if missing_task:
        shown = ", ".join(missing_task[:5]) + (" ..." if len(missing_task) > 5 else "")
        raise ConfigError(
            f"{len(missing_task)} candidate(s) have no task and the run names none ({shown}); "
            "give --task T (or `tasks:` in the job file), or a task column in the candidate list"
        )
    items = _later_duplicates_refused(items)
    dup = [k for k, n in Counter(i.key for i in items).items() if n > 1]
    if dup:
        shown = ", ".join(f"{c}/{t}" for c, t in dup[:5]) + (" ..." if len(dup) > 5 else "")
        raise ConfigError(
            f"{len(dup)} candidate-task pair(s) appear more than once ({shown}); candidate ids must be unique per "
            "task across all candidate sources (rename or drop the duplicates)"
        )
    tasks = sorted({i.task for i in items}, key=lambda t: (wanted.index(t) if t in wanted else len(wanted), t))
    return Plan(items=items, skipped_task_not_selected=skipped, tasks=tasks)


def _later_duplicates_refused(items: list[WorkItem]) -> list[WorkItem]:
    """A (candidate, task) pair listed again is that later row's ERROR, not the night's: the later row is vetted
    under an id of its own that names where it was listed, and reading it raises the reason (the candidate's
    ``refused``). Candidates that cannot carry a reason (a caller's own objects) stay as they are, and
    :func:`build_plan` refuses the duplicates as before."""
    first: dict[tuple[str, str], Any] = {}
    out = []
    for item in items:
        seen = first.get(item.key)
        copy = getattr(item.candidate, "model_copy", None)
        if seen is None or copy is None or "refused" not in type(item.candidate).model_fields:
            first.setdefault(item.key, item.candidate)
            out.append(item)
            continue
        cid, where = item.key[0], getattr(item.candidate, "source", None) or "a later row"
        reason = (f"candidate {cid} is listed again for task {item.task} (first at "
                  f"{getattr(seen, 'source', None) or 'an earlier row'}); the first row is vetted, this one is not: "
                  "drop it or give it an id of its own")
        out.append(WorkItem(copy(update={"candidate_id": f"{cid} (again: {where})", "refused": reason}), item.task))
    return out


def _item_fingerprint(item: WorkItem) -> str:
    c = item.candidate
    return json.dumps(
        [str(c.candidate_id), item.task, getattr(c, "path", None), _plain(getattr(c, "target", None))],
        separators=(",", ":"),
    )


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return str(v)


def plan_digest(items: list[WorkItem], settings: dict) -> str:
    """Hash of the pairs and of the settings that change results: equal digests mean 'the same run'."""
    h = hashlib.sha256()
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for item in items:
        h.update(_item_fingerprint(item).encode())
        h.update(b"\n")
    return h.hexdigest()


def make_shards(items: list[WorkItem], shard_size: int) -> list[Shard]:
    """Consecutive runs of ``shard_size`` items (all tasks of one candidate stay together when they fit).

    The id is the shard's position plus a hash of its pairs, so ids never collide across plans on one root.
    """
    if shard_size < 1:
        raise ConfigError(f"shard_size must be at least 1, got {shard_size}")
    shards = []
    for n, start in enumerate(range(0, len(items), shard_size)):
        chunk = items[start:start + shard_size]
        h = hashlib.sha256("\n".join(_item_fingerprint(i) for i in chunk).encode()).hexdigest()[:10]
        shards.append(Shard(shard_id=f"s{n:05d}-{h}", items=chunk))
    return shards
