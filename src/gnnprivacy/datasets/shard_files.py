"""The files of a shard folder: written so that nothing is lost or half-written, read so that a
damaged folder is one clear error naming the file.

Writing (`StagedFolder`): a partition writes every file into a hidden staging folder (beside
``out`` when ``out`` does not exist yet, inside it otherwise; its name ends in ``.tmp``)
through ordinary buffered writes (`NpyWriter`; no memory map, so a full disk is an
``OSError`` and not a ``SIGBUS``), each file ``fsync``-ed. Only when every file is complete is
the folder installed: a new ``out`` is one ``rename``; an existing one gets the new files
moved in one by one and ``meta.json`` last, so a folder without ``meta.json`` is never taken
for shards. ``meta.json`` lists the files the partition wrote (``files``): a later partition
into the same folder (``overwrite``) replaces and deletes those files only; the user's own
files there (notes, other folders) are kept, and a file of a name the partition writes that
no partition wrote is refused, ``overwrite`` or not. Any failure (a full disk, a read-only
folder, Ctrl-C) removes the staging folder and leaves ``out`` as it was; the error is one
`WriteFailedError` line.

Reading (`read_meta`, `load_array`): ``meta.json`` must be a JSON object with the expected
keys and types, and every array an ``.npy`` file of the expected dtype and shape; anything
else raises `InvalidParameterError` naming the folder, the file and what is wrong.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from gnnprivacy._files import fsync_dir, read_regular
from gnnprivacy.errors import InvalidParameterError, WriteFailedError

__all__ = ["META", "NpyWriter", "PART_META", "PartOf", "StagedFolder", "check_digest",
           "check_part_rows", "content_digest", "load_array", "meta_digest", "read_json",
           "read_meta"]

META = "meta.json"
PART_META = "part.json"
#: the old ``meta.json`` while its files are being replaced (an interrupted replacement is
#: still recognised as the library's own folder)
_REPLACING = ".meta.json.replacing"
_MAX_JSON = 1 << 24
#: the relative paths a partition may write (and so may delete when it replaces them)
_OWN_NAME = re.compile(r"^(meta\.json|[a-z_]+\.npy|part\d+/[a-z_]+\.(npy|json))$")
_CHUNK_BYTES = 1 << 26
#: files up to this size are digested whole; larger ones at `_SAMPLES` blocks
_WHOLE = 1 << 24
_SAMPLES, _BLOCK = 256, 4096


def content_digest(path: str | os.PathLike) -> str:
    """sha256 of a file's size and bytes: all of them up to 16 MiB, else of 256 blocks of
    4 KiB at fixed offsets spread over the file (a file copied from another partition, cut,
    or overwritten differs there; 1 MiB read whatever the size)."""
    import hashlib

    path = Path(path)
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        if size <= _WHOLE:
            h.update(fh.read())
        else:
            for i in range(_SAMPLES):
                fh.seek((size - _BLOCK) * i // (_SAMPLES - 1))
                h.update(fh.read(_BLOCK))
    return h.hexdigest()[:32]


def meta_digest(meta: dict) -> str:
    """sha256 of ``meta.json``'s content (keys sorted; its ``files`` and ``digests`` lists
    excepted): each ``part.json`` carries it, so an edited ``meta.json`` is refused."""
    import hashlib

    body = {k: v for k, v in meta.items() if k not in ("files", "digests")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


def check_digest(folder: Path, meta: dict, rel: str) -> None:
    """``folder/rel`` has the digest ``meta.json`` recorded (folders without digests pass).

    Raises:
        InvalidParameterError: another content (a file from another partition, cut or
            changed after the partition wrote it).
    """
    want = (meta.get("digests") or {}).get(rel)
    if want is None:
        return
    try:
        got = content_digest(folder / rel)
    except OSError as exc:
        raise InvalidParameterError("path", "complete shards",
                                    f"{folder}/{rel}: {exc.strerror or exc}") from None
    if got != want:
        raise InvalidParameterError(
            "path", "shards whose files are the ones the partition wrote",
            f"{folder}/{rel}: another content than meta.json records (a file of another "
            "partition, or changed since; partition again)")


class PartOf:
    """What every opened part knows of its partition (``meta`` is its ``meta.json``)."""

    meta: dict

    @property
    def num_parts(self) -> int:
        return int(self.meta["num_parts"])


class NpyWriter:
    """An ``.npy`` file written front to back in chunks with buffered writes (`write`), then
    flushed and ``fsync``-ed (`close`); the chunks must fill ``shape`` exactly."""

    def __init__(self, path: str | os.PathLike, dtype, shape: Iterable[int]):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self._left = int(np.prod(self.shape, dtype=np.int64))
        self._fh = open(self.path, "wb")
        try:
            np.lib.format.write_array_header_1_0(
                self._fh, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                           "fortran_order": False, "shape": self.shape})
        except BaseException:
            self._fh.close()
            raise

    def write(self, chunk) -> None:
        a = np.ascontiguousarray(chunk, dtype=self.dtype)
        if a.size > self._left:
            raise ValueError(f"{self.path.name}: more values than its shape {self.shape}")
        self._left -= a.size
        if a.size:
            self._fh.write(a.data)

    def close(self) -> None:
        if self._left:
            raise ValueError(f"{self.path.name}: {self._left} values short of {self.shape}")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.close()
        else:
            self._fh.close()


def _owned(rel: object) -> bool:
    return isinstance(rel, str) and bool(_OWN_NAME.match(rel))


class StagedFolder:
    """The shard files of one partition, staged and then installed in ``out`` (module
    docstring). Use as a context manager; `install` ends it.

    Args:
        out: the shard folder.
        overwrite: replace the shards already in ``out``.
        planned: the relative paths the partition will write (checked for collisions with
            files no partition wrote, before any work).
        legacy_files: ``meta -> relative paths`` for a folder whose ``meta.json`` lists no
            files (written before the list existed).

    Raises:
        InvalidParameterError: ``out`` is a file, holds shards and ``overwrite`` is not set,
            holds a ``meta.json`` no partition wrote, or holds a file of a planned name that
            no partition wrote.
    """

    def __init__(self, out: str | os.PathLike, *, overwrite: bool, planned: Iterable[str],
                 legacy_files=None):
        self.out = Path(out)
        self.planned = list(planned)
        self._legacy = legacy_files
        if self.out.exists() and not self.out.is_dir():
            raise InvalidParameterError("out", "a folder for the shards (it is an existing file)",
                                        str(self.out))
        self.old = self._existing(bool(overwrite))
        self.written: list[str] = []
        self.stage: Path | None = None

    def _existing(self, overwrite: bool) -> list[str]:
        """The files an earlier partition wrote in ``out`` (to be replaced), after the checks."""
        if not self.out.exists():
            return []
        for name in (META, _REPLACING):
            meta_file = self.out / name
            if not (meta_file.exists() or meta_file.is_symlink()):
                continue
            try:
                meta = read_json(meta_file)
                ours = isinstance(meta, dict) and isinstance(meta.get("num_parts"), int) \
                    and isinstance(meta.get("part_sizes"), list)
                files = meta.get("files") if ours else None
                if files is None and ours and self._legacy is not None:
                    files = self._legacy(meta)
            except (InvalidParameterError, KeyError, TypeError, ValueError):
                files = None
            if not isinstance(files, list) or not all(_owned(f) for f in files):
                raise InvalidParameterError(
                    "out", f"a folder whose {META} a partition wrote (its {name} is not one: "
                    "gnnprivacy replaces only the files it wrote; move it away or choose "
                    "another folder)", str(self.out))
            if not overwrite and name == META:
                raise InvalidParameterError("out", "a folder without shards (or --overwrite / "
                                            "overwrite=True to replace them)", str(self.out))
            old = [f for f in files if f != META]
            break
        else:
            old = []
        for rel in self.planned:
            path = self.out / rel
            if rel not in old and (path.exists() or path.is_symlink()):
                raise InvalidParameterError(
                    "out", f"a folder without a {rel} that gnnprivacy did not write (a partition "
                    "replaces only its own files; move it away or choose another folder)",
                    str(self.out))
            if path.parent != self.out and path.parent.exists() and not path.parent.is_dir():
                raise InvalidParameterError(
                    "out", f"a folder where {Path(rel).parent} can be a folder (it is a file)",
                    str(self.out))
        return old

    # ---------------------------------------------------------------- staging
    def __enter__(self) -> StagedFolder:
        tag = uuid.uuid4().hex[:12]
        try:
            if self.out.exists():
                self.stage = self.out / f".partition-{tag}.tmp"
            else:
                self.out.parent.mkdir(parents=True, exist_ok=True)
                self.stage = self.out.parent / f".{self.out.name}.partition-{tag}.tmp"
            self.stage.mkdir()
        except OSError as exc:
            raise WriteFailedError("shards", self.out, exc) from exc
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if self.stage is not None and self.stage.exists():
            shutil.rmtree(self.stage, ignore_errors=True)
        self.stage = None
        if isinstance(exc, WriteFailedError) or not isinstance(exc, OSError):
            return False
        raise WriteFailedError("shards", self.out, exc) from exc

    def path(self, rel: str) -> Path:
        """Where to write ``rel`` (recorded as written)."""
        if not _owned(rel):  # pragma: no cover - a programming error
            raise ValueError(f"not a shard file name: {rel}")
        target = self.stage / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel not in self.written:
            self.written.append(rel)
        return target

    def writer(self, rel: str, dtype, shape) -> NpyWriter:
        """An `NpyWriter` for ``rel``."""
        return NpyWriter(self.path(rel), dtype, shape)

    def save(self, rel: str, array) -> None:
        """``array`` as the ``.npy`` file ``rel``, in chunks."""
        a = np.asarray(array)
        rows = max(1, _CHUNK_BYTES // max(1, a.itemsize * int(np.prod(a.shape[1:], dtype=np.int64))))
        with self.writer(rel, a.dtype, a.shape) as w:
            if a.ndim == 0:
                w.write(a)
            for lo in range(0, a.shape[0] if a.ndim else 0, rows):
                w.write(a[lo:lo + rows])

    def save_json(self, rel: str, obj: Any) -> None:
        with open(self.path(rel), "w", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    # ---------------------------------------------------------------- install
    def install(self, meta: dict) -> Path:
        """Write ``meta.json`` (with the list of written files) and put the staged files in
        place (module docstring); returns ``out``."""
        stage, out = self.stage, self.out
        meta = {**meta, "files": sorted(self.written + [META]),
                "digests": {rel: content_digest(stage / rel) for rel in sorted(self.written)}}
        with open(stage / META, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(meta, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(stage)
        if not out.exists():
            os.rename(stage, out)
            self.stage = None
            fsync_dir(out.parent)
            return out
        if (out / META).exists():
            os.replace(out / META, out / _REPLACING)
        for rel in self.written:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, out / rel)
        for rel in self.old:
            if rel not in self.written and (out / rel).is_file():
                (out / rel).unlink()
        for folder in sorted({(out / rel).parent for rel in self.old}, reverse=True):
            if folder != out and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        fsync_dir(out)
        os.replace(stage / META, out / META)
        if (out / _REPLACING).exists():
            (out / _REPLACING).unlink()
        fsync_dir(out)
        return out


# -------------------------------------------------------------------- reading
def read_json(path: Path) -> Any:
    """The JSON value of ``path``.

    Raises:
        InvalidParameterError: unreadable, not a regular file, too large or not JSON (the
            message names the file and the reason).
    """
    try:
        text = read_regular(path, max_bytes=_MAX_JSON)
    except OSError as exc:
        raise InvalidParameterError("path", "a readable shard folder",
                                    f"{path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = (f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError)
                  else type(exc).__name__)
        raise InvalidParameterError("path", "a shard folder whose JSON files gnnprivacy wrote",
                                    f"{path}: not JSON ({reason})") from None


def read_meta(folder: str | os.PathLike, *, kind: str, keys: dict[str, type]) -> dict:
    """``folder/meta.json``, checked: a JSON object of shards of ``kind`` with every key of
    ``keys`` of its type (``int`` excludes ``bool``; a list of ints for ``list``).

    Raises:
        InvalidParameterError: no ``meta.json`` (not a shard folder, or an interrupted
            partition), or one that fails the checks (the message names the file and the key).
    """
    folder = Path(folder)
    meta_file = folder / META
    if not meta_file.exists():
        if (folder / _REPLACING).exists():
            raise InvalidParameterError("path", "complete shards (a partition into this folder "
                                        "was interrupted: run it again)", str(folder))
        raise InvalidParameterError("path", "a folder written by gnnprivacy partition "
                                    f"({META})", str(folder))
    meta = read_json(meta_file)
    if not isinstance(meta, dict):
        raise InvalidParameterError("path", "a shard folder whose meta.json is a JSON object",
                                    f"{meta_file}: a JSON {type(meta).__name__}")
    for key, ok in (("digests", lambda v: isinstance(v, dict) and all(
                        isinstance(a, str) and isinstance(b, str) for a, b in v.items())),
                    ("files", lambda v: isinstance(v, list) and all(isinstance(f, str)
                                                                    for f in v)),
                    ("partition_id", lambda v: isinstance(v, str)),
                    ("kind", lambda v: isinstance(v, str))):
        if key in meta and not ok(meta[key]):
            raise InvalidParameterError("path", f"a meta.json whose {key!r} is as a partition "
                                        "writes it", f"{meta_file}: {key} = {_short(meta[key])}")
    found = meta.get("kind", "nodes")
    if found != kind:
        raise InvalidParameterError("path", f"shards of {kind} (this folder holds shards of "
                                    f"{found!r})", str(folder))
    for key, typ in keys.items():
        value = meta.get(key)
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0
              if typ is int else
              isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                              and v >= 0 for v in value)
              if typ is list else isinstance(value, typ))
        if not ok:
            what = {int: "a non-negative integer", list: "a list of non-negative integers",
                    str: "a string"}.get(typ, typ.__name__)
            raise InvalidParameterError("path", f"a meta.json whose {key!r} is {what}",
                                        f"{meta_file}: {key} = {_short(value)}")
    return meta


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_array(folder: Path, rel: str, *, kinds: str, shape: tuple,
               meta: dict | None = None) -> np.ndarray:
    """``folder/rel`` memory-mapped, of a dtype kind in ``kinds`` (``"iu"``, ``"b"``, ``"f"``)
    and of ``shape`` (``None`` entries match any size), with the digest ``meta`` records.

    Raises:
        InvalidParameterError: missing, unreadable, of another dtype or shape, or of
            another content than the partition wrote (named).
    """
    path = folder / rel
    if not path.is_file():
        raise InvalidParameterError("path", "complete shards", f"{folder}: missing {rel}")
    if meta is not None:
        check_digest(folder, meta, rel)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - a damaged file of any kind gets one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidParameterError("path", "shards whose .npy files are intact",
                                    f"{path}: {reason[:200]}") from None
    if array.dtype.kind not in kinds or len(array.shape) != len(shape) or any(
            want is not None and got != want for got, want in zip(array.shape, shape)):
        want = "x".join("*" if s is None else str(s) for s in shape) or "scalar"
        raise InvalidParameterError(
            "path", "shards whose arrays match meta.json",
            f"{path}: {array.dtype} of shape {tuple(array.shape)}, expected "
            f"{'/'.join({'i': 'int', 'u': 'uint', 'b': 'bool', 'f': 'float'}[k] for k in kinds)} "
            f"of shape {want}")
    return array


def check_part_rows(folder: Path, meta: dict, part: int, a: dict, *, ids: str, unit: str,
                    total: int) -> None:
    """The checks every part gets: its ids (``a[ids]``) ascending in ``[0, total)`` and where
    ``owner.npy`` / ``local.npy`` put them, labels below the class count, and the number of
    training units (``unit``: node or graph) that ``meta.json`` says."""
    def bad(rel: str, what: str):
        return InvalidParameterError("path", "shards whose files agree with each other",
                                     f"{folder}/{rel}: {what}")

    rows = np.asarray(a[ids], dtype=np.int64)
    rel = f"part{part}/{ids}.npy"
    if rows.size and (rows[0] < 0 or rows[-1] >= total or np.any(np.diff(rows) <= 0)):
        raise bad(rel, f"not ascending {unit} ids in [0, {total})")
    if rows.size and (np.any(np.asarray(a["owner"][rows]) != part)
                      or np.any(np.asarray(a["local"][rows]) != np.arange(rows.size))):
        raise bad(rel, f"{unit}s that owner.npy / local.npy do not give to part{part} (parts "
                  "of different partitions?)")
    y = np.asarray(a["y"])
    if y.size and (y.min() < 0 or y.max() >= meta["num_classes"]):
        raise bad(f"part{part}/y.npy", f"labels outside [0, {meta['num_classes']})")
    count = int(np.count_nonzero(a["train_mask"]))
    if count != meta["num_train"]:
        raise bad("train_mask.npy", f"{count} training {unit}s, meta.json says "
                  f"{meta['num_train']}")
