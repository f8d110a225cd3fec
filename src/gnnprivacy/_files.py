"""Writing files so that a crash, a full disk or a read-only folder never leaves a torn file.

Every file gnnprivacy writes (run records, splits, checkpoints, reports, caches, exports) goes
through `atomic_write`: a temporary file in the target's folder (its name starts with a
dot and ends in ``.tmp``, so no reader ever takes it for a result) is written, flushed and
``fsync``-ed, given the mode the user's umask gives a new file, renamed over the target with
``os.replace`` (atomic on POSIX) and the folder is ``fsync``-ed so the rename survives a power
cut. Whatever fails (``ENOSPC``, ``EROFS``, ``EACCES``, a signal), the temporary file is removed
and the target is either the complete old file or the complete new one.

A failed write raises `WriteFailedError` (an ``OSError`` and a
``GnnPrivacyError``) whose message is one line naming the file and the system's reason, which
the command line prints as such. `check_writable_dir` and `check_output_file` prove
an output location before any work, so a bad ``--runs-dir`` or ``-o`` never costs a training.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from gnnprivacy.errors import InvalidParameterError, WriteFailedError

__all__ = ["DISK_FAULTS", "OUTPUT_MANIFEST", "OutputFolder", "atomic_write", "check_output_file", "check_writable_dir", "write_output_file", "file_digest", "fsync_dir",
           "is_write_fault", "open_regular", "owned_file_kind", "read_regular"]

#: errno values that mean "the storage refused" whoever asked (no space, read-only, no permission)
DISK_FAULTS = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG})


def is_write_fault(exc: BaseException) -> bool:
    """Whether ``exc`` says a location cannot be written: a `WriteFailedError`, or an
    ``OSError`` with one of `DISK_FAULTS` (disk full, read-only, no permission), as opposed
    to a programming error."""
    return isinstance(exc, WriteFailedError) or (isinstance(exc, OSError) and exc.errno in DISK_FAULTS)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename in ``folder`` durable (no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(handle: IO[bytes], data: bytes | None, writer: Callable[[IO[bytes]], None] | None) -> None:
    """Fill the temporary file (a separate function so fault tests can make it fail)."""
    if writer is not None:
        writer(handle)
    else:
        handle.write(data)
    handle.flush()
    os.fsync(handle.fileno())


def atomic_write(path: str | os.PathLike, data: bytes | str | None = None, *,
                 writer: Callable[[IO[bytes]], None] | None = None, what: str = "file") -> Path:
    """Write ``data`` (or whatever ``writer(handle)`` writes) to ``path`` atomically.

    Args:
        path: the target; its folder is created if missing.
        data: the content (``str`` is encoded as UTF-8); exclusive with ``writer``.
        writer: called with a binary file handle (``np.savez``, ``torch.save`` ...).
        what: what the file is, for the error message (``"run record"``, ``"split"`` ...).

    Returns:
        ``path``.

    Raises:
        WriteFailedError: the file could not be written (the message names it and the
            system's reason); the target is unchanged and no temporary file is left.
    """
    if (data is None) == (writer is None):
        raise TypeError("atomic_write takes exactly one of data and writer")
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        with open(tmp, "wb") as handle:  # handle.name is the temporary file's path
            _write_temp(handle, data, writer)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise WriteFailedError(what, path, exc) from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    fsync_dir(path.parent)
    return path


def open_regular(path: str | os.PathLike) -> IO[bytes]:
    """Open ``path`` for reading in binary if it is a regular file (a symbolic link to one is
    followed); a FIFO, socket or device raises ``OSError`` (``EINVAL``) at once instead of
    blocking the reader forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, *, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` (see `open_regular`), at most ``max_bytes``.

    Raises:
        OSError: not a regular file, unreadable, or larger than ``max_bytes`` (``EFBIG``, the
            bound in the message).
    """
    with open_regular(path) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
    return data


def file_digest(path: str | os.PathLike) -> str:
    """sha256 (hex) of a regular file's bytes (a FIFO raises ``OSError``, see `open_regular`)."""
    h = hashlib.sha256()
    with open_regular(path) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_writable_dir(path: str | os.PathLike, *, name: str, create: bool = True) -> Path:
    """Prove ``path`` is (or can become) a writable directory, before any work.

    Args:
        path: the folder.
        name: the parameter, for the message.
        create: create it now; else a missing folder is checked by probing the nearest folder
            above it that exists (nothing is written on failure paths).

    Raises:
        InvalidParameterError: ``path`` is empty, a file, or cannot be created or written (the
            message names the parameter, the path and the operating system's reason).
    """
    if not str(path).strip():
        raise InvalidParameterError(name, "a non-empty directory path", str(path))
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        raise InvalidParameterError(name, "a directory (it is an existing file)", str(path))
    probe_in = root
    if not create:
        while not probe_in.exists() and probe_in != probe_in.parent:
            probe_in = probe_in.parent
        if not probe_in.is_dir():
            raise InvalidParameterError(name, f"a writable directory ({probe_in} is a file)", str(path))
    try:
        if create:
            root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=probe_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InvalidParameterError(name, f"a writable directory ({exc.strerror or exc})", str(path)) from None
    return root


#: name endings of the files gnnprivacy writes and reads back (replacing one loses a run, a
#: model, a checkpoint or a cache), with what each is
_OWNED_SUFFIXES = ((".model.pt", "saved model"), (".failed.json", "failure record"),
                   (".split.npz", "split"), (".claim", "run claim"), (".pt", "checkpoint"))
#: the largest JSON file sniffed for a run record
_SNIFF_BYTES = 1 << 20


def owned_file_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it is an existing file that gnnprivacy wrote and reads back (a run
    or tune record, a saved model, a checkpoint, a split, the index cache ...), else ``None``.
    Only regular files are opened (a FIFO would block)."""
    p = Path(path)
    try:
        if not p.is_file():
            return None
    except OSError:
        return None
    if p.name == ".index.json":
        return "index cache"
    for suffix, kind in _OWNED_SUFFIXES:
        if p.name.endswith(suffix):
            return kind
    if p.suffix == ".json" and p.stat().st_size <= _SNIFF_BYTES:
        import json

        try:
            data = json.loads(p.read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        if isinstance(data, dict) and "run_id" in data:
            return "tune record" if "tuning" in data else "run record"
    return None


def check_output_file(path: str | os.PathLike, *, name: str, force: bool = False,
                      reads: tuple = (), create_folder: bool = False) -> Path:
    """Prove that ``path`` can be written as a file (its folder exists or can be created and is
    writable; ``path`` is not a folder), before any work, and that writing it destroys nothing.

    Every command that writes a file the user names (``train --save-model``, ``predict -o``,
    ``results -o``, `TrainResult.save`) calls it. A path that looks like an option
    (``--save-model --json``) is refused; so is a path naming one of the files the command reads
    (``reads``), whatever ``force`` says. An existing file that gnnprivacy owns (a run record, a
    saved model, a checkpoint, a split ...: `owned_file_kind`) is refused unless ``force``;
    any other existing file is replaced with a warning saying so. ``create_folder``: a missing
    folder is fine if it can be created (the writer creates it).

    Raises:
        InvalidParameterError: naming the parameter, the path and the reason.
    """
    if not str(path).strip():
        raise InvalidParameterError(name, "a non-empty file path", str(path))
    if str(path).startswith("-"):
        raise InvalidParameterError(name, "a file path, not an option (its value is missing; write "
                                    "./NAME for a file whose name starts with '-')", str(path))
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        for source in reads:
            if source is not None and Path(source).exists() and os.path.samefile(source, target):
                raise InvalidParameterError(name, "a file other than the one this command reads",
                                            str(path))
        if not (target.is_file() or target.is_symlink()):
            raise InvalidParameterError(name, "a regular file path (it is a FIFO, socket or device)",
                                        str(path))
        kind = owned_file_kind(target)
        if kind is not None and not force:
            raise InvalidParameterError(name, f"a path that is not an existing {kind} (writing would "
                                        "destroy it; pass --force, or force=True in Python, to replace it)", str(path))
        import warnings

        warnings.warn(f"{name}: replacing the existing file {path}"
                      + (f" (a {kind})" if kind else ""), UserWarning, stacklevel=2)
    if target.is_dir():
        raise InvalidParameterError(name, "a file path (it is an existing directory)", str(path))
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise InvalidParameterError(name, f"a path in a directory ({parent} is a file)", str(path))
    if not parent.exists() and create_folder:
        check_writable_dir(parent, name=name, create=False)
        return target
    if not parent.exists():
        raise InvalidParameterError(name, f"a path in an existing directory ({parent} does not exist)",
                                    str(path))
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InvalidParameterError(name, f"a path in a writable directory ({exc.strerror or exc})",
                                    str(path)) from None
    return target


def write_output_file(path: str | os.PathLike, text: str, *, name: str = "path", force: bool = False,
                      what: str = "file") -> Path:
    """`check_output_file` then `atomic_write`: write ``text`` to a file the caller names,
    refusing to replace a run record, model or checkpoint unless ``force`` (and warning when it
    replaces any other existing file)."""
    target = check_output_file(path, name=name, force=force, create_folder=True)
    return atomic_write(target, text, what=what)


#: the file in a report folder listing what gnnprivacy wrote there (relative path -> sha256)
OUTPUT_MANIFEST = ".gnnprivacy-outputs.json"


class OutputFolder:
    """A folder that a report (``report``, ``demo``, ``reproduce``) writes into, with a manifest
    (`OUTPUT_MANIFEST`) of the files it wrote there and their sha256.

    A rerun replaces the files that an earlier report wrote and that nobody changed since (their
    digest is the manifest's); any other existing file (the user's own ``report.md``, a report
    edited by hand, a file in ``plots/``) is refused unless ``force``, and replaced with a
    warning saying so when forced. Stale plots are deleted only when the manifest lists them with
    their current digest: a file the library did not write is never deleted, ``force`` or not.
    """

    def __init__(self, root: str | os.PathLike, *, name: str, force: bool = False) -> None:
        self.root = Path(root)
        self.name = name
        self.force = force
        self._written = self._load()

    def _load(self) -> dict[str, str]:
        import json

        try:
            data = json.loads(read_regular(self.root / OUTPUT_MANIFEST, max_bytes=_SNIFF_BYTES))
        except (OSError, ValueError, RecursionError):
            return {}  # none, or unreadable: every existing file counts as someone else's
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}

    def owns(self, rel: str) -> bool:
        """Whether ``rel`` is a file an earlier report wrote here, unchanged since."""
        path = self.root / rel
        if rel not in self._written or not path.is_file():
            return False
        try:
            return file_digest(path) == self._written[rel]
        except OSError:
            return False

    def check(self, rels) -> None:
        """Refuse (before any work) when writing ``rels`` would replace a file this library did
        not write, unless ``force``; a folder in the way is refused whatever ``force`` says."""
        for rel in rels:
            path = self.root / rel
            if path.is_dir():
                raise InvalidParameterError(self.name, f"a folder where {rel} can be written (it is a "
                                            "directory)", str(self.root))
            if (path.exists() or path.is_symlink()) and not self.owns(rel) and not self.force:
                raise InvalidParameterError(self.name, f"a folder without a {rel} that gnnprivacy did not "
                                            "write (writing would replace it; pass --force to replace it)",
                                            str(self.root))

    def write(self, rel: str, data: bytes, *, what: str = "report file") -> Path:
        """Write ``rel`` (atomically) and record it in the manifest."""
        self.check([rel])
        path = self.root / rel
        if path.exists() and not self.owns(rel):
            import warnings

            warnings.warn(f"{self.name}: replacing the existing file {path} (--force)", UserWarning,
                          stacklevel=2)
        atomic_write(path, data, what=what)
        self._written[rel] = hashlib.sha256(data).hexdigest()
        self._save()
        return path

    def remove_stale(self, under: str, keep) -> None:
        """Delete the files under ``under/`` that an earlier report wrote (unchanged since) and
        that are not in ``keep``; any other file there is left alone."""
        prefix = under.rstrip("/") + "/"
        keep = set(keep)
        for rel in [r for r in self._written if r.startswith(prefix) and r not in keep]:
            if self.owns(rel):
                (self.root / rel).unlink()
            del self._written[rel]
        self._save()

    def _save(self) -> None:
        import json

        atomic_write(self.root / OUTPUT_MANIFEST, json.dumps(self._written, indent=1, sort_keys=True),
                     what="report manifest")
