"""Whether a registered dataset can be loaded from a data root, and if not, why.

Checks the presence of the raw files listed in `DatasetInfo`, that each present file
reads as its format requires (`check_raw_file`: zip CRCs,
gzip streams, numeric tables ...), and the optional Python packages. A file that passed is
remembered by its path, size and modification time in ``<cache>/raw-checks.json`` (best
effort), so only new or changed files are read again. No torch import.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnnprivacy.datasets.paths import DataRoot, missing_files, resolve_root
from gnnprivacy.datasets.registry import dataset_info, list_datasets


@dataclass(frozen=True)
class DatasetStatus:
    """Local availability of one dataset.

    Attributes:
        name: registry name.
        available: raw files present (or generated) and optional packages installed.
        root: the data root looked in (``None`` for generated datasets).
        missing_files: absolute paths of the missing raw files.
        missing_packages: optional packages the dataset needs but that are not installed.
        corrupt_files: ``"path (reason)"`` of the present raw files that do not read.
        reason: one line: ``"ok"``, ``"generated locally"`` or what is missing.
    """

    name: str
    available: bool
    root: str | None
    missing_files: tuple[str, ...] = ()
    missing_packages: tuple[str, ...] = ()
    reason: str = "ok"
    corrupt_files: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the fields."""
        return {"name": self.name, "available": self.available, "root": self.root,
                "missing_files": list(self.missing_files),
                "missing_packages": list(self.missing_packages), "reason": self.reason,
                "corrupt_files": list(self.corrupt_files)}


def dataset_status(name: str, root: str | os.PathLike | DataRoot | None = None) -> DatasetStatus:
    """Availability of ``name`` under ``root`` (resolved as in ``load_dataset``).

    Raises:
        UnknownNameError: unknown dataset.
        InvalidParameterError: an explicit root that is not an existing directory.
    """
    info = dataset_info(name)
    if info.generated:
        return DatasetStatus(info.name, True, None, reason="generated locally (no files)")
    data_root = root if isinstance(root, DataRoot) else resolve_root(root)
    missing = tuple(str(data_root.path / p) for p in missing_files(data_root.path, info.raw_files))
    packages = tuple(p for p in info.requires if importlib.util.find_spec(p) is None)
    present = [p for p in info.raw_files if str(data_root.path / p) not in missing]
    corrupt = tuple(f"{data_root.path / rel} ({why})" for rel, why in _corrupt_files(data_root.path, present))
    reasons = []
    if packages:
        reasons.append(f"needs package(s) not installed: {', '.join(packages)}")
    if missing:
        reasons.append(f"{len(missing)} of {len(info.raw_files)} raw file(s) missing: {', '.join(missing)}")
    if corrupt:
        reasons.append(f"corrupt raw file(s): {'; '.join(corrupt)}")
    return DatasetStatus(info.name, not (missing or packages or corrupt), str(data_root.path), missing,
                         packages, "; ".join(reasons) or "ok", corrupt)


_CHECKS_FILE = "raw-checks.json"


def _corrupt_files(root: Path, relative: list[str]) -> list[tuple[str, str]]:
    """``(relative path, reason)`` of the files under ``root`` that do not read as their format
    requires; files that passed are remembered by (path, size, mtime) in the cache folder."""
    import json

    from gnnprivacy.datasets.paths import resolve_cache
    from gnnprivacy.datasets.validate import check_raw_file

    memo_path = resolve_cache() / _CHECKS_FILE
    try:
        memo = json.loads(memo_path.read_text())
        memo = memo if isinstance(memo, dict) else {}
    except (OSError, ValueError):
        memo = {}
    out, changed = [], False
    for rel in relative:
        path = root / rel
        try:
            st = path.stat()
        except OSError as exc:
            out.append((rel, f"unreadable: {exc.strerror}"))
            continue
        key, stamp = str(path), [st.st_size, st.st_mtime_ns]
        if memo.get(key) == stamp:  # passed before, unchanged since
            continue
        try:
            with warnings.catch_warnings():  # a library's deprecation notice is not a bad file
                warnings.simplefilter("ignore")
                check_raw_file(path)
        except Exception as exc:  # noqa: BLE001 - any failure means "this file is bad"
            out.append((rel, f"{type(exc).__name__}: {exc}"))  # not remembered: checked again next time
            continue
        memo[key], changed = stamp, True
    if changed:
        try:
            from gnnprivacy._files import atomic_write

            atomic_write(memo_path, json.dumps(memo), what="raw file checks")
        except OSError:
            pass  # a read-only cache only costs re-reading the files next time
    return out


def all_statuses(root: str | os.PathLike | DataRoot | None = None) -> list[DatasetStatus]:
    """`dataset_status` of every registered dataset (root resolved once)."""
    data_root = root if isinstance(root, DataRoot) else resolve_root(root)
    return [dataset_status(name, data_root) for name in list_datasets()]


def datasets_table(data_root: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """One dict per registered dataset: ``name``, ``available``, ``missing`` and the rest of
    its `DatasetStatus` (``gp.datasets()``)."""
    import dataclasses

    return [dataclasses.asdict(dataset_status(name, root=data_root)) for name in list_datasets()]
