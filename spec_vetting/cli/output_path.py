"""Output paths of the commands (`-o`, `--plots`, `--save-images` ...), checked before any work starts.

Every command treats an output path the same way: missing parent folders are created (as `spec-vet report` always
did), and a path that cannot be written is refused with one line naming the path and the cause, exit 2 (no rerun
fixes it: the user must pass another path). Checking up front means a long export does not fail at its last step.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .run_option import InputError

#: operating-system errors about a path the user gave (exit 2); any other (a full disk, an I/O error) may pass
#: when the same command runs again (exit 1)
PATH_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR, errno.EROFS, errno.EEXIST,
                         errno.ENOENT, errno.ENAMETOOLONG, errno.ELOOP})


class OutputPathError(InputError):
    """An output path no rerun can write: exit 2, like a usage error."""


def _cause(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _blocking_file(folder: Path) -> Path | None:
    """The nearest existing ancestor of ``folder`` (itself included) when it is not a folder."""
    for p in (folder, *folder.parents):
        if p.exists() or p.is_symlink():
            return None if p.is_dir() else p
    return None


def _make_folder(folder: Path, option: str, shown: str) -> None:
    blocker = _blocking_file(folder)
    if blocker is not None:
        raise OutputPathError(f"{option} {shown}: cannot create the folder {folder}: {blocker} is a file, not a "
                              "folder; pass a path you can write to")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{option} {shown}: cannot create the folder {folder} ({_cause(exc)}); pass a path "
                              "you can write to") from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {shown}: the folder {folder} is not writable (Permission denied); pass a "
                              "path you can write to")


def output_file(path: str | os.PathLike, option: str = "-o") -> Path:
    """``path`` as a file to write: its parent folders created; an existing folder there, a file where a folder
    should be, or an unwritable folder refused (:class:`OutputPathError`)."""
    out = Path(path)
    if out.is_dir():
        raise OutputPathError(f"{option} {path}: is a folder; pass a file name")
    _make_folder(out.parent if str(out.parent) else Path("."), option, str(path))
    if out.exists() and not os.access(out, os.W_OK):
        raise OutputPathError(f"{option} {path}: the file is not writable (Permission denied); pass a path you can "
                              "write to")
    return out


def output_folder(path: str | os.PathLike, option: str = "-o") -> Path:
    """``path`` as a folder to write into, created with its parents; refused as :func:`output_file` says."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise OutputPathError(f"{option} {path}: is a file; pass a folder")
    _make_folder(out, option, str(path))
    return out


def os_error_line(exc: OSError) -> tuple[str, int]:
    """(one line for the user, exit code) for an operating-system error no command caught: about a path the user
    gave (exit 2), else something a rerun may get past once it is fixed (exit 1)."""
    where = exc.filename if exc.filename is not None else None
    text = f"{where}: {_cause(exc)}" if where is not None else str(exc) or type(exc).__name__
    if exc.errno in PATH_ERRNOS:
        return f"error: {text}", 2
    return f"error: {text}; fix that, then run the same command again", 1
