"""Run a PyG dataset class on the data root without ever writing into the root.

PyG writes ``processed/`` next to ``raw/``. So each dataset is processed in the cache
(``<cache>/<hash of root>/pyg-<version>/<subdir>``), whose ``raw`` is a symlink (a copy if
symlinks fail) of ``<root>/<subdir>/raw``. The entry is built in a temporary folder and
renamed into place only after PyG succeeded, with a marker recording the raw files' sizes
and modification times; an entry without marker, or whose raw files changed, is rebuilt.

Raw files absent from the root: if ``download`` is allowed PyG may download them into the
temporary folder (kept in the cache on success); every failure becomes
`DatasetNotFoundError` naming the expected files and where they
were looked for. Files present but unparsable become
`CorruptDatasetError` naming the file.

Concurrency: the check-and-build of an entry runs under an exclusive ``flock`` on
``<cache>/<root key>/pyg-<version>/.build.lock``, so two processes (sweep workers) that need the
same dataset on a fresh cache build it once: the second waits, then finds the finished entry.
With ``$GNNPRIVACY_QUIET`` set (the CLI's ``-q``) PyG's "Processing... / Done!" lines are dropped.

Damage: an entry whose processed files do not load (truncated by a full disk, a killed copy) is
removed and rebuilt from the raw files, with a `CacheRebuiltWarning`. A build that fails
because the cache folder cannot take the processed files (a full disk, a read-only folder) raises
`WriteFailedError` naming the cache folder and the reason, not a
parse error about intact raw files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnnprivacy.datasets.paths import CACHE_ENV, DATA_ENV, LoadContext, missing_files
from gnnprivacy.datasets.validate import find_corrupt
from gnnprivacy.errors import CorruptDatasetError, DatasetNotFoundError, InvalidParameterError

try:
    import fcntl
except ImportError:  # Windows: no flock; concurrent builds then rely on the atomic rename alone
    fcntl = None

MARKER = ".gnnprivacy-entry.json"


@dataclass(frozen=True)
class PygSource:
    """How one dataset sits in the root and how PyG opens it.

    Attributes:
        subdir: folder (relative to the root, and to the PyG root) holding ``raw/``.
        required: files the dataset needs, relative to ``subdir`` (``raw/x.npz`` ...).
        factory: ``factory(pyg_root: str) -> Dataset`` building the PyG dataset.
        links: entries of ``<root>/<subdir>`` linked into the cache entry.
        cache_subdir: folder of the entry under the cache (default ``subdir``); differs when
            one raw folder is processed in several ways (German's feature sets).
        prepare: optional ``prepare(entry_dir)`` run after linking, before ``factory``.
        reuse_built: return the dataset object that processed the files (its data is in
            memory; its paths point to the deleted temporary folder) instead of reopening it
            from the cache, which saves reading the processed file again. ``False`` for
            classes that read files after construction (OGB's ``get_idx_split``).
    """

    subdir: str
    required: tuple[str, ...]
    factory: Callable[[str], Any]
    links: tuple[str, ...] = ("raw",)
    cache_subdir: str | None = None
    prepare: Callable[[Path], None] | None = None
    reuse_built: bool = True

    @property
    def entry_subdir(self) -> str:
        """Folder of the cache entry relative to the PyG root."""
        return self.cache_subdir or self.subdir


def _fingerprint(folder: Path, required: tuple[str, ...]) -> list[list[Any]]:
    out = []
    for rel in required:
        st = (folder / rel).stat()
        out.append([rel, st.st_size, st.st_mtime_ns])
    return out


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.symlink(src, dst, target_is_directory=src.is_dir())
    except OSError:
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)


def _remove_entry(entry: Path) -> None:
    """Move ``entry`` aside (atomic) and delete it; symlinks inside are unlinked, not followed."""
    trash = entry.with_name(f".trash-{entry.name}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(entry, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _sweep_leftovers(base: Path, max_age_s: float = 86400.0) -> None:
    """Delete temporary / trash folders of builds killed more than ``max_age_s`` ago.

    Other processes may be creating and deleting folders here at the same time: a folder that
    vanishes while being listed is simply skipped (never reported as an unwritable cache).
    """
    now = time.time()
    for pattern in (".tmp-*", "*/.trash-*", "*/*/.trash-*"):
        try:
            found = list(base.glob(pattern))
        except OSError:
            continue
        for path in found:
            try:
                if now - path.lstat().st_mtime > max_age_s:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                continue


@contextlib.contextmanager
def _entry_lock(ctx: LoadContext, source: PygSource):
    """Hold an exclusive lock for building ``source``'s entry (see the module docstring)."""
    base = ctx.cache_base
    try:
        base.mkdir(parents=True, exist_ok=True)
        fd = os.open(base / ".build.lock", os.O_CREAT | os.O_RDWR, 0o666)
    except OSError as exc:
        raise InvalidParameterError(f"cache_dir (${CACHE_ENV})", "a writable directory",
                                    str(ctx.cache)) from exc
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def _quiet():
    """Swallow PyG's stdout/stderr chatter when ``$GNNPRIVACY_QUIET`` is set."""
    if not os.environ.get("GNNPRIVACY_QUIET"):
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    return stack


_FORCE_WEIGHTS_ONLY = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"


@contextlib.contextmanager
def weights_only_loads():
    """Every ``torch.load`` inside reads weights only (torch's ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``).

    PyG re-reads ``processed/pre_transform.pt`` with ``weights_only=False`` each time a dataset
    opens, and falls back to it for ``data.pt`` when a weights-only read fails: a pickle
    payload planted in the cache would run. Inside this block such a file fails to load
    instead, and the entry is rebuilt from the raw files (`CacheRebuiltWarning`)."""
    old = os.environ.get(_FORCE_WEIGHTS_ONLY)
    os.environ[_FORCE_WEIGHTS_ONLY] = "1"
    try:
        with warnings.catch_warnings():  # PyG's "use add_safe_globals" advice: not for a cache
            warnings.filterwarnings("ignore", message="Weights only load failed")
            yield
    finally:
        if old is None:
            os.environ.pop(_FORCE_WEIGHTS_ONLY, None)
        else:
            os.environ[_FORCE_WEIGHTS_ONLY] = old


def _entry_is_current(entry: Path, source: PygSource, fingerprint) -> bool:
    try:
        marker = json.loads((entry / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if missing_files(entry, source.required):
        return False
    if fingerprint is None:  # nothing in the root: accept a previously downloaded entry
        return not marker.get("linked", False)
    return marker.get("fingerprint") == fingerprint


def not_found_error(ctx: LoadContext, source: PygSource, missing: list[str], why: str) -> DatasetNotFoundError:
    """The error for missing raw files: which files, where, and how to change the root."""
    folder = ctx.root.path / source.subdir
    paths = ", ".join(str(folder / rel) for rel in missing)
    return DatasetNotFoundError(
        f"dataset {ctx.name!r}: raw file(s) missing: {paths}. Data root: {ctx.root.describe()}. "
        f"Put them there (PyG's layout), or point root= / --data-root / ${DATA_ENV} at a folder "
        f"that has them. {why}")


def _build(ctx: LoadContext, source: PygSource, entry: Path, linked: bool, fingerprint):
    """Process ``source`` in a temporary folder, then rename it to ``entry``; return the dataset."""
    base = ctx.cache_base
    src = ctx.root.path / source.subdir
    try:
        base.mkdir(parents=True, exist_ok=True)
        note = base.parent / "ROOT.txt"  # for humans: which root this hashed folder serves
        if not note.exists():
            note.write_text(f"{ctx.root.path}\n")
        _sweep_leftovers(base)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
    except OSError as exc:
        raise InvalidParameterError(f"cache_dir (${CACHE_ENV})", "a writable directory",
                                    str(ctx.cache)) from exc
    try:
        tmp_entry = tmp / source.entry_subdir
        if linked:  # otherwise the dataset class creates its folders while downloading
            tmp_entry.mkdir(parents=True)
            for name in source.links:
                if (src / name).exists():
                    _link_or_copy(src / name, tmp_entry / name)
            if source.prepare is not None:
                source.prepare(tmp_entry)
        if linked:
            _check_pickles(ctx, src, source.required)
        try:
            with _quiet(), weights_only_loads():
                dataset = source.factory(str(tmp))  # holds its data in memory: reused below
        except Exception as exc:
            _raise_build_error(ctx, source, tmp_entry, linked, exc)
        (tmp_entry / MARKER).write_text(json.dumps(
            {"root": str(ctx.root.path), "linked": linked, "fingerprint": fingerprint}))
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp_entry, entry)
        except OSError:
            if not (entry / MARKER).is_file():  # not a concurrent winner: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dataset


def _check_pickles(ctx: LoadContext, folder: Path, required: tuple[str, ...]) -> None:
    """Before PyG unpickles Planetoid's ``ind.*`` raw files: parse each one's opcodes and refuse
    a file that names anything but arrays and containers (`check_planetoid_pickle`), so a
    planted payload is reported, not run."""
    from gnnprivacy.datasets.pickles import check_planetoid_pickle

    for rel in required:
        if Path(rel).name.startswith("ind.") and not rel.endswith(".index"):
            try:
                check_planetoid_pickle(folder / rel)
            except (OSError, ValueError) as exc:
                raise CorruptDatasetError(
                    f"dataset {ctx.name!r}: raw file {folder / rel} is corrupt or unsafe ({exc}); "
                    "replace it with an intact copy") from None


def _cache_write_fault(folder: Path, exc: BaseException) -> OSError | None:
    """The write fault behind a failed build, if any: an ``OSError`` such as ``ENOSPC`` in the
    exception's chain, or (torch hides it in a ``RuntimeError``) a 1 MiB probe write in the
    cache folder that fails now."""
    from gnnprivacy._files import DISK_FAULTS

    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FAULTS:
            return seen
        seen = seen.__cause__ or seen.__context__
    try:
        fd, probe = tempfile.mkstemp(prefix=".space-probe.", dir=folder)
    except OSError as fault:
        return fault
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * (1 << 20))
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as fault:
        return fault
    finally:
        os.unlink(probe)
    return None


def _raise_build_error(ctx, source, tmp_entry, linked, exc):
    fault = _cache_write_fault(tmp_entry.parent if tmp_entry.parent.is_dir() else ctx.cache_base, exc)
    if fault is not None:
        from gnnprivacy.errors import WriteFailedError

        raise WriteFailedError(f"processed cache of dataset {ctx.name!r} (${CACHE_ENV} chooses its folder)",
                               ctx.cache_base, fault) from exc
    still_missing = missing_files(tmp_entry, source.required)
    if still_missing:
        raise not_found_error(ctx, source, still_missing,
                              f"Download failed: {type(exc).__name__}: {exc}") from exc
    where = ctx.root.path / source.subdir if linked else tmp_entry
    bad = find_corrupt(where, source.required)
    if bad is None:
        files = ", ".join(str(where / rel) for rel in source.required)
        raise CorruptDatasetError(
            f"dataset {ctx.name!r}: PyG could not parse the raw files {files}: "
            f"{type(exc).__name__}: {exc}") from exc
    origin = "" if linked else " (downloaded)"
    raise CorruptDatasetError(
        f"dataset {ctx.name!r}: raw file {where / bad[0]}{origin} is corrupt or unreadable "
        f"({bad[1]}); replace it with an intact copy") from exc


def load_pyg_dataset(ctx: LoadContext, source: PygSource):
    """Return ``source.factory`` opened on a complete cache entry, building it if needed.

    Raises:
        DatasetNotFoundError: raw files missing and not downloadable.
        CorruptDatasetError: raw files present but unparsable.
        InvalidParameterError: the cache folder is not writable.
    """
    src = ctx.root.path / source.subdir
    missing = missing_files(src, source.required)
    fingerprint = None if missing else _fingerprint(src, source.required)
    entry = ctx.cache_base / source.entry_subdir
    if not _entry_is_current(entry, source, fingerprint):
        if missing and len(missing) < len(source.required):
            raise not_found_error(ctx, source, missing, "The other raw files are present, so "
                                  "nothing was downloaded (a partial copy is not completed).")
        if missing and not ctx.download:
            raise not_found_error(ctx, source, missing, "Downloading was not attempted (download=False).")
        with _entry_lock(ctx, source):  # another process may be building it: wait, then re-check
            if entry.exists() and not _entry_is_current(entry, source, fingerprint):
                _remove_entry(entry)
            if not entry.exists():
                dataset = _build(ctx, source, entry, linked=not missing, fingerprint=fingerprint)
                if source.reuse_built:
                    return dataset
    try:
        with _quiet(), weights_only_loads():
            return source.factory(str(ctx.cache_base))
    except Exception as exc:  # noqa: BLE001 - a processed file that does not load is rebuilt once
        from gnnprivacy.datasets.pickles import load_error_line

        reason = load_error_line(exc)
    warnings.warn(f"dataset {ctx.name!r}: the processed cache {entry} is damaged ({reason}); "
                  "rebuilding it from the raw files", CacheRebuiltWarning, stacklevel=2)
    with _entry_lock(ctx, source):
        try:  # another process may have rebuilt it while we waited for the lock
            with _quiet(), weights_only_loads():
                return source.factory(str(ctx.cache_base))
        except Exception:  # noqa: BLE001
            _remove_entry(entry)
        dataset = _build(ctx, source, entry, linked=not missing, fingerprint=fingerprint)
    if source.reuse_built:
        return dataset
    with _quiet(), weights_only_loads():
        return source.factory(str(ctx.cache_base))


class CacheRebuiltWarning(UserWarning):
    """A processed dataset cache entry did not load (truncated, damaged) and was rebuilt."""
