"""The results store: one JSON record per run, written by atomic rename, plus a derived index.

Layout of a runs directory:

```
RUNS/<run_id>.json            one finished run (a `RunRecord`)
RUNS/<run_id>.split.npz       its split (written before the record)
RUNS/<run_id>.failed.json     a run that raised (error, traceback, config); removed on success
RUNS/.staging/<run_id>.<host>.<pid>.<rand>/   a run in progress, locked (never read as a record)
RUNS/.claims/<run_id>.claim   a run some process is working on (flock'd; pid, host): concurrent
                              sweeps on one runs directory skip claimed runs; dead owners' are retaken
RUNS/.index.json              cache of the flattened index (safe to delete)
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
(file name, size, mtime) so a re-read parses only new or changed records. Readers write the cache
atomically; a lost race just rewrites an equally valid cache.

A record file that does not parse (truncated by a full disk, edited by hand) is never counted as
finished: readers skip it with a warning naming the file (`ResultStore.skipped`), and a
sweep reruns that run, replacing the file.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
import traceback
import uuid
import warnings
from pathlib import Path
from typing import Any

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.reporting.record import RunRecord, _decode, read_record, write_json_atomic

try:
    import fcntl
except ImportError:  # Windows: no flock; stale staging folders are then left in place
    fcntl = None

INDEX_FILE = ".index.json"
STAGING_DIR = ".staging"
FAILED_SUFFIX = ".failed.json"
CLAIMS_DIR = ".claims"
_RECORD_KEYS = ("run_id", "method", "dataset", "metrics")
_INDEX_VERSION = 2
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
        "seed": record.get("seeds", {}).get("run"), "created": record.get("created"),
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
        InvalidParameterError: ``path`` is a file, or cannot be created or written (the message
            names the parameter, the path and the operating system's reason).
    """
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        raise InvalidParameterError(name, "a directory (it is an existing file)", str(path))
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InvalidParameterError(name, f"a writable directory ({exc.strerror or exc})", str(path)) from None
    return root


def _record_problem(path: Path) -> str | None:
    """Why ``path`` is not a usable record (``None`` when it is)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable ({exc})"
    except ValueError as exc:
        return f"not valid JSON, truncated? ({exc})"
    if not isinstance(data, dict):
        return "not a JSON object"
    missing = [k for k in _RECORD_KEYS if k not in data]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    return None


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
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe.{uuid.uuid4().hex}"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise InvalidParameterError("runs_dir", f"a writable directory ({exc.strerror})",
                                        str(self.root)) from None

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
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps(me).encode())
            os.fsync(fd)
            _HELD_LOCKS[str(path)] = fd
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

    def commit(self, record: RunRecord, staging: Path) -> Path:
        """Publish a finished run: move its split, then write the record atomically (last)."""
        split = staging / f"{record.run_id}.split.npz"
        if split.exists():
            os.replace(split, self.root / split.name)
        path = record.save(self.root)
        (self.root / f"{record.run_id}{FAILED_SUFFIX}").unlink(missing_ok=True)
        return path

    def write_failure(self, run_id: str, config: dict[str, Any], exc: BaseException) -> Path:
        """Record that ``run_id`` raised ``exc`` (atomic, replaces an earlier failure)."""
        payload = {"run_id": run_id, "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                   "traceback": "".join(traceback.format_exception(exc)), "config": config}
        return write_json_atomic(self.root / f"{run_id}{FAILED_SUFFIX}", payload)

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

    def valid_record_paths(self) -> list[Path]:
        """`record_paths` without the files that do not parse as a record.

        Skipped files are listed in `skipped` and reported with an
        `UnreadableRecordWarning` naming the file. Files unchanged since the last read
        (same size and mtime as in the index cache) are not parsed again.
        """
        cache = self._read_cache()
        self.skipped = []
        out = []
        for path in self.record_paths():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            hit = cache.get(path.name)
            if hit is not None and hit.get("key") == [st.st_size, st.st_mtime_ns]:
                out.append(path)
                continue
            problem = _record_problem(path)
            if problem is None:
                out.append(path)
            else:
                self.skipped.append((str(path), problem))
                warnings.warn(f"skipping run record {path}: {problem}; a sweep reruns this run",
                              UnreadableRecordWarning, stacklevel=3)
        return out

    def completed_ids(self) -> set[str]:
        """Run ids with a finished, readable record (a truncated record does not count)."""
        return {p.name[: -len(".json")] for p in self.valid_record_paths()}

    def has_record(self, run_id: str) -> bool:
        """Whether ``run_id`` has a finished, readable record."""
        path = self.root / f"{run_id}.json"
        return path.is_file() and _record_problem(path) is None

    def load(self, run_id: str) -> RunRecord:
        """The record of ``run_id``; unknown ids raise ``UnknownNameError``."""
        path = self.root / f"{run_id}.json"
        if not path.is_file():
            raise UnknownNameError("run id", run_id, sorted(self.completed_ids()))
        return read_record(path)

    def records(self) -> list[RunRecord]:
        """Every readable record (unreadable files are skipped with a warning, see `skipped`)."""
        return [read_record(p) for p in self.valid_record_paths()]

    def failures(self) -> list[dict[str, Any]]:
        """Failure entries (``run_id``, ``error``, ``traceback``, ``config``) without a later success."""
        if not self.root.is_dir():
            return []
        done = self.completed_ids()
        out = []
        for p in sorted(self.root.glob(f"*{FAILED_SUFFIX}")):
            if p.name.startswith(".") or p.name[: -len(FAILED_SUFFIX)] in done:
                continue
            try:
                out.append(_decode(json.loads(p.read_text())))
            except (OSError, ValueError) as exc:
                self.skipped.append((str(p), f"unreadable failure record ({exc})"))
        return out

    def rows(self, *, include_failed: bool = False) -> list[dict[str, Any]]:
        """The index: one flat row per record (see `flatten_record`), sorted by run id.

        Rebuilt from the records; unchanged files are taken from the :file:`.index.json` cache.
        With ``include_failed``, failed runs are added with ``status = "failed"`` and ``error``.
        """
        cache = self._read_cache()
        fresh, rows = {}, []
        for path in self.valid_record_paths():
            st = path.stat()
            key = [st.st_size, st.st_mtime_ns]
            hit = cache.get(path.name)
            if hit is not None and hit["key"] == key:
                row = hit["row"]
            else:
                try:
                    row = flatten_record(_decode(json.loads(path.read_text())))
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    self.skipped.append((str(path), f"unreadable ({exc})"))
                    warnings.warn(f"skipping run record {path}: {exc}", UnreadableRecordWarning, stacklevel=2)
                    continue
            fresh[path.name] = {"key": key, "row": row}
            rows.append(row)
        if fresh != cache:
            self._write_cache(fresh)
        rows = [_decode(r) for r in rows]
        if include_failed:
            for fail in self.failures():
                cfg = fail.get("config") or {}
                rows.append({"run_id": fail["run_id"], "status": "failed", "method": cfg.get("method"),
                             "dataset": cfg.get("dataset"), "seed": cfg.get("seed"),
                             "error": fail.get("error"),
                             **{f"config.{k}": v for k, v in cfg.items()}})
        return sorted(rows, key=lambda r: r["run_id"])

    def _read_cache(self) -> dict[str, Any]:
        try:
            data = json.loads((self.root / INDEX_FILE).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != _INDEX_VERSION:
            return {}
        return data.get("entries", {})

    def _write_cache(self, entries: dict[str, Any]) -> None:
        try:
            write_json_atomic(self.root / INDEX_FILE, {"version": _INDEX_VERSION, "entries": entries})
        except OSError:
            pass  # a read-only runs directory is still readable; the cache is only an optimisation


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
