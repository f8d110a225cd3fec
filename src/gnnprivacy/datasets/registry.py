"""Dataset registry: names -> metadata (`DatasetInfo`) and a loader function.

Datasets register themselves with the `register_dataset` decorator of
``gnnprivacy.datasets.spec`` (see ``gnnprivacy.datasets.catalog``); this module looks names
up, importing the catalog first. Unknown names raise
`UnknownNameError`, whose message lists the registered names.

This module imports neither torch nor PyG, so listing datasets (``gnnprivacy datasets``)
stays cheap.
"""

from __future__ import annotations

from gnnprivacy.datasets.spec import (  # noqa: F401 (re-exported)
    _REGISTRY, SPLIT_KINDS, DatasetInfo, DatasetSpec, register_dataset)
from gnnprivacy.errors import UnknownNameError


def _ensure_catalog() -> None:
    # The built-in datasets live in ``catalog``; importing it registers them.
    from gnnprivacy.datasets import catalog  # noqa: F401


def get_spec(name: str) -> DatasetSpec:
    """The registered `DatasetSpec` for ``name`` (case-insensitive).

    Raises:
        UnknownNameError: ``name`` is not registered; the message lists the choices.
    """
    _ensure_catalog()
    key = name.lower() if isinstance(name, str) else name
    if key not in _REGISTRY:
        raise UnknownNameError("dataset", name, _REGISTRY)
    return _REGISTRY[key]


def list_datasets() -> list[str]:
    """Sorted names of every registered dataset."""
    _ensure_catalog()
    return sorted(_REGISTRY)


def dataset_info(name: str) -> DatasetInfo:
    """The `DatasetInfo` of ``name`` (description, PyG class, raw files, papers)."""
    return get_spec(name).info
