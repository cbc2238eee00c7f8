"""Named steps of the catalog's writers (compaction, the fold into current/, the month merge) where a test can
stop the process, to kill it there and check that recovery loses nothing (``notes/catalog.md``, "Crash points").

``SPEC_VETTING_STOP_AT=<step>`` (or ``<step>#<n>``: the n-th time that step is reached) makes the process stop
itself with SIGSTOP when it gets there; the test, which sees its child stopped (``waitpid`` with ``WUNTRACED``),
then sends SIGKILL to the whole process group. A stop rather than a kill of its own: the instant is the step's,
never a sleep's, and the kill comes from outside as an operator's ``kill -9`` would. Without the variable a step
costs one dictionary look-up.
"""

from __future__ import annotations

import os
import signal

STOP_AT_ENV = "SPEC_VETTING_STOP_AT"

#: every named step, in the order a run reaches them (the test walks this list)
STEPS = (
    "compact:file-written",  # one compacted file of the run renamed into place, the others not yet
    "fold:task-written",  # one task's current/<task>.parquet replaced, the other tasks and _run_order.json not yet
    "fold:done",  # current/ holds the run; the manifest still says running
    "finished",  # the manifest says finished; the run's staged parts still exist
    "parts-removed",  # the staged parts gone; no month merge begun
    "merge:written",  # the new month file complete beside the old one under a hidden name, not switched
    "merge:switched",  # the new month file renamed over the old; the run's own file still there
    "merge:removed",  # the run's own file removed (one task of one table merged)
    "merge:done",  # every table merged; run.log has no SUCCESS line yet
)

_seen: dict[str, int] = {}


def reached(step: str) -> None:
    """Stop the process here when ``SPEC_VETTING_STOP_AT`` names ``step`` (and this is its n-th time)."""
    wanted = os.environ.get(STOP_AT_ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition("#")
    if name != step:
        return
    _seen[step] = _seen.get(step, 0) + 1
    if _seen[step] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGSTOP)
