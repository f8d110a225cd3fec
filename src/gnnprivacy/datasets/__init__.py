"""Datasets: a registry of real graphs (read offline through PyG) and a synthetic CSBM.

Main entry point: `load_dataset`. ``list_datasets()`` / ``dataset_info(name)`` describe
what is registered, ``dataset_status(name)`` tells whether its raw files are present.
Splits are `Split` objects, saved with their seed; ``inductive_train_graph`` gives
the training graph of the inductive setting.

Names that need torch (``load_dataset``, ``inductive_train_graph``, ``generate_csbm``,
``GermanCredit``) are imported on first use, so listing datasets stays light.
"""

from __future__ import annotations

import sys
import types

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports
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

if TYPE_CHECKING:   # loaded on first use (they import torch)
    from gnnprivacy.datasets.csbm import generate_csbm
    from gnnprivacy.datasets.german import GermanCredit
    from gnnprivacy.datasets.inductive import inductive_train_graph
    from gnnprivacy.datasets.load import load_dataset
    from gnnprivacy.datasets.validate import validate_data

__all__ = [
    "DatasetInfo", "DatasetStatus", "GermanCredit", "Split", "dataset_info", "dataset_status",
    "generate_csbm", "inductive_train_graph", "list_datasets", "load_dataset", "random_split",
    "register_dataset", "resolve_cache", "resolve_fractions", "resolve_root", "split_from_masks",
    "validate_data",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())


class _CallableDatasets(types.ModuleType):
    """Importing this subpackage makes it the attribute ``gnnprivacy.datasets``, in place of the
    top-level function ``gp.datasets()``; so the module answers a call the same way."""

    def __call__(self, data_root: str | None = None) -> list[dict]:
        from gnnprivacy.datasets.status import datasets_table

        return datasets_table(data_root)


sys.modules[__name__].__class__ = _CallableDatasets
