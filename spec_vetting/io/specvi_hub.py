"""SpecVI-Bench straight from the Hugging Face hub, through ``huggingface_hub``'s cache.

The dataset is ``Maxwell-Jia/SpecVI-Bench`` (repo type dataset), files ``benchmark/data/{train,test}_{cc,cv,gm,ss,wd}
.parquet``. ``huggingface_hub`` is optional (``pip install 'spec-vetting[hub]'``); without network a file already
in the hub cache is used (``local_files_only``), so the same call works offline on a machine that fetched it once,
and tests run on a folder laid out like the hub cache.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConfigError

SPECVI_REPO = "Maxwell-Jia/SpecVI-Bench"
#: the revision fetched by default. A full commit sha pins the data; none could be verified from the machine this
#: was written on (no network; the hub page showed README commit 0e003e0 on main), so the default is the branch and
#: the commit actually fetched is reported (``resolved_revision``): pass it as --revision to pin a run.
SPECVI_REVISION = "main"
SPECVI_TASK_FILES = ("cc", "cv", "gm", "ss", "wd")
SPECVI_SPLITS = ("train", "test")


def specvi_hub_files(splits=SPECVI_SPLITS, tasks=SPECVI_TASK_FILES) -> list[str]:
    return [f"benchmark/data/{split}_{task}.parquet" for split in splits for task in tasks]


def resolved_revision(path: str | Path) -> str | None:
    """The commit sha of a file inside the hub cache (``.../snapshots/<sha>/...``)."""
    m = re.search(r"[\\/]snapshots[\\/]([0-9a-f]{40})[\\/]", str(path))
    return m.group(1) if m else None


def fetch_specvi(splits=("train",), tasks=SPECVI_TASK_FILES, *, revision: str = SPECVI_REVISION,
                 cache_dir: str | Path | None = None, local_files_only: bool = False) -> list[Path]:
    """Local paths of the SpecVI-Bench parquet files, downloaded into the hub cache when not there yet."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise ConfigError("reading SpecVI-Bench from the hub needs huggingface_hub: pip install huggingface_hub "
                          "(or give the parquet files' paths)") from exc
    out = []
    for name in specvi_hub_files(splits, tasks):
        try:
            out.append(Path(hf_hub_download(SPECVI_REPO, name, repo_type="dataset", revision=revision,
                                            cache_dir=None if cache_dir is None else str(cache_dir),
                                            local_files_only=local_files_only)))
        except Exception as exc:  # offline without a cached copy, unknown revision, hub errors
            raise ConfigError(f"cannot get {SPECVI_REPO}:{name} at revision {revision} from the hub or its cache "
                              f"({type(exc).__name__}: {exc}); on a machine without network give the parquet "
                              "paths, or fill the hub cache first") from exc
    return out
