"""On-disk cache of accounting results: one-step PLDs, calibrations, composed epsilons.

Location: ``$GNNPRIVACY_ACCOUNTING_CACHE`` if set, else ``$GNNPRIVACY_CACHE/accounting``
(the folder the dataset cache shares), else ``~/.cache/gnnprivacy/accounting``;
``GNNPRIVACY_ACCOUNTING_CACHE=off`` (or ``0``/``none``) disables it. (The switch has its own
variable: ``GNNPRIVACY_CACHE`` names a folder, and ``off`` there would be a folder ``./off``
for the dataset cache.)
Entries are keyed by a SHA-256 of the event's parameters, the numerical options, this
module's `CACHE_VERSION` and dp_accounting's version, so a change of any of them
misses the cache instead of reading a stale value.

Writes are atomic (a temporary file in the same directory, then ``os.replace``), so
concurrent processes never read a partial entry; two writers of one key write the same
content. An unreadable entry is ignored (and recomputed), never trusted. Entries are JSON
and ``.npz`` read with ``allow_pickle=False``: an entry holding a pickled object is refused
with a warning (nothing in it runs) and recomputed.

Every entry carries a SHA-256 checksum of its key and content (issue 22 item 7). An entry
whose checksum does not match (a damaged or hand-edited file) is deleted and recomputed,
with a warning naming the file. The checksum detects damage and edits, not a forger who
recomputes it; the runner's check of the executed ledger in a fresh accountant
(`gnnprivacy.accounting.verify`, no cache) covers the epsilon of every finished run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

#: bump whenever an accounting formula or its numerics change, to invalidate old entries
#: (3: entries carry a checksum; DP-GNN's RDP no longer rounds below zero at large noise)
CACHE_VERSION = 3
ENV = "GNNPRIVACY_ACCOUNTING_CACHE"
SHARED_ENV = "GNNPRIVACY_CACHE"
_OFF = {"off", "0", "none", "false", "no"}


def cache_dir() -> Optional[Path]:
    """The cache directory (created on demand), or ``None`` when disabled or unwritable."""
    own = os.environ.get(ENV)
    if own is not None and own.strip().lower() in _OFF:
        return None
    if own:
        path = Path(own).expanduser()
    else:
        shared = os.environ.get(SHARED_ENV)
        base = Path(shared).expanduser() if shared else Path.home() / ".cache" / "gnnprivacy"
        path = base / "accounting"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def _dp_accounting_version() -> str:
    try:
        from importlib.metadata import version
        return version("dp-accounting")
    except Exception:  # noqa: BLE001 - any failure just means "unknown"
        return "unknown"


def key_of(kind: str, *parts) -> str:
    """A stable key for ``parts`` (JSON-able, or made so with ``repr``)."""
    blob = json.dumps([CACHE_VERSION, _dp_accounting_version(), kind, *parts], default=repr,
                      sort_keys=True)
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:40]}"


def _atomic_write(path: Path, write) -> None:
    import io

    from gnnprivacy._files import atomic_write

    buffer = io.BytesIO()  # serialised first, so a full disk can only fail the plain write below
    write(buffer)
    atomic_write(path, buffer.getvalue(), what="accounting cache entry")


def _json_digest(key: str, value) -> str:
    blob = json.dumps([key, value], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _arrays_digest(key: str, arrays: dict) -> str:
    h = hashlib.sha256(key.encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _reject(path: Path, why: str) -> None:
    warnings.warn(f"accounting cache entry {path} {why}; ignoring it and recomputing",
                  RuntimeWarning, stacklevel=3)
    try:
        path.unlink()
    except OSError:
        pass


def load_json(key: str) -> Optional[dict]:
    """The JSON entry stored under ``key``, or ``None`` (also for a bad checksum)."""
    directory = cache_dir()
    if directory is None:
        return None
    path = directory / f"{key}.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(stored, dict) and isinstance(stored.get("value"), dict)
            and stored.get("sha256") == _json_digest(key, stored["value"])):
        _reject(path, "failed its checksum")
        return None
    return stored["value"]


def save_json(key: str, value: dict) -> None:
    """Store a JSON entry with its checksum (best effort: a full disk only loses the cache)."""
    directory = cache_dir()
    if directory is None:
        return
    blob = json.dumps({"value": value, "sha256": _json_digest(key, value)}).encode()
    try:
        _atomic_write(directory / f"{key}.json", lambda h: h.write(blob))
    except OSError:
        pass


def load_arrays(key: str) -> Optional[dict]:
    """The arrays stored under ``key`` (a dict of numpy arrays), or ``None`` (also for a
    bad checksum)."""
    directory = cache_dir()
    if directory is None:
        return None
    path = directory / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, KeyError, EOFError):
        return None
    except ValueError as exc:  # e.g. an object array: read without unpickling, so refused
        _reject(path, f"does not read as plain arrays ({str(exc).splitlines()[0][:120]})")
        return None
    digest = arrays.pop("_sha256", None)
    if digest is None or str(digest) != _arrays_digest(key, arrays):
        _reject(path, "failed its checksum")
        return None
    return arrays


def save_arrays(key: str, **arrays) -> None:
    """Store numpy arrays under ``key`` with their checksum (best effort)."""
    directory = cache_dir()
    if directory is None:
        return
    digest = np.array(_arrays_digest(key, arrays))
    try:
        _atomic_write(directory / f"{key}.npz", lambda h: np.savez(h, _sha256=digest, **arrays))
    except OSError:
        pass


def pld_to_arrays(pld) -> Optional[dict]:
    """A dp_accounting PLD with dense PMFs as arrays (``None`` for sparse PMFs)."""
    from dp_accounting.pld import pld_pmf

    out = {}
    for name, pmf in (("remove", pld._pmf_remove), ("add", pld._pmf_add)):  # noqa: SLF001
        if not isinstance(pmf, pld_pmf.DensePLDPmf):
            return None
        out[f"{name}_meta"] = np.array([pmf._discretization, pmf._lower_loss,  # noqa: SLF001
                                        pmf._infinity_mass,                    # noqa: SLF001
                                        float(pmf._pessimistic_estimate)])     # noqa: SLF001
        out[f"{name}_probs"] = np.asarray(pmf._probs, dtype=float)            # noqa: SLF001
    return out


def pld_from_arrays(arrays: dict):
    """Inverse of `pld_to_arrays`."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pmfs = []
    for name in ("remove", "add"):
        disc, lower, inf_mass, pess = arrays[f"{name}_meta"].tolist()
        pmfs.append(pld_pmf.DensePLDPmf(float(disc), int(lower), arrays[f"{name}_probs"],
                                        float(inf_mass), bool(pess)))
    return pld_lib.PrivacyLossDistribution(pmfs[0], pmfs[1])
