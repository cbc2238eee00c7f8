"""One run's rows gathered for the commands that show or export it (eval, report, review, export): its verdicts,
its turns grouped per pair, its manifest and tasks file, and its pictures where asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .pictures import fill_pictures
from .read import read_run_table, read_turns_by_pair, records


@dataclass
class RunData:
    """One run of a catalog root as Python records: its verdict rows and, per (candidate, task), its turn rows."""

    root: str
    run_id: str
    verdicts: list[dict[str, Any]]
    #: (candidate_id, task) -> turn rows sorted by turn number (turn -1 = the full view)
    turns: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def initial_image(self, candidate_id: str, task: str) -> bytes | None:
        """The full-spectrum picture the model saw first: the image of the turn -1 row."""
        for row in self.turns.get((candidate_id, task), []):
            if row.get("turn") == -1 and row.get("image_png"):
                return row["image_png"]
        return None

    def assistant_turns(self, candidate_id: str, task: str) -> list[dict[str, Any]]:
        return [r for r in self.turns.get((candidate_id, task), []) if (r.get("turn") or 0) >= 0]


def read_run(root, run_id: str | None = None, *, with_turns: bool = True, pictures: bool = True,
             columns: list[str] | None = None) -> RunData:
    """Verdicts (and turns) of ``run_id``, or of the latest run under ``root`` when None. With ``pictures`` the
    turn rows' ``image_png`` is filled (stored bytes, else re-rendered from the picture reference). ``columns``:
    only these verdict columns (plus run_id, candidate_id, task), for readers that need few (evaluation: memory)."""
    run_id, verdicts = read_run_table(root, run_id, columns)
    root = Path(root)
    data = RunData(root=str(root), run_id=str(run_id), verdicts=records(verdicts))
    if with_turns:
        data.turns = read_turns_by_pair(root, str(run_id))
        if pictures:

            fill_pictures(root, data.verdicts, data.turns)
    return data
