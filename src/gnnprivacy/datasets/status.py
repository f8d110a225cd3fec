"""Whether a registered dataset can be loaded from a data root, and if not, why.

Checks the presence of the raw files listed in `DatasetInfo` (not their contents)
and of optional Python packages. No torch import.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
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
        reason: one line: ``"ok"``, ``"generated locally"`` or what is missing.
    """

    name: str
    available: bool
    root: str | None
    missing_files: tuple[str, ...] = ()
    missing_packages: tuple[str, ...] = ()
    reason: str = "ok"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the fields."""
        return {"name": self.name, "available": self.available, "root": self.root,
                "missing_files": list(self.missing_files),
                "missing_packages": list(self.missing_packages), "reason": self.reason}


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
    reasons = []
    if packages:
        reasons.append(f"needs package(s) not installed: {', '.join(packages)}")
    if missing:
        reasons.append(f"{len(missing)} of {len(info.raw_files)} raw file(s) missing: {', '.join(missing)}")
    return DatasetStatus(info.name, not (missing or packages), str(data_root.path), missing,
                         packages, "; ".join(reasons) or "ok")


def all_statuses(root: str | os.PathLike | DataRoot | None = None) -> list[DatasetStatus]:
    """`dataset_status` of every registered dataset (root resolved once)."""
    data_root = root if isinstance(root, DataRoot) else resolve_root(root)
    return [dataset_status(name, data_root) for name in list_datasets()]
