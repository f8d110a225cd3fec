"""On-disk cache of accounting results: one-step PLDs, calibrations, composed epsilons.

Location: ``$GNNPRIVACY_ACCOUNTING_CACHE`` if set, else ``$GNNPRIVACY_CACHE/accounting``
(the folder the dataset cache shares), else ``~/.cache/gnnprivacy/accounting``;
``GNNPRIVACY_ACCOUNTING_CACHE=off`` (or ``0``/``none``) disables it. (The switch has its own
variable: ``GNNPRIVACY_CACHE`` names a folder, and ``off`` there would be a folder ``./off``
for the dataset cache.)
Entries are keyed by a SHA-256 of the event's parameters, the numerical options, this
module's :data:`CACHE_VERSION` and dp_accounting's version, so a change of any of them
misses the cache instead of reading a stale value.

Writes are atomic (a temporary file in the same directory, then ``os.replace``), so
concurrent processes never read a partial entry; two writers of one key write the same
content. An unreadable entry is ignored (and recomputed), never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

#: bump whenever an accounting formula or its numerics change, to invalidate old entries
CACHE_VERSION = 1
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


def load_json(key: str) -> Optional[dict]:
    """The JSON entry stored under ``key``, or ``None``."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        return json.loads((directory / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None


def save_json(key: str, value: dict) -> None:
    """Store a JSON entry (best effort: a full disk only loses the cache)."""
    directory = cache_dir()
    if directory is None:
        return
    try:
        _atomic_write(directory / f"{key}.json", lambda h: h.write(json.dumps(value).encode()))
    except OSError:
        pass


def load_arrays(key: str) -> Optional[dict]:
    """The arrays stored under ``key`` (a dict of numpy arrays), or ``None``."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        with np.load(directory / f"{key}.npz", allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, KeyError, EOFError):
        return None


def save_arrays(key: str, **arrays) -> None:
    """Store numpy arrays under ``key`` (best effort)."""
    directory = cache_dir()
    if directory is None:
        return
    try:
        _atomic_write(directory / f"{key}.npz", lambda h: np.savez(h, **arrays))
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
    """Inverse of :func:`pld_to_arrays`."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pmfs = []
    for name in ("remove", "add"):
        disc, lower, inf_mass, pess = arrays[f"{name}_meta"].tolist()
        pmfs.append(pld_pmf.DensePLDPmf(float(disc), int(lower), arrays[f"{name}_probs"],
                                        float(inf_mass), bool(pess)))
    return pld_lib.PrivacyLossDistribution(pmfs[0], pmfs[1])
