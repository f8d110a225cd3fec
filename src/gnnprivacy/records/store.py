"""The results store: one JSON record per run, written by atomic rename, plus a derived index.

Layout of a runs directory:

```
RUNS/<run_id>.json            one finished run (a `RunRecord`),
                              written last; its ``files`` section names its companions with sha256
RUNS/<run_id>.split.npz       its split (a companion, written before the record)
RUNS/<run_id>.failed.json     a run that raised (error, traceback, config); removed on success
RUNS/.staging/<name>.<host>.<pid>.<rand>/   a private scratch folder, locked (never read as a
                              record; `ResultStore.staging_dir`); a dead owner's is removed
RUNS/.claims/<run_id>.claim   a run some process is working on (flock'd; pid, host): concurrent
                              sweeps on one runs directory skip claimed runs; dead owners' are retaken
RUNS/checkpoints/             checkpoints of private runs in progress (``resume`` continues them)
RUNS/.index.json              cache of the flattened index and of the checked companions (safe to delete)
```

Why files and not SQLite: every writer (a process-pool worker, or a Ray task on another machine
writing to a shared filesystem) touches only its own files, and a record appears in one atomic
``os.replace`` after its split, so any number of concurrent writers never conflict, a SIGKILL
never leaves a partial record (temporary files start with a dot and are ignored), and a
restarted sweep only asks "does ``<run_id>.json`` exist". SQLite in WAL mode needs shared
memory between the writers and is documented not to work over network filesystems (NFS), which
is exactly where a cluster's shared runs directory lives; it would also be a second source of
truth that can disagree with the files after a crash. The index is therefore *derived*: it is
rebuilt from the records on every read, and :file:`.index.json` only caches parsed rows keyed by
(file name, size, mtime; and its companions' sizes and mtimes) so a re-read parses and hashes
only new or changed records. Readers write the cache atomically; a lost race just rewrites an
equally valid cache.

A run's files become finished together or not at all (`ResultStore.publish`): each
companion is written atomically, then the record, atomically and last, naming every companion
with its sha256 and size. A record whose companions are missing, truncated or changed, a record
that does not parse (truncated, edited by hand) and one whose fields have the wrong types
(`record_problem`) are never counted as finished: readers
skip them with a warning naming the file and the problem (`ResultStore.skipped` counts
them), and a sweep reruns that run, replacing the files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import time
import traceback
import uuid
import warnings
from pathlib import Path
from typing import Any

from gnnprivacy._files import check_writable_dir, file_digest, read_regular
from gnnprivacy.errors import InvalidParameterError, UnknownNameError, WriteFailedError
from gnnprivacy.records.record import (RunRecord, _decode, load_record_json, read_record, record_problem,
                                       write_json_atomic)

try:
    import fcntl
except ImportError:  # Windows: no flock; stale staging folders are then left in place
    fcntl = None

INDEX_FILE = ".index.json"
STAGING_DIR = ".staging"
FAILED_SUFFIX = ".failed.json"
CLAIMS_DIR = ".claims"
_RECORD_KEYS = ("run_id", "method", "dataset", "metrics")
_INDEX_VERSION = 4  # 4: each entry carries its sha256
#: the largest index cache read (a runs directory of a million runs stays below it)
MAX_INDEX_BYTES = 1 << 30
_HELD_LOCKS: dict[str, int] = {}  # staging folder / claim file -> fd of its locked file (this process)


def is_record_file(path: Path) -> bool:
    """Whether ``path`` names a finished run record (not a temp file, failure, split or index)."""
    name = path.name
    return (name.endswith(".json") and not name.startswith((".", "_"))
            and not name.endswith(FAILED_SUFFIX))


def flatten_record(record: dict[str, Any]) -> dict[str, Any]:
    """One flat index row from a record dict.

    Top-level keys: ``run_id``, ``status``, ``method``, ``dataset``, ``epsilon`` (spent), ``delta``,
    ``seed`` (the run seed; derived in sweeps), ``seed_index`` (the repeat index in a sweep),
    ``sweep`` (its name), ``created``; then ``config.<key>`` (the resolved config, so ``config.epsilon`` is
    the *target*), ``metrics.<name>``, ``privacy.<key>`` (scalars only) and ``timings.<key>``.
    """
    row: dict[str, Any] = {
        "run_id": record["run_id"], "status": "ok", "method": record["method"],
        "dataset": record["dataset"], "epsilon": record.get("epsilon"), "delta": record.get("delta"),
        "seed": (record.get("seeds") or {}).get("run"), "created": record.get("created"),
    }
    info = record.get("info") or {}
    if "seed_index" in info:  # the user's repeat index in a sweep, beside the derived seed
        row["seed_index"] = info["seed_index"]
    if info.get("sweep"):
        row["sweep"] = info["sweep"]
    for prefix in ("config", "metrics", "privacy", "timings"):
        for key, value in (record.get(prefix) or {}).items():
            if value is None or isinstance(value, (bool, int, float, str)):
                row[f"{prefix}.{key}"] = value
    return row


class UnreadableRecordWarning(UserWarning):
    """A run record file could not be read; it is skipped (and a sweep reruns its run)."""


def check_runs_dir(path: str | os.PathLike, *, name: str = "runs_dir") -> Path:
    """Create ``path`` if needed and prove it is a writable directory, before any training.

    Raises:
        InvalidParameterError: ``path`` is empty or a file, or cannot be created or written
            (the message names the parameter, the path and the operating system's reason).
    """
    return check_writable_dir(path, name=name)


def _load_json(path: Path) -> tuple[Any, str | None]:
    """``(decoded JSON, None)`` or ``(None, why it cannot be read)`` (a FIFO, a file over
    `MAX_RECORD_BYTES` or JSON nested too deep is named, never read forever)."""
    try:
        return load_record_json(path), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({exc})"
    except ValueError as exc:
        return None, f"not valid JSON, truncated? ({exc})"


def _companion_stats(root: Path, files: dict[str, Any]) -> dict[str, list[int]] | None:
    """``name -> [size, mtime_ns]`` of a record's companions (``None`` if one is missing)."""
    out = {}
    for name in files:
        try:
            st = (root / name).stat()
        except OSError:
            return None
        out[name] = [st.st_size, st.st_mtime_ns]
    return out


def _companions_problem(root: Path, files: dict[str, Any]) -> str | None:
    """Why the companions a record names are not complete (``None`` when they all match)."""
    for name, entry in files.items():
        path = root / name
        try:
            st = path.stat()
        except OSError:
            return f"its companion file {name} is missing (the run did not finish publishing)"
        if not stat.S_ISREG(st.st_mode):
            return f"its companion file {name} is not a regular file (a FIFO, socket or device)"
        size = st.st_size
        if size != entry["bytes"]:
            return f"its companion file {name} has {size} bytes, the record says {entry['bytes']} (truncated?)"
        if file_digest(path) != entry["sha256"]:
            return f"its companion file {name} does not match the record's sha256 (changed or damaged)"
    return None


def _record_problem(path: Path) -> str | None:
    """Why ``path`` is not a usable record, its companions included (``None`` when it is)."""
    data, problem = _load_json(path)
    if problem is None:
        problem = record_problem(data)
    if problem is None:
        problem = _companions_problem(path.parent, data.get("files") or {})
    return problem


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ResultStore:
    """A runs directory seen as a store of run records (see the module docstring).

    Args:
        root: the runs directory (created on the first write).
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        #: ``(path, reason)`` of the record files the last read skipped (truncated, not JSON ...)
        self.skipped: list[tuple[str, str]] = []

    def __repr__(self) -> str:
        return f"ResultStore({str(self.root)!r})"

    # -- writing ---------------------------------------------------------------------------
    def ensure_writable(self) -> None:
        """Create the directory and prove it is writable, or raise ``InvalidParameterError``."""
        check_writable_dir(self.root, name="runs_dir")

    # -- claims: concurrent sweeps on one runs directory share the work ---------------------
    def _claim_path(self, run_id: str) -> Path:
        return self.root / CLAIMS_DIR / f"{run_id}.claim"

    def claim(self, run_id: str, *, stale_seconds: float = 60.0) -> bool:
        """Atomically claim ``run_id`` for this process; ``False`` if a live process holds it.

        The claim is a file created with ``O_CREAT | O_EXCL``, locked with ``flock`` by its owner
        for as long as it runs, and holding ``{"pid", "host", "time"}`` (for people, and for
        systems without ``flock``). The lock dies with its process, however it dies, so a claim
        whose lock is free and whose content is written is stale and retaken (a free lock on an
        empty file younger than ``stale_seconds`` is a claim being created). Without ``fcntl``
        (Windows) a claim is stale when its pid is dead on this host.
        """
        path = self._claim_path(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "time": time.time()}
        for _ in range(3):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
            except FileExistsError:
                inode = self._stale_claim_inode(path, stale_seconds)
                if inode is None:
                    return False
                stale = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.stale")
                try:
                    if os.stat(path).st_ino == inode:  # still the file we found stale
                        os.rename(path, stale)
                        stale.unlink(missing_ok=True)
                except FileNotFoundError:
                    pass
                continue
            # held from the moment the file exists: a signal (KeyboardInterrupt) raised from here
            # on leaves a claim that the caller's release() removes
            _HELD_LOCKS[str(path)] = fd
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.write(fd, json.dumps(me).encode())
                os.fsync(fd)
            except OSError as exc:  # a full disk: no half-made claim may linger
                _HELD_LOCKS.pop(str(path), None)
                os.close(fd)
                path.unlink(missing_ok=True)
                raise WriteFailedError("claim", path, exc) from exc
            return True
        return False

    def _stale_claim_inode(self, path: Path, stale_seconds: float) -> int | None:
        """The inode of ``path`` if it is a stale claim, else ``None`` (live, or gone)."""
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None  # released meanwhile: the caller's next create decides
        try:
            st = os.fstat(fd)
            content = os.read(fd, 4096)
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return None  # a live process holds it
                if content.strip() or time.time() - st.st_mtime > stale_seconds:
                    return st.st_ino
                return None  # being created right now
            try:
                owner = json.loads(content)
                pid, host = int(owner["pid"]), str(owner["host"])
            except (ValueError, KeyError, TypeError):
                return st.st_ino if time.time() - st.st_mtime > stale_seconds else None
            if host == socket.gethostname() and pid != os.getpid() and not _pid_alive(pid):
                return st.st_ino
            return None
        finally:
            os.close(fd)

    def claim_owner(self, run_id: str) -> str:
        """Who holds the claim on ``run_id``, for people: ``"pid 123 on host h"``."""
        try:
            owner = json.loads(self._claim_path(run_id).read_text())
            return f"pid {int(owner['pid'])} on host {owner['host']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "another process"

    def release(self, run_id: str) -> None:
        """Drop this process's claim on ``run_id`` (no-op when this process holds none)."""
        path = self._claim_path(run_id)
        fd = _HELD_LOCKS.pop(str(path), None)
        if fd is None:
            return
        path.unlink(missing_ok=True)
        os.close(fd)

    def staging_dir(self, run_id: str) -> Path:
        """A fresh private folder in which one attempt of ``run_id`` writes its files.

        The folder holds ``.lock``, locked (``flock``) by this process until
        `release_staging`; the lock dies with the process, which is how
        `clean_stale_staging` tells abandoned folders from live ones.
        """
        name = f"{run_id}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        path = self.root / STAGING_DIR / name
        path.mkdir(parents=True)
        if fcntl is not None:
            fd = os.open(path / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _HELD_LOCKS[str(path)] = fd
        return path

    def release_staging(self, path: Path) -> None:
        """Remove a staging folder made by `staging_dir` and drop its lock."""
        shutil.rmtree(path, ignore_errors=True)
        fd = _HELD_LOCKS.pop(str(path), None)
        if fd is not None:
            os.close(fd)

    def publish(self, record: RunRecord, companions: dict[str, Any] | None = None) -> Path:
        """Publish a finished run: its companion files, then its record, so that they become
        finished together or not at all.

        Args:
            record: the run's record (its ``files`` section is filled in here).
            companions: file name (beside the record, e.g. ``<run_id>.split.npz``) -> either a
                function ``write(path)`` that writes the file atomically, or the path of a
                finished file to move there.

        Each companion is written (or moved) atomically, then the record, atomically and last,
        naming every companion with its sha256 and size. If anything fails (a full disk, a
        read-only folder), the companions written here are removed and
        `WriteFailedError` is raised: no record, so no finished run.
        """
        written, files = [], {}
        try:
            for name, source in (companions or {}).items():
                target = self.root / name
                if callable(source):
                    source(target)
                else:
                    try:
                        os.replace(source, target)
                    except OSError as exc:
                        raise WriteFailedError("run file", target, exc) from exc
                written.append(target)
                files[name] = {"sha256": file_digest(target), "bytes": target.stat().st_size}
            record.files = {**record.files, **files}
            path = record.save(self.root)
        except BaseException:
            for target in written:
                target.unlink(missing_ok=True)
            raise
        try:
            (self.root / f"{record.run_id}{FAILED_SUFFIX}").unlink(missing_ok=True)
        except OSError:
            pass  # a stale failure entry is hidden by the record anyway
        return path

    def commit(self, record: RunRecord, staging: Path) -> Path:
        """`publish` ``record`` with the files a run wrote into ``staging`` (its split)."""
        split = staging / f"{record.run_id}.split.npz"
        return self.publish(record, {split.name: split} if split.exists() else None)

    def write_failure(self, run_id: str, config: dict[str, Any], exc: BaseException) -> Path | None:
        """Record that ``run_id`` raised ``exc`` (atomic, replaces an earlier failure).

        Best effort: where the disk is full or read-only the entry is not written (``None``);
        the caller reports the failure anyway.
        """
        payload = {"run_id": run_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                   "traceback": "".join(traceback.format_exception(exc)), "config": config}
        try:
            return write_json_atomic(self.root / f"{run_id}{FAILED_SUFFIX}", payload, what="failure record")
        except OSError:
            return None

    def clean_stale_staging(self, *, grace_seconds: float = 60.0) -> int:
        """Remove staging folders whose owner died (their ``.lock`` is free); returns how many.

        A folder without a lock file (its owner died between ``mkdir`` and locking) is removed
        at once when its name says it belongs to a process of this host that no longer
        exists, else once older than ``grace_seconds``. Without ``fcntl`` (Windows) nothing is removed.
        """
        base, removed = self.root / STAGING_DIR, 0
        if fcntl is None or not base.is_dir():
            return 0
        for entry in base.iterdir():
            lock = entry / ".lock"
            if not lock.exists():
                if (_owner_is_dead(entry.name)
                        or time.time() - entry.stat().st_mtime > grace_seconds):
                    shutil.rmtree(entry, ignore_errors=True)
                    removed += 1
                continue
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live process holds it
            finally:
                os.close(fd)
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
        return removed

    # -- reading ---------------------------------------------------------------------------
    def record_paths(self) -> list[Path]:
        """Paths of all finished records, sorted by name."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_file() and is_record_file(p))

    def _scan(self, *, warn: bool = True) -> list[tuple[Path, dict[str, Any]]]:
        """``(path, index row)`` of every finished, valid record (see the module docstring).

        Invalid records are listed in `skipped` and reported with an
        `UnreadableRecordWarning` naming the file and the problem. A record unchanged
        since the last read, with unchanged companions (same size and mtime as in the index
        cache), is not parsed or hashed again.
        """
        cache = self._read_cache()
        self.skipped = []
        fresh, out = {}, []
        for path in self.record_paths():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            key = [st.st_size, st.st_mtime_ns]
            hit = cache.get(path.name)
            if (isinstance(hit, dict) and hit.get("key") == key and isinstance(hit.get("files"), dict)
                    and _companion_stats(self.root, hit["files"]) == hit["files"]
                    and isinstance(hit.get("row"), dict)):
                fresh[path.name] = hit
                out.append((path, hit["row"]))
                continue
            data, problem = _load_json(path)
            if problem is None:
                problem = record_problem(data)
            if problem is None:
                files = data.get("files") or {}
                problem = _companions_problem(self.root, files)
            if problem is not None:
                self.skipped.append((str(path), problem))
                if warn:
                    warnings.warn(f"skipping run record {path}: {problem}; a sweep reruns this run",
                                  UnreadableRecordWarning, stacklevel=3)
                continue
            row = flatten_record(data)
            fresh[path.name] = {"key": key, "files": _companion_stats(self.root, files) or {},
                                "row": _encode_row(row)}
            out.append((path, row))
        if fresh != cache:
            self._write_cache(fresh)
        return out

    def valid_record_paths(self) -> list[Path]:
        """`record_paths` without the records that are not finished and valid: unparsable,
        of the wrong shape, or with missing or damaged companions (see `_scan`)."""
        return [path for path, _ in self._scan()]

    def completed_ids(self) -> set[str]:
        """Run ids with a finished, valid record (a truncated record, or one whose companions
        are incomplete, does not count)."""
        return {p.name[: -len(".json")] for p in self.valid_record_paths()}

    def has_record(self, run_id: str) -> bool:
        """Whether ``run_id`` has a finished, valid record (companions included)."""
        path = self.root / f"{run_id}.json"
        return path.is_file() and _record_problem(path) is None

    def load(self, run_id: str) -> RunRecord:
        """The record of ``run_id``; unknown ids raise ``UnknownNameError``."""
        path = self.root / f"{run_id}.json"
        if not path.is_file():
            raise UnknownNameError("run id", run_id, sorted(self.completed_ids()))
        return read_record(path)

    def records(self) -> list[RunRecord]:
        """Every valid record (invalid files are skipped with a warning, see `skipped`)."""
        out = []
        for path in self.valid_record_paths():
            try:
                out.append(read_record(path))
            except ValueError as exc:  # e.g. keys a RunRecord does not have (a tune record)
                self.skipped.append((str(path), str(exc)))
                warnings.warn(f"skipping run record {path}: {exc}", UnreadableRecordWarning, stacklevel=2)
        return out

    def failures(self) -> list[dict[str, Any]]:
        """Failure entries (``run_id``, ``error``, ``traceback``, ``config``) without a later success."""
        if not self.root.is_dir():
            return []
        done = {p.name[: -len(".json")] for p, _ in self._scan(warn=False)}
        out = []
        for p in sorted(self.root.glob(f"*{FAILED_SUFFIX}")):
            if p.name.startswith(".") or p.name[: -len(FAILED_SUFFIX)] in done:
                continue
            data, problem = _load_json(p)
            if problem is None and not isinstance(data, dict):
                problem = f"not a JSON object (a {type(data).__name__})"
            if problem is not None:
                self.skipped.append((str(p), f"unreadable failure record: {problem}"))
                continue
            out.append({**data, "run_id": str(data.get("run_id", p.name[: -len(FAILED_SUFFIX)]))})
        return out

    def rows(self, *, include_failed: bool = False) -> list[dict[str, Any]]:
        """The index: one flat row per valid record (see `flatten_record`), sorted by run id.

        Rebuilt from the records; unchanged files are taken from the :file:`.index.json` cache.
        With ``include_failed``, failed runs are added with ``status = "failed"`` and ``error``.
        """
        rows = [_decode(row) for _, row in self._scan()]
        if include_failed:
            for fail in self.failures():
                cfg = fail.get("config") if isinstance(fail.get("config"), dict) else {}
                rows.append({"run_id": str(fail.get("run_id")), "status": "failed", "method": cfg.get("method"),
                             "dataset": cfg.get("dataset"), "seed": cfg.get("seed"),
                             "error": fail.get("error"),
                             **{f"config.{k}": v for k, v in cfg.items()}})
        return sorted(rows, key=lambda r: r["run_id"])

    def _read_cache(self) -> dict[str, Any]:
        """The index cache's entries whose checksum holds (an edited row is dropped with a
        warning, and its record read again)."""
        try:
            data = json.loads(read_regular(self.root / INDEX_FILE, max_bytes=MAX_INDEX_BYTES))
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _INDEX_VERSION:
            return {}
        entries = data.get("entries")
        if not isinstance(entries, dict):
            return {}
        out = {}
        for name, entry in entries.items():
            if isinstance(entry, dict) and entry.get("sha256") == _entry_digest(name, entry):
                out[name] = entry
            else:
                warnings.warn(f"the index cache entry of {name} in {self.root / INDEX_FILE} failed its "
                              "checksum (edited or damaged): reading the record again", UnreadableRecordWarning,
                              stacklevel=4)
        return out

    def _write_cache(self, entries: dict[str, Any]) -> None:
        entries = {name: {**entry, "sha256": _entry_digest(name, entry)} for name, entry in entries.items()}
        try:
            write_json_atomic(self.root / INDEX_FILE, {"version": _INDEX_VERSION, "entries": entries},
                              what="index cache")
        except OSError:
            pass  # a read-only runs directory is still readable; the cache is only an optimisation


def _entry_digest(name: str, entry: dict[str, Any]) -> str:
    """sha256 of an index cache entry (its ``sha256`` field left out), like the accounting
    cache's: a hand-edited row fails it."""
    blob = json.dumps([name, {k: v for k, v in entry.items() if k != "sha256"}], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _encode_row(row: dict[str, Any]) -> dict[str, Any]:
    from gnnprivacy.records.record import _encode

    return _encode(row)


def parse_filter(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``(key, value)``; the value is parsed as YAML (``8`` -> 8, ``true`` -> True)."""
    import yaml

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise InvalidParameterError("filter", "KEY=VALUE (e.g. method=gcn, config.epsilon=8)", text)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _column_for(key: str, columns: set[str]) -> str | None:
    for candidate in (key, f"config.{key}", f"metrics.{key}", f"privacy.{key}", f"timings.{key}"):
        if candidate in columns:
            return candidate
    return None


def _matches(actual: Any, wanted: Any) -> bool:
    numeric = (int, float)
    if isinstance(actual, numeric) and isinstance(wanted, numeric) and not isinstance(actual, bool):
        return float(actual) == float(wanted)
    if wanted is None or actual is None:
        return actual is wanted
    return actual == wanted or str(actual) == str(wanted)


def filter_rows(rows: list[dict[str, Any]], filters: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
    """Keep the rows matching every ``key=value`` filter.

    A bare key is looked up as a top-level column first (so ``epsilon`` is the epsilon *spent*),
    then as ``config.<key>``, ``metrics.<key>``, ``privacy.<key>``, ``timings.<key>``. Numbers
    compare numerically (``8`` matches ``8.0``).

    Raises:
        InvalidParameterError: a filter is not ``KEY=VALUE``.
        UnknownNameError: a key matches no column (the message lists the columns).
    """
    parsed = [parse_filter(f) for f in filters]
    if not rows or not parsed:
        return list(rows)
    columns = set().union(*(r.keys() for r in rows))
    resolved = []
    for key, value in parsed:
        column = _column_for(key, columns)
        if column is None:
            raise UnknownNameError("filter key", key, sorted(columns))
        resolved.append((column, value))
    return [r for r in rows if all(column in r and _matches(r[column], value) for column, value in resolved)]


def _owner_is_dead(staging_name: str) -> bool:
    """Whether a staging folder named ``<run_id>.<host>.<pid>.<rand>`` belongs to a process
    of this host that has exited (``False`` when unsure: another host, or an odd name)."""
    head, _, _rand = staging_name.rpartition(".")
    head, _, pid = head.rpartition(".")
    if not pid.isdigit() or not head.endswith("." + socket.gethostname()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
