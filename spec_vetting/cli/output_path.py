"""Output paths of the commands (`-o`, `--plots`, `--save-images` ...), checked before any work starts.

Every command treats an output path the same way: missing parent folders are created (as `spec-vet report` always
did), and a path that cannot be written is refused with one line naming the path and the cause, exit 2 (no rerun
fixes it: the user must pass another path). The check comes before any work and writes nothing (a long export does
not fail at its last step; a refused command leaves no folder behind); the folders are made when the command
writes.
"""

from __future__ import annotations

import contextlib
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


def _refused(option: str, shown: str, why: str) -> OutputPathError:
    return OutputPathError(f"{option} {shown}: {why}; pass a path you can write to")


def _check_creatable(folder: Path, option: str, shown: str) -> None:
    """``folder`` exists as a writable folder, or its nearest existing ancestor is one (it can be created)."""
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():
                where = "" if p == folder else f"cannot create the folder {folder}: "
                raise _refused(option, shown, f"{where}{p} is a file, not a folder")
            if not os.access(p, os.W_OK | os.X_OK):
                where = "" if p == folder else f"cannot create the folder {folder}: "
                raise _refused(option, shown, f"{where}the folder {p} is not writable (Permission denied)")
            return


def output_file(path: str | os.PathLike, option: str = "-o") -> Path:
    """``path`` checked as a file to write, before any work and without writing anything: missing parent folders
    must be creatable (:func:`make_parents` creates them when the command writes), an existing folder there, a
    file where a folder should be, or an unwritable folder or file is refused (:class:`OutputPathError`)."""
    out = Path(path)
    if out.is_dir():
        raise _refused(option, str(path), "is a folder, not a file")
    _check_creatable(out.parent, option, str(path))
    if out.exists() and not os.access(out, os.W_OK):
        raise _refused(option, str(path), "the file is not writable (Permission denied)")
    return out


def output_folder(path: str | os.PathLike, option: str = "-o") -> Path:
    """``path`` checked as a folder to write into (created with its parents by the command when it writes);
    refused as :func:`output_file` says."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise _refused(option, str(path), "is a file, not a folder")
    _check_creatable(out, option, str(path))
    return out


def make_folder(folder: str | os.PathLike, option: str = "-o", shown: str | None = None) -> Path:
    """``folder`` created with its parents (as `spec-vet report` creates its folder)."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refused(option, shown or str(folder), f"cannot create the folder {out} ({_cause(exc)})") from exc
    return out


@contextlib.contextmanager
def folders_kept_on_success(folder: str | os.PathLike, option: str = "-o"):
    """``folder`` created with its parents for the block; the ones this made are removed again (when still empty)
    if the block fails, so a refused command leaves no folder behind."""
    out = Path(folder)
    missing = [p for p in (out, *out.parents) if not p.exists()]
    make_folder(out, option)
    try:
        yield out
    except BaseException:
        for p in missing:  # deepest first
            with contextlib.suppress(OSError):
                p.rmdir()
        raise


def make_parents(path: str | os.PathLike, option: str = "-o") -> Path:
    """The parent folders of the file ``path`` created; ``path`` back as a Path."""
    make_folder(Path(path).parent, option, str(path))
    return Path(path)


def os_error_line(exc: OSError) -> tuple[str, int]:
    """(one line for the user, exit code) for an operating-system error no command caught: about a path the user
    gave (exit 2), else something a rerun may get past once it is fixed (exit 1)."""
    where = exc.filename if exc.filename is not None else None
    text = f"{where}: {_cause(exc)}" if where is not None else str(exc) or type(exc).__name__
    if exc.errno in PATH_ERRNOS:
        return f"error: {text}", 2
    return f"error: {text}; fix that, then run the same command again", 1
