"""Datasets: a registry of real graphs (read offline through PyG) and a synthetic CSBM.

Main entry point: :func:`load_dataset`. ``list_datasets()`` / ``dataset_info(name)`` describe
what is registered, ``dataset_status(name)`` tells whether its raw files are present.
Splits are :class:`Split` objects, saved with their seed; ``inductive_train_graph`` gives
the training graph of the inductive setting.

Names that need torch (``load_dataset``, ``inductive_train_graph``, ``generate_csbm``,
``GermanCredit``) are imported on first use, so listing datasets stays light.
"""

from __future__ import annotations

from gnnprivacy._lazy import lazy_getattr
from gnnprivacy.datasets.paths import resolve_cache, resolve_root
from gnnprivacy.datasets.registry import (
    DatasetInfo,
    dataset_info,
    list_datasets,
    register_dataset,
)
from gnnprivacy.datasets.splits import (
    Split,
    random_split,
    resolve_fractions,
    split_from_masks,
)
from gnnprivacy.datasets.status import DatasetStatus, dataset_status

_LAZY = {
    "load_dataset": "gnnprivacy.datasets.load",
    "inductive_train_graph": "gnnprivacy.datasets.inductive",
    "generate_csbm": "gnnprivacy.datasets.csbm",
    "GermanCredit": "gnnprivacy.datasets.german",
    "validate_data": "gnnprivacy.datasets.validate",
}

__all__ = [
    "DatasetInfo", "DatasetStatus", "GermanCredit", "Split", "dataset_info", "dataset_status",
    "generate_csbm", "inductive_train_graph", "list_datasets", "load_dataset", "random_split",
    "register_dataset", "resolve_cache", "resolve_fractions", "resolve_root", "split_from_masks",
    "validate_data",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
